# Helpers shared by every target of the project.

# Warnings for our own code (third-party headers come in as system includes).
function(hf_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
endfunction()

# hf_add_library(<name> SOURCES ... DEPS ...): one static library per area; DEPS are
# the allowed dependencies of that area (docs/architecture.md; tests/tools/check_layering.py
# checks them and the #includes).
function(hf_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                     PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  hf_warnings(${name})
endfunction()

# hf_embed_file(<target-var> <input> <symbol>): turns a data file into a C++ source that
# defines `extern const std::string_view <symbol>`, so the binary needs no data at run time.
function(hf_embed_file out_var input symbol)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${symbol}.cc)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding ${input}")
  set(${out_var} ${output} PARENT_SCOPE)
endfunction()
