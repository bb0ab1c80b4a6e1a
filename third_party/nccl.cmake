# The nccl communication backend, built with the cuda backend (CMakeLists.txt includes this file
# after third_party/cuda.cmake) whenever NCCL is found; without it `--comm nccl` says it is not
# built. Where NCCL is looked for, first match wins:
#   -DNCCL_ROOT=DIR, or the NCCL_ROOT / NCCL_HOME environment variables (DIR/include/nccl.h,
#   DIR/lib/libnccl.so*); the CUDA toolkit's own directories; the nvidia-nccl-cu* Python wheel
#   that PyTorch installs (site-packages/nvidia/nccl); the system paths.
#   -DMOEBENCH_NCCL=OFF builds without it.

option(MOEBENCH_NCCL "Build the nccl communication backend when NCCL is found" ON)

# The run report's device records read the driver's release number from NVML, loaded with
# dlopen at run time (glibc before 2.34 keeps dlopen in libdl).
target_link_libraries(moebench_core PUBLIC ${CMAKE_DL_LIBS})

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
  file(GLOB MOEBENCH_NCCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/harness/comm/nccl/*.cpp)
  add_library(moebench_nccl STATIC ${MOEBENCH_NCCL_SOURCES})
  target_include_directories(moebench_nccl PRIVATE ${NCCL_INCLUDE_DIR})
  # Host C++ with moebench_core's flags; the two static libraries call each other (the factory
  # makes the communicator, the communicator uses errors and the MPI backend), which CMake
  # resolves by repeating them on the link line.
  target_link_libraries(moebench_nccl PUBLIC ${NCCL_LIBRARY} CUDA::cudart PRIVATE moebench_core)
  target_link_libraries(moebench_core PUBLIC moebench_nccl)
  target_compile_definitions(moebench_core PUBLIC MOEBENCH_HAVE_NCCL=1)
  message(STATUS "moebench: nccl backend with ${NCCL_LIBRARY}")

  # GPU tests of the communicators on device memory (usage in the test's header): nccl over
  # every visible GPU, one rank each; the staged mpi path with 2 ranks on one GPU; and nccl's
  # refusal of 2 ranks on one GPU. Built always, registered like the other GPU tests.
  add_executable(nccl_communicator_test ${CMAKE_SOURCE_DIR}/tests/gpu/nccl_communicator_test.cpp)
  target_link_libraries(nccl_communicator_test PRIVATE moebench_core)
  set(moebench_gpu_count 0)
  if(MOEBENCH_NVIDIA_SMI)
    execute_process(COMMAND ${MOEBENCH_NVIDIA_SMI} -L OUTPUT_VARIABLE moebench_smi_list
                    RESULT_VARIABLE moebench_smi_status ERROR_QUIET)
    if(moebench_smi_status EQUAL 0)
      string(REGEX MATCHALL "GPU [0-9]+:" moebench_gpu_lines "${moebench_smi_list}")
      list(LENGTH moebench_gpu_lines moebench_gpu_count)
    endif()
  endif()
  set(MOEBENCH_GPU_COUNT ${moebench_gpu_count} CACHE STRING "GPUs the nccl GPU tests run over")
  function(moebench_register_nccl_tests)
    if(NOT (BUILD_TESTING AND MOEBENCH_GPU_TESTS))
      return()
    endif()
    set(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
            OMPI_MCA_rmaps_base_oversubscribe=1)
    # Cases are "mode:ranks:ep" (a ";" inside an element would flatten the list).
    set(cases "nccl:1:1" "mpi:2:1" "mpi:2:2" "shared-gpu:2:1")
    if(MOEBENCH_GPU_COUNT GREATER 1)
      list(APPEND cases "nccl:${MOEBENCH_GPU_COUNT}:1" "nccl:${MOEBENCH_GPU_COUNT}:2")
    endif()
    foreach(item IN LISTS cases)
      string(REPLACE ":" "." label "${item}")
      string(REPLACE ":" ";" case "${item}")
      list(GET case 0 mode)
      list(GET case 1 np)
      list(GET case 2 ep)
      math(EXPR rest "${np} % ${ep}")
      if(NOT rest EQUAL 0)
        continue()
      endif()
      set(name gpu.communicator.${label})
      set(prefix)
      if(NOT mode STREQUAL "nccl")
        set(prefix CUDA_VISIBLE_DEVICES=0)  # the shared-GPU cases: every rank on GPU 0
      endif()
      add_test(NAME ${name}
               COMMAND ${CMAKE_COMMAND} -E env ${prefix} ${MPIEXEC_EXECUTABLE}
                       ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                       $<TARGET_FILE:nccl_communicator_test> ${MPIEXEC_POSTFLAGS} ${mode} ${ep})
      set_tests_properties(${name} PROPERTIES LABELS gpu TIMEOUT 300 ENVIRONMENT "${env}")
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL moebench_register_nccl_tests)
else()
  message(STATUS "moebench: NCCL not found (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: "
                 "${NCCL_LIBRARY}); building without the nccl backend")
endif()
