#pragma once
// Writing JSON text without building an nlohmann tree first, for responses whose tree would
// cost more than the rest of the request (a ListClusterNodes page: 100 node summaries). Each
// function appends exactly the bytes that nlohmann::json::dump(-1, ' ', false,
// error_handler_t::replace) writes for the same value, so a response written here is
// byte-identical to the dumped tree: plain strings are copied, anything else is handed to
// nlohmann itself. Objects are the caller's to write with their keys in the tree's order
// (std::map: bytewise ascending).
#include <string>
#include <string_view>

namespace hf::json_text {

/// Appends `s` as a JSON string: quoted, '"', '\' and control characters escaped, invalid
/// UTF-8 replaced by U+FFFD, other bytes as they are.
void AppendString(std::string& out, std::string_view s);

/// Appends `v` as a JSON number (shortest round-trip form, "1.0" for whole numbers, null for
/// NaN and infinities).
void AppendNumber(std::string& out, double v);

}  // namespace hf::json_text
