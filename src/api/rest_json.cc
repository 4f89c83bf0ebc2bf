#include "hyperfleet/api/rest_json.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/uri.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;

constexpr int kMaxNestingDepth = 64;

/// The parts of `s` between `sep`s (one part for a string without `sep`).
std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

/// Path segments of `path` (leading '/' dropped; none for "/").
std::vector<std::string_view> Segments(std::string_view path) {
  if (path.starts_with('/')) path.remove_prefix(1);
  if (path.empty()) return {};
  return Split(path, '/');
}

/// How well `tmpl` (a requestUri path) matches `segs`: the number of literal segments, or -1.
/// Fills `labels` with the raw (still encoded) label values.
int MatchTemplate(std::string_view tmpl, const std::vector<std::string_view>& segs,
                  std::map<std::string, std::string>* labels) {
  const std::vector<std::string_view> parts = Segments(tmpl);
  int literals = 0;
  size_t i = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    std::string_view part = parts[p];
    if (part.starts_with('{') && part.ends_with('}')) {
      std::string_view name = part.substr(1, part.size() - 2);
      if (name.ends_with('+')) {  // greedy: the rest of the path, at least one segment
        if (p + 1 != parts.size() || i >= segs.size()) return -1;
        std::string rest;
        for (size_t j = i; j < segs.size(); ++j) {
          if (j > i) rest.push_back('/');
          rest.append(segs[j]);
        }
        (*labels)[std::string(name.substr(0, name.size() - 1))] = std::move(rest);
        return literals;
      }
      if (i >= segs.size() || segs[i].empty()) return -1;
      (*labels)[std::string(name)] = std::string(segs[i++]);
      continue;
    }
    if (i >= segs.size() || segs[i] != part) return -1;
    ++literals;
    ++i;
  }
  return i == segs.size() ? literals : -1;
}

Status Invalid(std::string message, std::string_view type) {
  return WithAwsErrorType(absl::InvalidArgumentError(message), type);
}

/// `text` as a value of `shape`'s type (query and header values are text on the wire).
StatusOr<Json> ScalarFrom(const Json& shape, std::string_view text, std::string_view member,
                          std::string_view validation_type) {
  const std::string type = shape.value("type", "string");
  auto bad = [&] {
    return Invalid(absl::StrCat("Value '", AbslView(text), "' at '", AbslView(member),
                                "' is not a valid ", type, "."),
                   validation_type);
  };
  if (type == "integer" || type == "long") {
    long long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return bad();
    return Json(v);
  }
  if (type == "double" || type == "float") {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return bad();
    return Json(v);
  }
  if (type == "boolean") {
    if (text == "true") return Json(true);
    if (text == "false") return Json(false);
    return bad();
  }
  return Json(std::string(text));
}

const Json* ShapeOf(const model::ServiceModel& model, const Json& ref) {
  return ref.contains("shape") ? model.shape(ref["shape"].get<std::string>()) : nullptr;
}

/// The JSON body's members (those without a location) of the input.
StatusOr<Json> BodyMembers(const http::HttpRequest& request) {
  if (absl::StripAsciiWhitespace(request.body).empty()) return Json::object();
  if (JsonNestingDepth(request.body) > kMaxNestingDepth) {
    return Invalid(absl::StrCat("The request body nests deeper than ", kMaxNestingDepth,
                                " levels."),
                   "SerializationException");
  }
  Json body = Json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Invalid("The request body is not a JSON object (malformed JSON).",
                   "SerializationException");
  }
  return body;
}

}  // namespace

StatusOr<RestRoute> MatchRestRoute(const model::ServiceModel& model, std::string_view method,
                                   std::string_view path) {
  const std::vector<std::string_view> segs = Segments(path);
  RestRoute best;
  int best_score = -1;
  for (const std::string& op : model.operations()) {
    const Json* raw = model.operation(op);
    if (raw == nullptr || !raw->contains("http")) continue;
    const Json& http = (*raw)["http"];
    if (http.value("method", "") != method) continue;
    std::string uri = http.value("requestUri", "/");
    uri = uri.substr(0, uri.find('?'));
    std::map<std::string, std::string> labels;
    const int score = MatchTemplate(uri, segs, &labels);
    if (score > best_score) {
      best_score = score;
      best.operation = op;
      best.labels = std::move(labels);
    }
  }
  if (best_score < 0) {
    return WithAwsErrorType(
        absl::NotFoundError(absl::StrCat("No operation of this API is ", AbslView(method), " ",
                                            AbslView(path), ".")),
        "UnknownOperationException");
  }
  for (auto& [name, value] : best.labels) {
    auto decoded = UriDecode(value);
    if (!decoded.ok()) {
      return Invalid(absl::StrCat("The path's '", name, "' has a ",
                                  decoded.status().message(), "."),
                     "InvalidParameterException");
    }
    value = *std::move(decoded);
  }
  return best;
}

