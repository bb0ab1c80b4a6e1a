# The layers of moebench and the modules in them, bottom up. Each module is one folder (or a few)
# and one library; it may use only the modules it names in DEPS (and theirs), which must be
# declared before it and sit in its own layer or one below. The order of this file therefore
# makes every dependency point down and rules out cycles.
#
# The compiler enforces it: each module compiles against an include view of its own, a folder of
# links to exactly the source folders it may use (<build>/layers/<module>/), so including a
# header of a module it does not depend on fails with "No such file or directory".
# tests/layers/check_layers.py checks the same from the include graph of every source file,
# including code behind #if that this build does not compile (docs/architecture.md).

set(MOEBENCH_LAYERS core ops interfaces backends model driver)
set(MOEBENCH_LAYER_VIEWS ${CMAKE_BINARY_DIR}/layers)
file(REMOVE_RECURSE ${MOEBENCH_LAYER_VIEWS})  # links only: the source folders are not followed
set(MOEBENCH_MODULES "" CACHE INTERNAL "")

# moebench_module(NAME LAYER layer DIRS dir... [DEPS module...] [OPTIONAL_DEPS module...]
#                 [LIBS lib...] [SOURCES file...] [EXCLUDE regex] [BUILD condition] [CUDA])
# OPTIONAL_DEPS are modules that may not be built here (cuda, nccl): linked when they are. A
# module whose BUILD variable is false is only recorded, so the layering check still covers its
# files.
function(moebench_module name)
  cmake_parse_arguments(M "CUDA" "LAYER;EXCLUDE;BUILD" "DIRS;DEPS;OPTIONAL_DEPS;LIBS;SOURCES"
                        ${ARGN})
  list(FIND MOEBENCH_LAYERS "${M_LAYER}" level)
  if(level LESS 0)
    message(FATAL_ERROR "module ${name}: unknown layer '${M_LAYER}' (${MOEBENCH_LAYERS})")
  endif()
  set_property(GLOBAL PROPERTY MOEBENCH_LEVEL_${name} ${level})
  set_property(GLOBAL PROPERTY MOEBENCH_DIRS_${name} ${M_DIRS})
  set_property(GLOBAL PROPERTY MOEBENCH_DEPS_${name} ${M_DEPS} ${M_OPTIONAL_DEPS})
  set_property(GLOBAL PROPERTY MOEBENCH_LAYER_${name} ${M_LAYER})
  set_property(GLOBAL PROPERTY MOEBENCH_LIBS_${name} ${M_LIBS})
  set(MOEBENCH_MODULES ${MOEBENCH_MODULES} ${name} CACHE INTERNAL "")
  if(DEFINED M_BUILD AND NOT ${M_BUILD})
    set_property(GLOBAL PROPERTY MOEBENCH_BUILT_${name} false)
    return()
  endif()
  set_property(GLOBAL PROPERTY MOEBENCH_BUILT_${name} true)
  foreach(dep ${M_OPTIONAL_DEPS})
    if(TARGET mb_${dep})
      list(APPEND M_DEPS ${dep})
    endif()
  endforeach()
  set(allowed ${name})
  foreach(dep ${M_DEPS})
    if(NOT TARGET mb_${dep})
      message(FATAL_ERROR "module ${name} depends on '${dep}', which is not declared above it "
                          "(harness/layers.cmake declares modules bottom up)")
    endif()
    get_property(dep_level GLOBAL PROPERTY MOEBENCH_LEVEL_${dep})
    if(dep_level GREATER level)
      message(FATAL_ERROR "module ${name} (layer ${M_LAYER}) may not depend on '${dep}', which "
                          "is in a higher layer")
    endif()
    get_property(dep_allowed GLOBAL PROPERTY MOEBENCH_ALLOWED_${dep})
    list(APPEND allowed ${dep_allowed})
  endforeach()
  list(REMOVE_DUPLICATES allowed)

  set(sources ${M_SOURCES})
  foreach(dir ${M_DIRS})
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cpp
         ${CMAKE_SOURCE_DIR}/${dir}/*.cu)
    list(APPEND sources ${found})
  endforeach()
  if(M_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${M_EXCLUDE}")
  endif()

  # The include view: links to the folders of this module and of everything below it that it
  # depends on, and nothing else.
  set(view ${MOEBENCH_LAYER_VIEWS}/${name})
  foreach(module ${allowed})
    if(module STREQUAL name)
      set(module_dirs ${M_DIRS})
    else()
      get_property(module_dirs GLOBAL PROPERTY MOEBENCH_DIRS_${module})
    endif()
    foreach(dir ${module_dirs})
      get_filename_component(parent ${view}/${dir} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${dir} ${view}/${dir} SYMBOLIC)
    endforeach()
  endforeach()

  if(sources)
    add_library(mb_${name} STATIC ${sources})
    target_include_directories(mb_${name} PUBLIC ${view})
    set(scope PUBLIC)
  else()
    add_library(mb_${name} INTERFACE)
    target_include_directories(mb_${name} INTERFACE ${view})
    set(scope INTERFACE)
  endif()
  foreach(dep ${M_DEPS})
    if(M_CUDA)
      # Linked only: nvcc must not see the host modules' usage requirements. Its own include
      # view already holds every folder it may include.
      target_link_libraries(mb_${name} ${scope} $<LINK_ONLY:mb_${dep}>)
    else()
      target_link_libraries(mb_${name} ${scope} mb_${dep})
    endif()
  endforeach()
  if(M_LIBS)
    target_link_libraries(mb_${name} ${scope} ${M_LIBS})
  endif()

  set_property(GLOBAL PROPERTY MOEBENCH_ALLOWED_${name} ${allowed})
endfunction()

# <build>/moebench-layers.json: the layers and modules as declared, for tests/layers.
function(moebench_write_layer_manifest)
  set(json "{\n  \"layers\": [")
  set(sep "")
  foreach(layer ${MOEBENCH_LAYERS})
    string(APPEND json "${sep}\"${layer}\"")
    set(sep ", ")
  endforeach()
  string(APPEND json "],\n  \"modules\": [")
  set(sep "")
  foreach(name ${MOEBENCH_MODULES})
    get_property(layer GLOBAL PROPERTY MOEBENCH_LAYER_${name})
    get_property(dirs GLOBAL PROPERTY MOEBENCH_DIRS_${name})
    get_property(deps GLOBAL PROPERTY MOEBENCH_DEPS_${name})
    get_property(built GLOBAL PROPERTY MOEBENCH_BUILT_${name})
    get_property(libs GLOBAL PROPERTY MOEBENCH_LIBS_${name})
    set(libs_json "")
    set(s "")
    foreach(l ${libs})
      string(APPEND libs_json "${s}\"${l}\"")
      set(s ", ")
    endforeach()
    set(dirs_json "")
    set(s "")
    foreach(d ${dirs})
      string(APPEND dirs_json "${s}\"${d}\"")
      set(s ", ")
    endforeach()
    set(deps_json "")
    set(s "")
    foreach(d ${deps})
      string(APPEND deps_json "${s}\"${d}\"")
      set(s ", ")
    endforeach()
    string(APPEND json "${sep}\n    {\"name\": \"${name}\", \"layer\": \"${layer}\", "
           "\"dirs\": [${dirs_json}], \"deps\": [${deps_json}], \"libs\": [${libs_json}], "
           "\"built\": ${built}}")
    set(sep ",")
  endforeach()
  string(APPEND json "\n  ]\n}\n")
  file(WRITE ${CMAKE_BINARY_DIR}/moebench-layers.json "${json}")
endfunction()

# ---- core: errors, tensors, units, clock, host, version ------------------------------------------
moebench_module(core LAYER core DIRS harness/core SOURCES ${MOEBENCH_GIT_VERSION_CPP}
                LIBS nlohmann_json::nlohmann_json)
add_dependencies(mb_core moebench_git_version)
target_compile_definitions(
  mb_core PUBLIC MOEBENCH_VERSION="${PROJECT_VERSION}"
                       MOEBENCH_BUILD_TYPE="${CMAKE_BUILD_TYPE}"
                       MOEBENCH_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# ---- ops: arithmetic written once for both backends (harness/math: element-wise, routing, FP8,
# random), below the interfaces; and the routing plans -------------------------------------------
moebench_module(math LAYER ops DIRS harness/math DEPS core)
moebench_module(routing LAYER ops DIRS workloads/routing DEPS core)

# ---- interfaces: the parallel grid, the compute and communication interfaces ---------------------
moebench_module(parallel LAYER interfaces DIRS harness/parallel DEPS core
                LIBS nlohmann_json::nlohmann_json)
moebench_module(compute LAYER interfaces DIRS harness/compute DEPS core math)
moebench_module(comm LAYER interfaces DIRS harness/comm DEPS core parallel)

# ---- backends: cpu, cuda, mpi, nccl, staged, local, fault, and the registry that picks one ------
moebench_module(cpu LAYER backends DIRS harness/backends/cpu DEPS compute math
                LIBS ${BLAS_LIBRARIES})
target_include_directories(mb_cpu PRIVATE ${CBLAS_INCLUDE_DIR})
target_compile_definitions(mb_cpu
                           PRIVATE $<$<BOOL:${MOEBENCH_HAVE_OPENBLAS}>:MOEBENCH_HAVE_OPENBLAS=1>)
# sqrtf without errno (nothing reads it), so that AdamW's element loop vectorises: the same
# correctly rounded square roots and divisions, several at a time.
target_compile_options(mb_cpu PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-fno-math-errno>)
moebench_module(mpi LAYER backends DIRS harness/backends/mpi DEPS comm LIBS MPI::MPI_CXX)
moebench_module(staged LAYER backends DIRS harness/backends/staged DEPS comm compute)
moebench_module(local LAYER backends DIRS harness/backends/local DEPS comm compute)
moebench_module(fault LAYER backends DIRS harness/backends/fault DEPS comm compute)
# What a device-stream backend keeps in flight per lane: host bookkeeping, tested without a GPU.
moebench_module(in_flight LAYER backends DIRS harness/backends/in_flight DEPS comm)
# cuDNN's flash attention (third_party/cudnn.cmake): host code, built with the cuda backend, and
# on its own where -DMOEBENCH_CUDNN=ON (its graph checks need no GPU); cudnn_absent.cpp where the
# build has no cuDNN.
set(MOEBENCH_BUILD_CUDNN_MODULE OFF)
if(MOEBENCH_HAVE_CUDA OR MOEBENCH_HAVE_CUDNN)
  set(MOEBENCH_BUILD_CUDNN_MODULE ON)
endif()
if(MOEBENCH_HAVE_CUDNN)
  # cudnn-frontend compiles some of its engines at run time with NVRTC.
  moebench_module(cudnn LAYER backends DIRS harness/backends/cudnn DEPS compute
                  BUILD MOEBENCH_BUILD_CUDNN_MODULE EXCLUDE "cudnn_absent[.]cpp$"
                  LIBS ${CUDNN_LIBRARY} CUDA::cudart CUDA::nvrtc)
  # cudnn-frontend's, cuDNN's and the toolkit's headers as system headers (their warnings are not
  # ours).
  target_include_directories(mb_cudnn SYSTEM PRIVATE ${CUDNN_FRONTEND_INCLUDE_DIR}
                             ${CUDNN_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  # The build's longest object, yet host code that only builds cuDNN's graphs (once per shape)
  # and hands them their pointers: -O1 compiles it in 69 s here against 101 s at -O3.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/harness/backends/cudnn/cudnn_attention.cpp
                              PROPERTIES COMPILE_OPTIONS -O1)
else()
  moebench_module(cudnn LAYER backends DIRS harness/backends/cudnn DEPS compute
                  BUILD MOEBENCH_BUILD_CUDNN_MODULE EXCLUDE "cudnn_attention[.]cpp$")
endif()
moebench_module(cuda LAYER backends DIRS harness/backends/cuda DEPS compute math cudnn CUDA
                BUILD MOEBENCH_HAVE_CUDA LIBS CUDA::cudart CUDA::cublasLt CUDA::cublas)
if(MOEBENCH_HAVE_CUDA)
  # One shared CUDA runtime for the whole process (the host code links CUDA::cudart too).
  set_target_properties(mb_cuda PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  # -lineinfo: source lines in profiles at no run-time cost.
  target_compile_options(mb_cuda PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-lineinfo;-Xcompiler=-Wall>")
endif()
moebench_module(nccl LAYER backends DIRS harness/backends/nccl DEPS cuda mpi in_flight
                BUILD MOEBENCH_HAVE_NCCL LIBS ${NCCL_LIBRARY} CUDA::cudart)
if(MOEBENCH_HAVE_NCCL)
  target_include_directories(mb_nccl PRIVATE ${NCCL_INCLUDE_DIR})
endif()
# The registry reaches the device backends through their plugin (device_plugin.hpp), loaded on
# first use: nothing above it links CUDA.
moebench_module(registry LAYER backends DIRS harness/backends/registry DEPS cpu mpi staged
                LIBS ${CMAKE_DL_LIBS})
target_compile_definitions(mb_registry
                           PRIVATE $<$<BOOL:${MOEBENCH_HAVE_CUDA}>:MOEBENCH_HAVE_CUDA=1>
                                   $<$<BOOL:${MOEBENCH_HAVE_NCCL}>:MOEBENCH_HAVE_NCCL=1>
                                   MOEBENCH_PLUGIN_DIR="${CMAKE_BINARY_DIR}")
# The device plugin's entry, over the cuda and nccl backends.
moebench_module(device_plugin LAYER backends DIRS harness/backends/device_plugin
                DEPS cuda registry OPTIONAL_DEPS nccl BUILD MOEBENCH_HAVE_CUDA)
if(MOEBENCH_HAVE_CUDA)
  target_compile_definitions(mb_device_plugin
                             PRIVATE $<$<BOOL:${MOEBENCH_HAVE_NCCL}>:MOEBENCH_HAVE_NCCL=1>)
  # libmoebench_cuda.so beside the binary: the device modules' own objects and the CUDA libraries
  # they link; everything else (the interfaces, core, MPI) is the binary's, which exports it.
  set(plugin_objects $<TARGET_OBJECTS:mb_device_plugin> $<TARGET_OBJECTS:mb_cuda>
                     $<TARGET_OBJECTS:mb_cudnn>)
  if(MOEBENCH_HAVE_NCCL)
    list(APPEND plugin_objects $<TARGET_OBJECTS:mb_nccl>)
  endif()
  add_library(moebench_cuda MODULE ${plugin_objects})
  set_target_properties(moebench_cuda PROPERTIES LINKER_LANGUAGE CXX LIBRARY_OUTPUT_DIRECTORY
                                                 ${CMAKE_BINARY_DIR})
  foreach(device cuda cudnn nccl)
    if(TARGET mb_${device})
      get_property(libs GLOBAL PROPERTY MOEBENCH_LIBS_${device})
      target_link_libraries(moebench_cuda PRIVATE ${libs})
    endif()
  endforeach()
  target_link_libraries(moebench_cuda PRIVATE MPI::MPI_CXX)
endif()

# ---- model: measurement, configuration, accounting, parameters, layers, the training step ------
moebench_module(measure LAYER model DIRS harness/measure DEPS compute
                LIBS nlohmann_json::nlohmann_json)
# The published recipes (workloads/config/recipes.json), compiled in: the binary needs no data
# file beside it.
set(MOEBENCH_RECIPES_JSON_FILE ${CMAKE_SOURCE_DIR}/workloads/config/recipes.json)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${MOEBENCH_RECIPES_JSON_FILE})
file(READ ${MOEBENCH_RECIPES_JSON_FILE} MOEBENCH_RECIPES_JSON)
set(MOEBENCH_RECIPES_CPP ${CMAKE_BINARY_DIR}/generated/recipes_data.cpp)
file(CONFIGURE OUTPUT ${MOEBENCH_RECIPES_CPP} CONTENT
     "// Generated from workloads/config/recipes.json by harness/layers.cmake.\nnamespace moebench {\nextern const char* const kRecipesJson = R\"moebench(@MOEBENCH_RECIPES_JSON@)moebench\";\n}\n"
     @ONLY)
moebench_module(config LAYER model DIRS workloads/config DEPS math compute comm fault parallel
                SOURCES ${MOEBENCH_RECIPES_CPP} LIBS nlohmann_json::nlohmann_json)
moebench_module(accounting LAYER model DIRS workloads/accounting DEPS config measure)
moebench_module(params LAYER model DIRS workloads/params DEPS config compute)
moebench_module(layers LAYER model DIRS workloads/layers
                DEPS params accounting routing measure comm)
moebench_module(step LAYER model DIRS workloads/step DEPS layers)
# The step-time model's composition rules (issue 29): pure, over the pipeline schedule.
moebench_module(predict LAYER model DIRS workloads/predict DEPS parallel accounting)

# ---- driver: runtime, devices, output, verification, scaling reports, the probe, the CLI --------
moebench_module(runtime LAYER driver DIRS harness/runtime DEPS parallel mpi)
moebench_module(device LAYER driver DIRS harness/device DEPS runtime registry measure
                LIBS ${CMAKE_DL_LIBS} Threads::Threads)
moebench_module(output LAYER driver DIRS harness/output DEPS device accounting measure
                LIBS nlohmann_json::nlohmann_json)
target_include_directories(mb_output PRIVATE ${VALIJSON_INCLUDE_DIR})
moebench_module(verify LAYER driver DIRS harness/verify DEPS output step registry)
moebench_module(scaling LAYER driver DIRS harness/scaling DEPS output LIBS OpenSSL::Crypto)
moebench_module(bench LAYER driver DIRS harness/bench DEPS output step)
# The built-in system descriptions (harness/systems/data/*.json) and the efficiencies per GPU
# generation (harness/systems/efficiencies/*.json), compiled in as raw strings: an array of the
# files' texts and its length, by name.
function(moebench_embed_json out folder array count)
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.json)
  list(SORT files)
  set(text "extern const char* const ${array}[] = {\n")
  foreach(file ${files})
    file(READ ${file} content)
    string(APPEND text "R\"moebench(${content})moebench\",\n")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  endforeach()
  list(LENGTH files n)
  string(APPEND text "};\nextern const int ${count} = ${n};\n")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
set(MOEBENCH_SYSTEMS_CPP ${CMAKE_BINARY_DIR}/generated/systems_data.cpp)
moebench_embed_json(system_files harness/systems/data kSystemFiles kSystemFileCount)
moebench_embed_json(efficiency_files harness/systems/efficiencies kEfficiencyFiles
                    kEfficiencyFileCount)
set(systems_cpp "// Generated from harness/systems/{data,efficiencies}/*.json by harness/layers.cmake.\n")
string(APPEND systems_cpp "namespace moebench {\n${system_files}${efficiency_files}}  // namespace moebench\n")
file(CONFIGURE OUTPUT ${MOEBENCH_SYSTEMS_CPP} CONTENT "${systems_cpp}")
moebench_module(systems LAYER driver DIRS harness/systems DEPS output predict SOURCES ${MOEBENCH_SYSTEMS_CPP}
                LIBS nlohmann_json::nlohmann_json)
moebench_module(cli LAYER driver DIRS harness/cli DEPS verify scaling bench systems local fault
                EXCLUDE "/harness/cli/main\\.cpp$" LIBS CLI11::CLI11)

moebench_write_layer_manifest()

# Every module that is built, for the tests (which may use any of them).
add_library(mb_all INTERFACE)
foreach(name ${MOEBENCH_MODULES})
  if(TARGET mb_${name})
    target_link_libraries(mb_all INTERFACE mb_${name})
  endif()
endforeach()
if(TARGET mb_device_plugin)
  # The tests link the device backends themselves: the registry finds their entry in the binary
  # (dlsym), not in the plugin.
  target_link_options(mb_all INTERFACE LINKER:--undefined=moebench_device_plugin
                      LINKER:--export-dynamic-symbol=moebench_device_plugin)
endif()
