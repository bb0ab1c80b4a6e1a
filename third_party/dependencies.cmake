# Every dependency comes from the distribution's packages (third_party/install-deps.sh lists
# them) and is found with find_package; nothing is vendored.

# Carried dependencies, for a machine without those packages (tests/device/check.sh):
# MOEBENCH_DEPS_PREFIX is searched before the system (headers, CMake package files, cblas.h) and
# MOEBENCH_BLAS_LIBRARY is the CBLAS library linked instead of looking for one. Unset by default.
set(MOEBENCH_DEPS_PREFIX "" CACHE PATH "prefix of carried dependencies, searched first")
set(MOEBENCH_BLAS_LIBRARY "" CACHE FILEPATH "CBLAS library to link instead of find_package(BLAS)")
if(MOEBENCH_DEPS_PREFIX)
  list(PREPEND CMAKE_PREFIX_PATH ${MOEBENCH_DEPS_PREFIX})
endif()

find_package(MPI REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)  # the GPU telemetry sampler (harness/device)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(doctest REQUIRED)

# A CBLAS for the cpu backend: OpenBLAS when present (its threads are set per rank).
if(MOEBENCH_BLAS_LIBRARY)
  set(BLAS_LIBRARIES ${MOEBENCH_BLAS_LIBRARY})
else()
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS)
  if(NOT BLAS_FOUND)
    unset(BLA_VENDOR)
    find_package(BLAS REQUIRED)
  endif()
endif()
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu aarch64-linux-gnu
          REQUIRED)
include(CheckSymbolExists)
set(CMAKE_REQUIRED_LIBRARIES ${BLAS_LIBRARIES})
check_symbol_exists(openblas_set_num_threads "${CBLAS_INCLUDE_DIR}/cblas.h" MOEBENCH_HAVE_OPENBLAS)
unset(CMAKE_REQUIRED_LIBRARIES)

# Header-only JSON Schema validator (Debian: libvalijson-dev) for `moebench validate` and the
# report's input checks.
find_path(VALIJSON_INCLUDE_DIR valijson/validator.hpp REQUIRED)

# SHA-256 of the inputs of `moebench report` (Debian: libssl-dev; only libcrypto is linked).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# CUDA is detected, not required.
include(CheckLanguage)
check_language(CUDA)