StatusOr<Json> BindRestInput(const model::ServiceModel& model, const RestRoute& route,
                             const http::HttpRequest& request,
                             std::string_view validation_type) {
  const Json* op = model.operation(route.operation);
  if (op == nullptr || !op->contains("input")) return Json::object();
  const Json* input_shape = ShapeOf(model, (*op)["input"]);
  if (input_shape == nullptr || !input_shape->contains("members")) return Json::object();
  HF_ASSIGN_OR_RETURN(Json body, BodyMembers(request));
  auto query = ParseQuery(request.query());
  if (!query.ok()) {
    return Invalid(absl::StrCat("The query string has a ", query.status().message(), "."),
                   validation_type);
  }
  Json input = Json::object();
  for (const auto& [name, ref] : (*input_shape)["members"].items()) {
    const std::string location = ref.value("location", "");
    const std::string wire = ref.value("locationName", name);
    const Json* shape = ShapeOf(model, ref);
    if (shape == nullptr) continue;
    if (location.empty()) {
      if (auto it = body.find(name); it != body.end()) input[name] = *it;
    } else if (location == "uri") {
      if (auto it = route.labels.find(wire); it != route.labels.end()) input[name] = it->second;
    } else if (location == "header") {
      if (auto v = request.header(wire)) {
        HF_ASSIGN_OR_RETURN(input[name], ScalarFrom(*shape, *v, name, validation_type));
      }
    } else if (location == "querystring") {
      const bool is_list = shape->value("type", "") == "list";
      const Json* item = is_list ? ShapeOf(model, (*shape)["member"]) : shape;
      if (item == nullptr) continue;
      for (const QueryParam& p : *query) {
        if (p.name != wire) continue;
        HF_ASSIGN_OR_RETURN(Json v, ScalarFrom(*item, p.value, name, validation_type));
        if (is_list) {
          input[name].push_back(std::move(v));
        } else {
          input[name] = std::move(v);  // the last one wins, as for a repeated scalar
        }
      }
    }
  }
  return input;
}

RestReply ShapeRestOutput(const model::ServiceModel& model, std::string_view operation,
                          Json output) {
  RestReply reply;
  const Json* op = model.operation(operation);
  if (op == nullptr) return reply;
  if (auto http = op->find("http"); http != op->end()) {
    reply.status = http->value("responseCode", 200);
  }
  reply.body = Json::object();
  const Json* shape = op->contains("output") ? ShapeOf(model, (*op)["output"]) : nullptr;
  if (shape == nullptr || !output.is_object()) return reply;
  const Json members = shape->value("members", Json::object());
  for (const auto& [name, ref] : members.items()) {
    auto it = output.find(name);
    if (it == output.end()) continue;
    const std::string location = ref.value("location", "");
    if (location.empty()) {
      reply.body[name] = std::move(*it);
    } else if (location == "header" && it->is_string()) {
      reply.headers.emplace_back(ref.value("locationName", name), it->get<std::string>());
    }
  }
  return reply;
}

http::HttpResponse RestErrorResponse(const model::ServiceModel& model, const Status& status,
                                     const std::string& request_id) {
  const std::string type = AwsErrorType(status);
  http::HttpResponse r;
  r.status = HttpStatusFor(status);
  if (const Json* shape = model.shape(type); shape != nullptr && shape->contains("error")) {
    r.status = (*shape)["error"].value("httpStatusCode", r.status);
  } else if (status.code() == absl::StatusCode::kNotFound) {
    r.status = 404;  // no such route: a REST service's "not found" is 404, typed or not
  }
  Json body = {{"message", std::string(status.message())}};
  // Messages may carry client-supplied bytes: replace invalid UTF-8 instead of throwing.
  r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  r.headers = {{"Content-Type", "application/json"},
               {"x-amzn-RequestId", request_id},
               {"x-amzn-ErrorType", type}};
  return r;
}

std::string CredentialScopeService(const http::HttpRequest& request) {
  auto auth = request.header("Authorization");
  if (!auth) return "";
  const size_t at = auth->find("Credential=");
  if (at == std::string_view::npos) return "";
  std::string_view cred = auth->substr(at + 11);
  cred = cred.substr(0, cred.find_first_of(", "));
  const std::vector<std::string_view> parts = Split(cred, '/');
  return parts.size() == 5 ? std::string(parts[3]) : "";
}

int JsonNestingDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace hf::api
