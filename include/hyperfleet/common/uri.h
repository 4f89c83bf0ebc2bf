#pragma once
// The one percent-encoding codec of the project. Encoding follows SigV4's UriEncode (the
// strictest rule any caller needs, so what is signed and what is sent agree): the RFC 3986
// unreserved bytes A-Z a-z 0-9 - _ . ~ stay, every other byte becomes %XX with upper-case
// hex. Decoding comes in the two flavours the wire needs: strict (a malformed escape is an
// error) and WHATWG's lenient form decoding (what SigV4 canonicalization must accept).
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf {

/// Appends `s` percent-encoded to `*out`: unreserved bytes (RFC 3986 §2.3) stay, every other
/// byte is %XX, upper-case (AWS SigV4 "UriEncode"). `keep_slash` keeps '/' as is, for paths
/// and S3 object keys.
void AppendUriEncoded(std::string_view s, bool keep_slash, std::string* out);

/// `s` percent-encoded as AppendUriEncoded does; a query value by default.
std::string UriEncode(std::string_view s, bool keep_slash = false);

/// Decodes %XX escapes (hex digits of either case, RFC 3986 §2.1); every other byte, '+'
/// included, stays itself. Errors: InvalidArgument "malformed percent-escape at offset N"
/// for a '%' not followed by two hex digits.
StatusOr<std::string> UriDecode(std::string_view s);

/// Decodes one application/x-www-form-urlencoded component strictly: as UriDecode, and '+'
/// is a space. Errors: as UriDecode.
StatusOr<std::string> FormDecode(std::string_view s);

/// Decodes one component as the WHATWG URL standard's form parser (URLSearchParams) does:
/// '+' is a space and a '%' not followed by two hex digits stays literal. Never fails; used
/// where every client's spelling of a query must canonicalize to the same bytes (SigV4).
std::string FormDecodeLenient(std::string_view s);

/// One decoded name=value pair of a query string.
struct QueryParam {
  std::string name;
  std::string value;  ///< "" for a pair without '='
  bool operator==(const QueryParam&) const = default;
};

/// Splits `query` (the part after '?', without '#') at '&' into pairs, each at its first
/// '=', skipping empty pairs, and decodes both sides with FormDecode. Order is kept and
/// names may repeat. Errors: InvalidArgument (as FormDecode) for a malformed escape.
StatusOr<std::vector<QueryParam>> ParseQuery(std::string_view query);

/// As ParseQuery, decoding with FormDecodeLenient; never fails.
std::vector<QueryParam> ParseQueryLenient(std::string_view query);

}  // namespace hf
