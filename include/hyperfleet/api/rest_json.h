#pragma once
// The AWS REST-JSON protocol's bindings, driven by a botocore service model (e.g. EKS's):
// which operation a method + path is, how the request's path labels, query string, headers
// and JSON body become the operation's input, and how its output and errors go back on the
// wire. Pure functions; api::ApiHandler runs them for services whose restJson() is true.
// Rules from botocore's serializer (RestJSONSerializer) and parser (RestJSONParser).
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/service_model.h"

namespace hf::api {

/// The operation a request is, and its path labels.
struct RestRoute {
  std::string operation;                     ///< e.g. "DescribeCluster"
  std::map<std::string, std::string> labels;  ///< label name -> decoded value ("name" -> "c1")
};

/// The operation of `model` whose `http.method` is `method` and whose `http.requestUri` path
/// (before any '?') matches `path`: literal segments byte for byte, `{label}` one non-empty
/// segment, percent-decoded (so "%2F" is a '/' inside it), `{label+}` the rest of the path
/// (one or more segments, decoded). When several match, the one with more literal segments
/// wins. Errors: UnknownOperationException (NotFound) naming the method and path when none
/// matches; InvalidParameterException for a malformed percent-escape in a label.
StatusOr<RestRoute> MatchRestRoute(const model::ServiceModel& model, std::string_view method,
                                   std::string_view path);

/// The input of `route.operation` from `request`: members with `location: uri` from the
/// labels, `querystring` ones from the query (a list repeats its name; integers, longs,
/// booleans and doubles parsed; query maps are not supported: no served model has one),
/// `header` ones from the headers, and every member without a location from the JSON body
/// (an empty body is none). Errors, tagged `validation_type`: a value that does not parse
/// as its shape's type (naming the member), a body that is not a JSON object
/// (SerializationException), a body nested deeper than 64 levels.
StatusOr<nlohmann::json> BindRestInput(const model::ServiceModel& model, const RestRoute& route,
                                       const http::HttpRequest& request,
                                       std::string_view validation_type);

/// A REST-JSON reply before it is sent.
struct RestReply {
  int status = 200;        ///< the operation's http.responseCode, else 200
  http::Headers headers;   ///< output members with `location: header`
  nlohmann::json body;     ///< the output's members without a location
};

/// Splits an operation's (pruned) output into status, headers and body.
RestReply ShapeRestOutput(const model::ServiceModel& model, std::string_view operation,
                          nlohmann::json output);

/// The error response REST-JSON clients parse (botocore reads the type from the
/// x-amzn-ErrorType header, the message from the body's "message"): header
/// `x-amzn-ErrorType: <type>`, body {"message": ...}, Content-Type application/json, and the
/// HTTP status of the error shape's `error.httpStatusCode` in `model` (404 for
/// ResourceNotFoundException in EKS's), else api::HttpStatusFor's.
http::HttpResponse RestErrorResponse(const model::ServiceModel& model, const Status& status,
                                     const std::string& request_id);

/// The service of an `Authorization: AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/
/// <service>/aws4_request, ...` header (unverified: for routing only); "" when there is none.
std::string CredentialScopeService(const http::HttpRequest& request);

/// Deepest nesting of arrays and objects in a JSON text (strings skipped). The models' shapes
/// nest a few levels; a much deeper document is hostile and is refused before it is parsed,
/// so no later copy of it can recurse deeply (both protocols refuse over 64).
int JsonNestingDepth(std::string_view text);

}  // namespace hf::api
