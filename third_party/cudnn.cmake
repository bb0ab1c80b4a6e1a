# cuDNN's fused flash attention (--attention-impl cudnn; harness/backends/cudnn), included by the
# top CMakeLists.txt after the cuda backend's files. It needs cuDNN (its cudnn.h and libcudnn) and
# cudnn-frontend's header-only C++ API, and is host C++: it compiles with the C++ compiler against
# the CUDA toolkit's headers, so its graph checks build and run on a machine without a GPU.
#
#   -DMOEBENCH_CUDNN=AUTO  (default) with the cuda backend, where both are found; without them the
#                          cuda backend runs attention as batched GEMMs only
#   -DMOEBENCH_CUDNN=ON    required: configuring fails where either is missing; also built when the
#                          cuda backend is not (tests/device/check.sh's dry run builds it so)
#   -DMOEBENCH_CUDNN=OFF   never
#
# cudnn-frontend's headers, first match wins: -DCUDNN_FRONTEND_INCLUDE_DIR, MOEBENCH_DEPS_PREFIX/
# include, BUILD/_deps/cudnn-frontend/include (where harness/scripts/build.sh has
# third_party/fetch-cudnn-frontend.sh put them). cuDNN: the toolkit's, the carried prefix's, or
# the nvidia-cudnn-cu* wheel's (site-packages/nvidia/cudnn, as PyTorch installs it; it ships
# libcudnn.so.9 without the unversioned link).
#
# Sets MOEBENCH_HAVE_CUDNN. The module itself is declared in harness/layers.cmake: built where
# MOEBENCH_HAVE_CUDA or MOEBENCH_HAVE_CUDNN, from cudnn_attention.cpp where cuDNN is found and
# cudnn_absent.cpp (which says why not) otherwise.

set(MOEBENCH_CUDNN AUTO CACHE STRING "cuDNN flash attention: AUTO (where found), ON (required), OFF")
set_property(CACHE MOEBENCH_CUDNN PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MOEBENCH_CUDNN}" moebench_cudnn_mode)
if(NOT moebench_cudnn_mode MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "-DMOEBENCH_CUDNN=${MOEBENCH_CUDNN}: give AUTO, ON or OFF")
endif()
if(moebench_cudnn_mode MATCHES "^(TRUE|YES|1)$")
  set(moebench_cudnn_mode ON)
elseif(moebench_cudnn_mode MATCHES "^(FALSE|NO|0)$")
  set(moebench_cudnn_mode OFF)
endif()

set(MOEBENCH_HAVE_CUDNN OFF)
if(moebench_cudnn_mode STREQUAL "OFF" OR
   (moebench_cudnn_mode STREQUAL "AUTO" AND NOT MOEBENCH_HAVE_CUDA))
  return()
endif()

find_package(CUDAToolkit QUIET)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${MOEBENCH_DEPS_PREFIX}/include ${CMAKE_BINARY_DIR}/_deps/cudnn-frontend/include
          NO_DEFAULT_PATH)
set(moebench_cudnn_hints ${MOEBENCH_DEPS_PREFIX})
if(CUDAToolkit_FOUND)
  list(APPEND moebench_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS}/..)
endif()
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

string(CONCAT moebench_cudnn_found "cudnn_frontend.h: ${CUDNN_FRONTEND_INCLUDE_DIR}, cudnn.h: "
              "${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY}, CUDA toolkit: "
              "${CUDAToolkit_FOUND}")
# (A directory given on the command line is not searched: it must hold the header itself.)
if(CUDAToolkit_FOUND AND EXISTS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend.h" AND
   CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  set(MOEBENCH_HAVE_CUDNN ON)
  message(STATUS "moebench: cuDNN attention with ${CUDNN_LIBRARY} and ${CUDNN_FRONTEND_INCLUDE_DIR}")
elseif(moebench_cudnn_mode STREQUAL "ON")
  message(FATAL_ERROR "-DMOEBENCH_CUDNN=ON, but cuDNN attention cannot be built here "
                      "(${moebench_cudnn_found}); third_party/fetch-cudnn-frontend.sh "
                      "BUILD/_deps/cudnn-frontend fetches the headers, or use AUTO or OFF")
else()
  message(STATUS "moebench: no cuDNN attention (${moebench_cudnn_found})")
endif()
