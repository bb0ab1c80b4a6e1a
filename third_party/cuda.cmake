# The CUDA toolkit, for the cuda compute backend (the top CMakeLists.txt includes this file when
# check_language(CUDA) found nvcc; harness/layers.cmake declares the module). Needs the CUDA
# runtime, cuBLAS and cuBLASLt from the toolkit; CUB comes with it. cuDNN (with cudnn-frontend's
# headers) is optional: the attention's fused path, at the end of this file.
#
#   -DCMAKE_CUDA_ARCHITECTURES=90     one architecture (default "90;100": Hopper and Blackwell)

if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  set(moebench_cuda_archs_given ON)
else()
  set(moebench_cuda_archs_given OFF)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# Hopper and Blackwell by default; sm_100 needs nvcc 12.8 or newer.
if(NOT moebench_cuda_archs_given)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
    set(CMAKE_CUDA_ARCHITECTURES "90;100" CACHE STRING "CUDA architectures to build for" FORCE)
  else()
    set(CMAKE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures to build for" FORCE)
  endif()
endif()
# The .cu files include the same C++20 headers as the host code (compute.hpp uses <span>), which
# nvcc 12+ with g++ 10+ compiles. CMake 3.25 does not know nvcc's C++20 flag, so a CUDA target
# would inherit CXX_STANDARD 20 and fail to configure: tell it.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
set(MOEBENCH_HAVE_CUDA ON)
message(STATUS "moebench: cuda backend for architectures ${CMAKE_CUDA_ARCHITECTURES}")

# cuDNN's fused flash attention (--attention-impl cudnn) needs cuDNN (see below) and
# cudnn-frontend's header-only C++ API, found in, first match wins: -DCUDNN_FRONTEND_INCLUDE_DIR,
# MOEBENCH_DEPS_PREFIX/include, BUILD/_deps/cudnn-frontend/include (where
# harness/scripts/build.sh has third_party/fetch-cudnn-frontend.sh put them). Without either the
# cuda backend runs attention as batched GEMMs only. -DMOEBENCH_CUDNN=OFF builds without it.
option(MOEBENCH_CUDNN "Build cuDNN flash attention when cuDNN and cudnn-frontend are found" ON)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${MOEBENCH_DEPS_PREFIX}/include ${CMAKE_BINARY_DIR}/_deps/cudnn-frontend/include
          NO_DEFAULT_PATH)
# cuDNN: the toolkit's, the carried prefix's, or the nvidia-cudnn-cu* wheel's (site-packages/
# nvidia/cudnn, as PyTorch installs it; it ships libcudnn.so.9 without the unversioned link).
set(moebench_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS}/.. ${MOEBENCH_DEPS_PREFIX})
find_program(MOEBENCH_PYTHON3 NAMES python3 python)
if(MOEBENCH_PYTHON3)
  execute_process(
    COMMAND ${MOEBENCH_PYTHON3} -c "import nvidia.cudnn as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE moebench_wheel_cudnn OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
    RESULT_VARIABLE moebench_wheel_cudnn_status)
  if(moebench_wheel_cudnn_status EQUAL 0 AND moebench_wheel_cudnn)
    list(APPEND moebench_cudnn_hints ${moebench_wheel_cudnn})
  endif()
endif()
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${moebench_cudnn_hints}
          PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${moebench_cudnn_hints} PATH_SUFFIXES lib lib64)
set(MOEBENCH_HAVE_CUDNN OFF)
if(MOEBENCH_CUDNN AND CUDNN_FRONTEND_INCLUDE_DIR AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  set(MOEBENCH_HAVE_CUDNN ON)
  message(STATUS "moebench: cuDNN attention with ${CUDNN_LIBRARY} and ${CUDNN_FRONTEND_INCLUDE_DIR}")
else()
  message(STATUS "moebench: no cuDNN attention (cudnn_frontend.h: ${CUDNN_FRONTEND_INCLUDE_DIR}, "
                 "cudnn.h: ${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY})")
endif()
