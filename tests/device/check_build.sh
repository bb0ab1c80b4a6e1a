# shellcheck shell=bash disable=SC2154,SC2034  # check.sh's variables, set there and used there
# tests/device/check.sh's build, sourced by it (its step, skip, say and finish, its variables):
# unpack the carried dependencies, configure, build, check where everything came from. Leaves
# `mpirun_cmd` (the carried Open MPI) and the build in $build.
#
# cuDNN is asked for (-DMOEBENCH_CUDNN=ON: its headers and this machine's cuDNN have never been
# compiled together before the first call). Where configuring or building with it fails, the
# check configures and builds again without it and writes why into $cudnn_state, which the
# summary reports: the runs then measure the batched-GEMM attention rather than nothing.

if [ ! -f "$carried" ]; then
  say "no $carried: run tests/device/prepare.sh here first and carry tests/device/.cache/carry"
  skip unpack "missing deps.tar.gz"
  finish
fi
rm -rf "$work/deps"
step unpack "${limit_of[unpack]}" tar -xzf "$carried" -C "$work" || finish
deps="$work/deps"
ompi="$deps/openmpi"
export PATH="$ompi/bin:$PATH"
# The carried Open MPI was built for another prefix: its wrappers and mpirun find their own
# through OPAL_PREFIX.
export OPAL_PREFIX="$ompi"
# Open MPI 5 as root, ranks sharing one machine's cores (oversubscribed where fewer), shared
# memory between them: no network transport (UCX, libfabric) to probe, and no cross-memory-attach
# single copy (ptrace-based), which a sandbox may refuse.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,sm OMPI_MCA_smsc=^cma
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
mpirun_cmd=("$ompi/bin/mpirun" --oversubscribe)

cmake_args=(-S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DMOEBENCH_DEPS_PREFIX="$deps" -DMOEBENCH_BLAS_LIBRARY="$deps/lib/libscipy_openblas.so"
  -DMPI_C_COMPILER="$ompi/bin/mpicc" -DMPI_CXX_COMPILER="$ompi/bin/mpicxx"
  -DMPIEXEC_EXECUTABLE="$ompi/bin/mpirun"
  -DOPENSSL_INCLUDE_DIR="$deps/include" -DOPENSSL_CRYPTO_LIBRARY="$deps/lib/libcrypto.so.3")
targets=(moebench)
if [ "$cpu_only" = 1 ]; then
  # The cuda backend off; cuDNN's host part (its graphs and their validation) still built.
  cmake_args+=(-DMOEBENCH_CUDA=OFF)
  targets+=(moebench_tests)
else
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
  fi
  cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90 -DMOEBENCH_GPU_TESTS=ON)
  # NCCL from PyTorch's wheel (nvidia-nccl-cu13) when the toolkit has none.
  nccl_root="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
  [ -n "$nccl_root" ] && cmake_args+=(-DNCCL_ROOT="$nccl_root")
  targets+=(moebench_cuda moebench_gpu_tests)  # the plugin is its own target
fi
# shellcheck disable=SC2206  # CHECK_SH_CMAKE_ARGS is a list of -D flags
extra_cmake_args=(${CHECK_SH_CMAKE_ARGS:-})
# A fresh build folder each time, unless CHECK_SH_KEEP_BUILD=1 (reruns on the same machine).
[ "${CHECK_SH_KEEP_BUILD:-0}" = 1 ] || rm -rf "$build"

# configure NAME FLAGS...: the project with the common flags, these, then CHECK_SH_CMAKE_ARGS.
configure() {
  local name="$1"
  shift
  step "$name" "${limit_of[configure]}" cmake "${cmake_args[@]}" "$@" "${extra_cmake_args[@]}"
}
# The targets this configuration can build (the nccl test and cuDNN's graph test where their
# parts were found), then the build, keeping going past a failed object so that moebench still
# links where only a test failed to compile.
build_all() {
  local name="$1" want=("${targets[@]}")
  grep -q '^build tests/gpu/nccl_communicator_test:' "$build/build.ninja" 2>/dev/null &&
    want+=(nccl_communicator_test)
  grep -q '^build tests/cudnn_attention_tests:' "$build/build.ninja" 2>/dev/null &&
    want+=(cudnn_attention_tests)
  step "$name" "${limit_of[build]}" cmake --build "$build" -j "$jobs" --target "${want[@]}" -- -k 0
}
without_cudnn() {  # without_cudnn WHY: configure and build again with -DMOEBENCH_CUDNN=OFF
  echo "off: $1 (check.log has the errors); configured and built again without cuDNN" \
    >"$cudnn_state"
  say "cuDNN: $1; configuring and building again without it"
  configure configure_without_cudnn -DMOEBENCH_CUDNN=OFF || return 1
  build_all build_without_cudnn
}

if ! configure configure -DMOEBENCH_CUDNN=ON; then
  # Registering the GPU tests with ctest is the other part most likely to break on a new machine
  # (it runs only where a GPU is seen): without cuDNN first, then without registering them
  # (moebench_gpu_tests still runs directly).
  rm -rf "$build"
  echo "off: configuring with -DMOEBENCH_CUDNN=ON failed (check.log has why)" >"$cudnn_state"
  if ! configure configure_without_cudnn -DMOEBENCH_CUDNN=OFF; then
    [ "$cpu_only" = 1 ] && finish
    rm -rf "$build"
    configure configure_without_ctest_gpu_tests -DMOEBENCH_CUDNN=OFF -DMOEBENCH_GPU_TESTS=OFF ||
      finish
  fi
fi
# cuDNN's module is one object: where it failed to compile (its library is missing), the build
# goes on without it; any other failure is the build's own (moebench may still have linked).
if ! build_all build && [ "$(cat "$cudnn_state")" = on ] && [ ! -f "$build/libmb_cudnn.a" ]; then
  without_cudnn "cuDNN attention did not compile with -DMOEBENCH_CUDNN=ON"
fi
[ -x "$build/moebench" ] || finish
# Nothing from the system's MPI, BLAS or header-only packages may have slipped in.
step provenance "${limit_of[provenance]}" bash "$repo/tests/device/provenance.sh" "$build" "$deps"
