# NCCL, for the nccl communication backend, built with the cuda backend (CMakeLists.txt includes
# this file after third_party/cuda.cmake) whenever NCCL is found; without it `--comm nccl` says
# it is not built. Where NCCL is looked for, first match wins:
#   -DNCCL_ROOT=DIR, or the NCCL_ROOT / NCCL_HOME environment variables (DIR/include/nccl.h,
#   DIR/lib/libnccl.so*); the CUDA toolkit's own directories; the nvidia-nccl-cu* Python wheel
#   that PyTorch installs (site-packages/nvidia/nccl); the system paths.
#   -DMOEBENCH_NCCL=OFF builds without it.

option(MOEBENCH_NCCL "Build the nccl communication backend when NCCL is found" ON)

set(moebench_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME})
get_filename_component(moebench_cuda_root "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
list(APPEND moebench_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${moebench_cuda_root})
find_program(MOEBENCH_PYTHON3 NAMES python3 python)
if(MOEBENCH_PYTHON3)
  execute_process(
    COMMAND ${MOEBENCH_PYTHON3} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE moebench_wheel_nccl OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
    RESULT_VARIABLE moebench_wheel_status)
  if(moebench_wheel_status EQUAL 0 AND moebench_wheel_nccl)
    list(APPEND moebench_nccl_hints ${moebench_wheel_nccl})
  endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${moebench_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# A wheel ships only libnccl.so.2, without the unversioned link.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${moebench_nccl_hints}
             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)

if(MOEBENCH_NCCL AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(MOEBENCH_HAVE_NCCL ON)
  message(STATUS "moebench: nccl backend with ${NCCL_LIBRARY}")
else()
  message(STATUS "moebench: NCCL not found (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: "
                 "${NCCL_LIBRARY}); building without the nccl backend")
endif()
