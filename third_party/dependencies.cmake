# Every dependency comes from the distribution's packages (third_party/install-deps.sh lists
# them) and is found with find_package; nothing is vendored.

find_package(MPI REQUIRED COMPONENTS CXX)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(doctest REQUIRED)

# A CBLAS for the cpu backend: OpenBLAS when present (its threads are set per rank).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS REQUIRED)
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

# CUDA is detected, not required.
include(CheckLanguage)
check_language(CUDA)
