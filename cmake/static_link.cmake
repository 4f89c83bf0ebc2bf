# Executables linked static except glibc: the portable node binary, hyperfleet-node, which
# must start on Debian 12 and Ubuntu 22.04/24.04 whatever their library versions.
#
# The project's libraries are built as usual (Debian's shared libraries; spdlog and fmt
# compiled). hf_add_static_executable builds a second, "node" variant of each library the
# executable reaches (<lib>_static: same sources, spdlog and fmt header-only, as Debian ships
# neither as .a) and links it with static twins of the imported targets (the same target
# with Debian's .a next to its .so), libstdc++ and libgcc static, glibc dynamic. Only the
# executable's closure is compiled twice; a library that reaches something Debian ships
# without .a fails the configure step, naming it.

# spdlog and fmt header-only, for the node variants.
if(NOT TARGET hyperfleet_spdlog_header_only)
  add_library(hyperfleet_spdlog_header_only INTERFACE)
  target_compile_definitions(hyperfleet_spdlog_header_only
                             INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY=1)
  target_link_libraries(hyperfleet_spdlog_header_only INTERFACE Threads::Threads)
endif()

# hf_static_archive(<path of a .so> <out-var>): the .a next to it; fails when there is none.
function(hf_static_archive so_path out_var)
  string(REGEX REPLACE "\\.so(\\.[0-9.]+)?$" ".a" archive "${so_path}")
  if(NOT EXISTS "${archive}")
    message(FATAL_ERROR "Hyperfleet: ${so_path} has no static archive (${archive}); the "
                        "node binary links everything but glibc statically, so node-side "
                        "code may only use what Debian ships as .a (cmake/static_link.cmake)")
  endif()
  set(${out_var} ${archive} PARENT_SCOPE)
endfunction()

# hf_static_twin(<imported target> <out-var>): its static twin hf_static::<name> (made once,
# recursively over its INTERFACE_LINK_LIBRARIES).
function(hf_static_twin dep out_var)
  string(MAKE_C_IDENTIFIER "${dep}" id)
  set(twin "hf_static::${id}")
  if(TARGET ${twin})
    set(${out_var} ${twin} PARENT_SCOPE)
    return()
  endif()
  get_target_property(type ${dep} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    add_library(${twin} INTERFACE IMPORTED GLOBAL)
  else()
    get_target_property(location ${dep} IMPORTED_LOCATION)
    if(NOT location)
      get_target_property(configs ${dep} IMPORTED_CONFIGURATIONS)
      list(GET configs 0 config)
      get_target_property(location ${dep} IMPORTED_LOCATION_${config})
    endif()
    hf_static_archive("${location}" archive)
    add_library(${twin} STATIC IMPORTED GLOBAL)
    set_target_properties(${twin} PROPERTIES IMPORTED_LOCATION ${archive})
  endif()
  foreach(prop INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
               INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS)
    get_target_property(value ${dep} ${prop})
    if(value)
      set_target_properties(${twin} PROPERTIES ${prop} "${value}")
    endif()
  endforeach()
  get_target_property(links ${dep} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    set(links "")
  endif()
  hf_static_links("${links}" twin_links)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    # What Debian's .pc files list as Libs.private of these archives, all in glibc;
    # --as-needed (hf_add_static_executable) keeps only what is used.
    list(APPEND twin_links Threads::Threads ${CMAKE_DL_LIBS} m)
  endif()
  set_target_properties(${twin} PROPERTIES INTERFACE_LINK_LIBRARIES "${twin_links}")
  set(${out_var} ${twin} PARENT_SCOPE)
endfunction()

# hf_static_links(<link items> <out-var>): the items mapped for a static link: the project's
# libraries to their node variants, spdlog/fmt to header-only, imported targets to twins,
# paths of .so files to their .a; glibc's parts (Threads::Threads, dl, m) as they are.
function(hf_static_links items out_var)
  set(out "")
  foreach(item IN LISTS items)
    if(item MATCHES "^(spdlog::spdlog|fmt::fmt|spdlog::spdlog_header_only|fmt::fmt-header-only)$")
      set(item hyperfleet_spdlog_header_only)
    elseif(TARGET ${item})
      get_target_property(aliased ${item} ALIASED_TARGET)
      if(aliased)
        set(item ${aliased})
      endif()
      get_target_property(imported ${item} IMPORTED)
      get_target_property(type ${item} TYPE)
      if(item STREQUAL "Threads::Threads" OR item STREQUAL "hyperfleet_spdlog_header_only")
        # glibc, or already header-only
      elseif(imported)
        hf_static_twin(${item} item)
      elseif(type STREQUAL "STATIC_LIBRARY")
        hf_static_variant(${item} item)
      endif()
    elseif(item MATCHES "\\.so(\\.[0-9.]+)?$")
      hf_static_archive("${item}" item)
    elseif(item MATCHES "^\\$<" AND item MATCHES "::|TARGET|LINK_ONLY")
      # A generator expression naming a target (none among Debian's today).
      message(FATAL_ERROR "Hyperfleet: cannot map ${item} for a static link")
    endif()
    list(APPEND out ${item})
  endforeach()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# hf_static_variant(<library> <out-var>): <library>_static, the node variant of one of the
# project's static libraries (made once): its sources, include directories, definitions and
# options, linked with hf_static_links of its dependencies.
function(hf_static_variant lib out_var)
  set(variant "${lib}_static")
  if(TARGET ${variant})
    set(${out_var} ${variant} PARENT_SCOPE)
    return()
  endif()
  get_target_property(dir ${lib} SOURCE_DIR)
  get_target_property(sources ${lib} SOURCES)
  set(absolute "")
  foreach(source IN LISTS sources)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
    list(APPEND absolute ${path})
  endforeach()
  add_library(${variant} STATIC EXCLUDE_FROM_ALL ${absolute})
  # Generated sources (embedded data files) are made by rules of the library's directory.
  add_dependencies(${variant} ${lib})
  foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FEATURES
               INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS)
    get_target_property(value ${lib} ${prop})
    if(value)
      set_target_properties(${variant} PROPERTIES ${prop} "${value}")
    endif()
  endforeach()
  get_target_property(links ${lib} LINK_LIBRARIES)
  get_target_property(interface ${lib} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    set(links "")
  endif()
  if(NOT interface)
    set(interface "")
  endif()
  hf_static_links("${links}" mapped_links)
  hf_static_links("${interface}" mapped_interface)
  target_link_libraries(${variant} PRIVATE ${mapped_links} INTERFACE ${mapped_interface})
  set(${out_var} ${variant} PARENT_SCOPE)
endfunction()

# hf_add_static_executable(<name> SOURCES ... DEPS ...): an executable linked static except
# glibc: DEPS mapped by hf_static_links, -static-libstdc++ -static-libgcc; --as-needed so
# that NEEDED lists only the glibc libraries actually used; --gc-sections because Debian 12's
# libstdc++.a drags std::random_device (arc4random@GLIBC_2.36, too new for Ubuntu 22.04)
# in through its COW-string instantiations, unused; --strip-debug: it is copied to every
# machine (symbols stay, for backtraces).
function(hf_add_static_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  hf_static_links("${ARG_DEPS}" deps)
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${deps})
  target_link_options(${name} PRIVATE -static-libstdc++ -static-libgcc -Wl,--as-needed
                      -Wl,--gc-sections -Wl,--strip-debug)
  hf_warnings(${name})
endfunction()
