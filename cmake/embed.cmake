# Writes OUTPUT: a C++ source holding the bytes of INPUT as `std::string_view SYMBOL`.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n"
  "namespace {\nconst unsigned char kData[] = {${bytes} 0x00};\n}\n"
  "namespace hf::data {\nextern const std::string_view ${SYMBOL};\n"
  "const std::string_view ${SYMBOL}(reinterpret_cast<const char*>(kData), ${size});\n}\n")
