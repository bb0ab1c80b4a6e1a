# The CUDA toolkit, for the cuda compute backend (the top CMakeLists.txt includes this file when
# check_language(CUDA) found nvcc; harness/layers.cmake declares the module). Needs the CUDA
# runtime, cuBLAS and cuBLASLt from the toolkit; CUB comes with it. cuDNN (with cudnn-frontend's
# headers) is optional: the attention's fused path, third_party/cudnn.cmake.
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
