# Target-scoped headers: the layering of DESIGN.md, held by the build.
#
# Headers are included by their path from the top of the tree
# ("cache_server/store/chunk_store.h"), yet the top of the tree is on no
# target's include path. Instead, each target gets a directory of its own,
# build/include/<target>/, holding links to its headers under those same
# paths, on its include path: PUBLIC for a library, so that what links it sees
# them; PRIVATE for a program. A header that includes one from a library its
# target does not link (common/ reaching up into cache_server/, the client
# into granaryd) is then not found, and the build fails there.
#
# A target's headers are the .h beside each of its .cc files, plus the
# header-only ones it declares with granary_target_headers().

# granary_target_headers(TARGET HEADERS...): header-only files of TARGET,
# relative to the calling directory.
function(granary_target_headers target)
  foreach(header ${ARGN})
    cmake_path(ABSOLUTE_PATH header BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    if(NOT EXISTS ${header})
      message(FATAL_ERROR "granary_target_headers(${target}): no header ${header}")
    endif()
    set_property(TARGET ${target} APPEND PROPERTY GRANARY_HEADERS ${header})
  endforeach()
endfunction()

function(_granary_scope_headers target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
    return()
  endif()
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(sources ${target} SOURCES)
  get_target_property(headers ${target} GRANARY_HEADERS)
  if(NOT headers)
    set(headers)
  endif()
  foreach(source ${sources})
    if(NOT source MATCHES "\\.cc$")
      continue()
    endif()
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir})
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${source} generated)
    if(generated)
      continue()
    endif()
    cmake_path(REPLACE_EXTENSION source LAST_ONLY .h OUTPUT_VARIABLE header)
    if(EXISTS ${header})
      list(APPEND headers ${header})
    endif()
  endforeach()
  set(scope ${CMAKE_BINARY_DIR}/include/${target})
  file(REMOVE_RECURSE ${scope})
  file(MAKE_DIRECTORY ${scope})
  foreach(header ${headers})
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${header})
    cmake_path(GET relative PARENT_PATH folder)
    file(MAKE_DIRECTORY ${scope}/${folder})
    file(CREATE_LINK ${header} ${scope}/${relative} SYMBOLIC)
  endforeach()
  if(type STREQUAL "EXECUTABLE")
    target_include_directories(${target} PRIVATE ${scope})
  else()
    target_include_directories(${target} PUBLIC ${scope})
  endif()
endfunction()

function(_granary_targets_below directory out)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    _granary_targets_below(${subdirectory} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(granary_scope_headers_of_all_targets)
  _granary_targets_below(${PROJECT_SOURCE_DIR} targets)
  foreach(target ${targets})
    _granary_scope_headers(${target})
  endforeach()
endfunction()
