#!/usr/bin/env bash
# Checks that a build made by tests/device/check.sh used the carried dependencies and nothing of
# the same name from the system: every MPI, BLAS, OpenSSL and header-only library header the
# compiler read (ninja's dependency log), every library moebench loads (ldd), and what CMake
# found (CMakeCache.txt) must lie under the carried prefix. On the GPU machine there is nothing
# else to find; on a development machine (CHECK_SH_CPU_ONLY=1) this is what proves the dry run
# tested the carried files rather than the distribution's.
# Usage: provenance.sh BUILD_DIR DEPS_PREFIX
set -uo pipefail
build="$1"
deps="$2"
bad=0

all_deps=$(ninja -C "$build" -t deps 2>/dev/null)
carried_headers=$(echo "$all_deps" | grep -c "^ *$deps/")
echo "provenance: $carried_headers header reads from the carried prefix"
if [ "$carried_headers" -eq 0 ]; then
  echo "provenance: no header came from $deps (is ninja's dependency log empty?)"
  bad=1
fi
echo "provenance: headers of the carried libraries read from outside $deps:"
system_headers=$(echo "$all_deps" |
  grep -E '^ +/usr/(local/)?include/((x86_64|aarch64)-linux-gnu/)?(CLI|nlohmann|doctest|valijson|openssl|openmpi|cblas|openblas|mpi)' |
  sort -u)
if [ -n "$system_headers" ]; then
  echo "$system_headers" | head -20
  bad=1
else
  echo "  none"
fi

echo "provenance: libraries moebench and its cuda plugin (loaded by --backend cuda) load:"
for bin in "$build/moebench" "$build/libmoebench_cuda.so"; do
  [ -e "$bin" ] || continue
  echo " ${bin##*/}:"
  ldd "$bin" | grep -E 'libmpi|blas|libcrypto|libcudart|libcublas|libnccl|libcudnn' | sed 's/^/  /'
done
for lib in libmpi.so libscipy_openblas.so libcrypto.so; do
  where=$(ldd "$build/moebench" | awk -v l="$lib" 'index($1, l) == 1 { print $3 }')
  case "$where" in
    "$deps"/*) ;;
    *)
      echo "provenance: $lib resolves to '${where:-nothing}', not the carried copy under $deps"
      bad=1
      ;;
  esac
done

echo "provenance: what CMake found:"
for key in MPI_CXX_COMPILER MPIEXEC_EXECUTABLE MOEBENCH_BLAS_LIBRARY CBLAS_INCLUDE_DIR VALIJSON_INCLUDE_DIR \
  OPENSSL_INCLUDE_DIR OPENSSL_CRYPTO_LIBRARY CLI11_DIR nlohmann_json_DIR doctest_DIR; do
  value=$(grep -E "^$key:" "$build/CMakeCache.txt" | head -n1 | cut -d= -f2-)
  echo "  $key = $value"
  case "$value" in
    "$deps"/*) ;;
    *)
      echo "provenance: $key is not under $deps"
      bad=1
      ;;
  esac
done
for key in NCCL_INCLUDE_DIR NCCL_LIBRARY CUDAToolkit_BIN_DIR CMAKE_CUDA_COMPILER; do
  value=$(grep -E "^$key:" "$build/CMakeCache.txt" | head -n1 | cut -d= -f2-)
  [ -n "$value" ] && echo "  $key = $value"
done
exit "$bad"
