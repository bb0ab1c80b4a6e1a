# The cuda compute backend, built whenever a CUDA toolkit is found (the top CMakeLists.txt
# includes this file after check_language(CUDA) found nvcc). Needs the CUDA runtime, cuBLAS and
# cuBLASLt from the toolkit; CUB comes with it. cuDNN is not used.
#
#   -DCMAKE_CUDA_ARCHITECTURES=90     one architecture (default "90;100": Hopper and Blackwell)
#   -DMOEBENCH_GPU_TESTS=ON|OFF       register moebench_gpu_tests with ctest (default: whether
#                                     `nvidia-smi -L` succeeds at configure time)

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

file(GLOB MOEBENCH_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/harness/compute/cuda/*.cu)
add_library(moebench_cuda STATIC ${MOEBENCH_CUDA_SOURCES})
# One shared CUDA runtime for the whole process (the host code links CUDA::cudart too).
set_target_properties(moebench_cuda PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
target_include_directories(moebench_cuda PRIVATE ${CMAKE_SOURCE_DIR})
# -lineinfo: source lines in profiles at no run-time cost.
target_compile_options(moebench_cuda PRIVATE -lineinfo -Xcompiler=-Wall)
# moebench_core calls make_cuda_compute and the .cu files call moebench_core (errors, tensor
# views): a cycle of static libraries, which CMake repeats on the link line. LINK_ONLY keeps
# moebench_core's host compile flags (-Wall -Wextra ...) away from nvcc.
target_link_libraries(moebench_cuda PUBLIC CUDA::cudart CUDA::cublasLt CUDA::cublas
                                    PRIVATE $<LINK_ONLY:moebench_core>)
target_link_libraries(moebench_core PUBLIC moebench_cuda)
target_compile_definitions(moebench_core PUBLIC MOEBENCH_HAVE_CUDA=1)

# GPU tests: the cuda backend against the cpu backend. Always built (compile errors fail CI);
# registered with ctest only where a GPU can run them.
add_executable(moebench_gpu_tests ${CMAKE_SOURCE_DIR}/tests/gpu/cuda_compute_test.cpp
                                  ${CMAKE_SOURCE_DIR}/tests/unit/main_test.cpp)
target_link_libraries(moebench_gpu_tests PRIVATE moebench_core doctest::doctest)

set(moebench_gpu_present OFF)
find_program(MOEBENCH_NVIDIA_SMI nvidia-smi)
if(MOEBENCH_NVIDIA_SMI)
  execute_process(COMMAND ${MOEBENCH_NVIDIA_SMI} -L RESULT_VARIABLE moebench_smi_status
                  OUTPUT_QUIET ERROR_QUIET)
  if(moebench_smi_status EQUAL 0)
    set(moebench_gpu_present ON)
  endif()
endif()
option(MOEBENCH_GPU_TESTS "Register the GPU tests with ctest" ${moebench_gpu_present})
message(STATUS "moebench: cuda backend for architectures ${CMAKE_CUDA_ARCHITECTURES}, "
               "GPU tests registered: ${MOEBENCH_GPU_TESTS}")

# add_test needs enable_testing(), which include(CTest) runs after this file: register at the
# end of the top directory instead.
function(moebench_register_gpu_tests)
  if(BUILD_TESTING AND MOEBENCH_GPU_TESTS)
    add_test(NAME gpu.cuda_compute COMMAND moebench_gpu_tests)
    set_tests_properties(gpu.cuda_compute PROPERTIES LABELS gpu TIMEOUT 600)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL moebench_register_gpu_tests)
