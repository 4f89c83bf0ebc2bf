#include "hyperfleet/api/api_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/common/strings.h"

namespace hf::api {
namespace {

// The endpoint's own service, named when a request's target belongs to no added service.
constexpr std::string_view kDefaultPrefix = "SageMaker";
constexpr std::string_view kDefaultSigningName = "sagemaker";
constexpr std::string_view kContentType = "application/x-amz-json-1.1";

/// The media type of a Content-Type value, without parameters, lowercased.
std::string MediaType(std::string_view value) {
  std::string v(value.substr(0, value.find(';')));
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(v));
}

/// Deepest nesting of arrays and objects in a JSON text (strings skipped). The model's
/// shapes nest a few levels; a much deeper document is hostile and is refused before it is
/// parsed, so no later copy of it can recurse deeply.
int NestingDepth(std::string_view text) {
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
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return max_depth;
}

constexpr int kMaxNestingDepth = 64;

/// The JSON 1.1 body of `req`: checks its Content-Type (`wanted` ends the error message),
/// nesting depth and JSON syntax. An empty body is an empty request, as botocore sends for
/// operations without input. Errors: UnknownOperationException (Content-Type),
/// SerializationException (nesting, malformed JSON).
StatusOr<nlohmann::json> DecodeBody(const http::HttpRequest& req, std::string_view wanted) {
  const auto content_type = req.header("Content-Type");
  const std::string media = content_type ? MediaType(*content_type) : "";
  if (media != kContentType && media != "application/x-amz-json-1.0") {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat(
            "Unsupported Content-Type '", content_type ? std::string(*content_type) : "",
            "': ", std::string(wanted))),
        "UnknownOperationException");
  }
  if (NestingDepth(req.body) > kMaxNestingDepth) {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat("The request body nests deeper than ",
                                                kMaxNestingDepth, " levels.")),
        "SerializationException");
  }
  nlohmann::json body = req.body.empty() ? nlohmann::json::object()
                                         : nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return WithAwsErrorType(
        absl::InvalidArgumentError("The request body is not a JSON object (malformed JSON)."),
        "SerializationException");
  }
  return body;
}

}  // namespace

ApiHandler::ApiHandler(auth::SecretLookup secrets, const Clock& clock, IdSource& ids,
                       const ApiConfig& config)
    : secrets_(std::move(secrets)), clock_(clock), ids_(ids) {
  policy_.region = config.region;
  policy_.services = {std::string(kDefaultSigningName)};
}

void ApiHandler::addService(JsonService& service) {
  services_.push_back(&service);
  policy_.services.emplace_back(service.signingName());
}

JsonService* ApiHandler::serviceFor(std::string_view target) const {
  for (JsonService* s : services_) {
    const std::string_view prefix = s->targetPrefix();
    if (target.size() > prefix.size() && target.starts_with(prefix) &&
        target[prefix.size()] == '.') {
      return s;
    }
  }
  return nullptr;
}

JsonService* ApiHandler::implementerOf(std::string_view prefix, std::string_view op) const {
  for (JsonService* s : services_) {
    if (s->targetPrefix() == prefix && s->implements(op)) return s;
  }
  return nullptr;
}

StatusOr<ApiHandler::Reply> ApiHandler::reply(const http::HttpRequest& req) {
  const auto target = req.header("X-Amz-Target");
  const JsonService* service = target ? serviceFor(*target) : nullptr;
  if (service == nullptr) {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat(
            "Missing or unknown X-Amz-Target '", target ? std::string(*target) : "",
            "': expected ", AbslView(kDefaultPrefix), ".<Operation>.")),
        "UnknownOperationException");
  }
  const std::string_view prefix = service->targetPrefix();
  const model::ServiceModel& model = service->model();
  const std::string op(target->substr(prefix.size() + 1));
  if (!model.hasOperation(op)) {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat("Unknown operation ", AbslView(*target), ".")),
        "UnknownOperationException");
  }
  HF_ASSIGN_OR_RETURN(nlohmann::json body, DecodeBody(req, service->contentTypeHint()));
  if (Status valid = model.validateInput(op, body); !valid.ok()) {
    if (AwsErrorTypeOf(valid)) return valid;
    return WithAwsErrorType(std::move(valid), service->validationErrorType());
  }
  // Members the model does not define are ignored, as AWS does, and never stored; a response
  // carries only the members of the operation's output shape (never internal bookkeeping).
  const nlohmann::json input = model.pruneInput(op, std::move(body));
  JsonService* runner = implementerOf(prefix, op);
  if (runner == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("Hyperfleet does not implement ", AbslView(*target), " yet."));
  }
  if (auto text = runner->callSerialized(op, input)) {
    if (!text->ok()) return text->status();
    return Reply(std::move(**text));
  }
  HF_ASSIGN_OR_RETURN(nlohmann::json out, runner->call(op, input));
  return Reply(model.pruneOutput(op, std::move(out)));
}

StatusOr<nlohmann::json> ApiHandler::dispatch(const http::HttpRequest& req) {
  HF_ASSIGN_OR_RETURN(Reply r, reply(req));
  if (auto* tree = std::get_if<nlohmann::json>(&r)) return std::move(*tree);
  nlohmann::json parsed = nlohmann::json::parse(std::get<std::string>(r), nullptr, false);
  if (parsed.is_discarded()) return absl::InternalError("A serialized reply is not JSON.");
  return parsed;
}

http::HttpResponse ApiHandler::handle(http::HttpRequest&& req) {
  const std::string request_id = ids_.uuid();
  StatusOr<Reply> result = [&]() -> StatusOr<Reply> {
    if (req.method != "POST") {
      return WithAwsErrorType(
          absl::InvalidArgumentError(absl::StrCat(
              "Method ", req.method, " is not allowed: the SageMaker API takes POST.")),
          "UnknownOperationException");
    }
    auto identity = auth::VerifySigV4(req, secrets_, policy_, clock_.now());
    if (!identity.ok()) return identity.status();
    // A signature is good for the service it was scoped to only.
    const auto target = req.header("X-Amz-Target");
    const JsonService* service = target ? serviceFor(*target) : nullptr;
    const std::string_view expected = service ? service->signingName() : kDefaultSigningName;
    if (identity->service != expected) {
      return WithAwsErrorType(
          absl::UnauthenticatedError(absl::StrCat("Credential should be scoped to correct "
                                                  "service: '", std::string(expected), "'. ")),
          "InvalidSignatureException");
    }
    return reply(req);
  }();
  if (!result.ok()) {
    if (HttpStatusFor(result.status()) >= 500) {
      spdlog::error("request {} failed: {}", request_id, result.status().ToString());
    }
    return ErrorResponse(result.status(), request_id);
  }
  http::HttpResponse r;
  r.status = 200;
  r.headers = {{"Content-Type", std::string(kContentType)}, {"x-amzn-RequestId", request_id}};
  if (auto* text = std::get_if<std::string>(&*result)) {
    r.body = std::move(*text);
  } else {
    r.body = std::get<nlohmann::json>(*result).dump(-1, ' ', false,
                                                    nlohmann::json::error_handler_t::replace);
  }
  return r;
}

}  // namespace hf::api
