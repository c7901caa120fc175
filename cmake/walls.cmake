# Walls the build keeps. Each folder of src/ is one library with explicit
# dependencies, and a library sees the headers of its own folder and of the
# libraries it depends on, nothing else: a wrong-way #include (host/ including
# native/, worker/ including docker/) fails to compile instead of waiting for a
# reviewer.
#
# How: sources include headers as "folder/name.h". No target gets src/ on its
# include path; instead each library has an include root of its own under
# ${CMAKE_BINARY_DIR}/walls/<target>, holding one symlink, <folder> -> src/<folder>,
# exposed PUBLIC, so it reaches exactly the targets that link the library.

# rf_expose_folder(TARGET FOLDER [PRIVATE]): TARGET's headers are src/FOLDER's.
function(rf_expose_folder target folder)
  set(root "${CMAKE_BINARY_DIR}/walls/${target}")
  file(MAKE_DIRECTORY "${root}")
  if(NOT EXISTS "${root}/${folder}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${folder}" "${root}/${folder}" SYMBOLIC)
  endif()
  set(scope PUBLIC)
  if(ARGC GREATER 2)
    set(scope ${ARGV2})
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope} "${root}")
endfunction()

# rf_library(NAME FOLDER SOURCES src... DEPS dep... [PRIVATE_DEPS dep...])
function(rf_library name)
  cmake_parse_arguments(ARG "" "FOLDER" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  rf_expose_folder(${name} ${ARG_FOLDER})
  if(ARG_DEPS)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  endif()
  if(ARG_PRIVATE_DEPS)
    target_link_libraries(${name} PRIVATE ${ARG_PRIVATE_DEPS})
  endif()
endfunction()
