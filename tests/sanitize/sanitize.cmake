# Sanitizer and fuzzing builds, for every target of the project (included by CMakeLists.txt before
# any target is made).
#
#   -DMOEBENCH_SANITIZE=address,undefined   ASan and UBSan (gcc or clang; either alone works too)
#   -DMOEBENCH_FUZZ=ON                       libFuzzer targets (clang only; implies address,undefined
#                                            unless MOEBENCH_SANITIZE says otherwise)
#
# Every executable then carries tests/sanitize/sanitizer_defaults.cpp: the sanitizers' default
# options and LeakSanitizer's suppressions for Open MPI's own allocations (what MPI_Init keeps
# for the life of the process), so the build, its test discovery and its tests work with no
# environment set. tests/sanitize/run.sh runs the unit, mpi and e2e tests under such a build.
set(MOEBENCH_SANITIZE "" CACHE STRING
    "Sanitizers for every target: address, undefined, or address,undefined (empty: none)")
option(MOEBENCH_FUZZ "Build tests/fuzz as libFuzzer targets (clang)" OFF)

if(MOEBENCH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MOEBENCH_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT MOEBENCH_SANITIZE)
    set(MOEBENCH_SANITIZE address,undefined)
  endif()
  # Coverage for the fuzzer in every library; the fuzz targets link -fsanitize=fuzzer.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

if(MOEBENCH_SANITIZE)
  string(REPLACE "," ";" moebench_sanitizers "${MOEBENCH_SANITIZE}")
  foreach(s ${moebench_sanitizers})
    if(NOT s MATCHES "^(address|undefined)$")
      message(FATAL_ERROR "MOEBENCH_SANITIZE: '${s}' is not one of address, undefined "
                          "(give e.g. -DMOEBENCH_SANITIZE=address,undefined)")
    endif()
  endforeach()
  # UBSan findings end the process (a test then fails) instead of printing and going on.
  add_compile_options(
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${MOEBENCH_SANITIZE}>
    $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
    $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  # sanitizer_defaults.cpp's dlclose must be what the shared libraries call.
  add_link_options(-fsanitize=${MOEBENCH_SANITIZE} -Wl,--export-dynamic-symbol=dlclose)
endif()

# Adds the sanitizers' defaults to every executable of the project (called at the end of
# CMakeLists.txt, once every target exists).
function(moebench_sanitizer_defaults)
  if(NOT MOEBENCH_SANITIZE)
    return()
  endif()
  set(dirs ${CMAKE_SOURCE_DIR})
  if(BUILD_TESTING)
    list(APPEND dirs ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/tests/bench
         ${CMAKE_SOURCE_DIR}/tests/fuzz)
    if(MOEBENCH_HAVE_CUDA)
      list(APPEND dirs ${CMAKE_SOURCE_DIR}/tests/gpu)
    endif()
  endif()
  foreach(dir ${dirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_sources(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/sanitize/sanitizer_defaults.cpp)
      endif()
    endforeach()
  endforeach()
endfunction()
