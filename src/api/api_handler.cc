#include "hyperfleet/api/api_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/api/rest_json.h"
#include "hyperfleet/common/strings.h"

namespace hf::api {
namespace {

// The error type for input the model refuses: the service's (EKS: InvalidParameterException),
// unless the operation's model lists only BadRequestException of the two (EKS TagResource and
// UntagResource); clients parse only the errors an operation lists.
std::string_view ValidationErrorTypeOf(const model::ServiceModel& model,
                                       const std::string& operation,
                                       std::string_view service_type) {
  const auto* op = model.operation(operation);
  if (op == nullptr || !op->contains("errors")) return service_type;
  bool has_service_type = false, has_bad_request = false;
  for (const auto& e : (*op)["errors"]) {
    const std::string shape = e.value("shape", "");
    has_service_type = has_service_type || shape == service_type;
    has_bad_request = has_bad_request || shape == "BadRequestException";
  }
  return !has_service_type && has_bad_request ? std::string_view("BadRequestException")
                                              : service_type;
}

// The endpoint's own service, named when a request's target belongs to no added service.
constexpr std::string_view kDefaultPrefix = "SageMaker";
constexpr std::string_view kDefaultSigningName = "sagemaker";
constexpr std::string_view kContentType = "application/x-amz-json-1.1";

/// The media type of a Content-Type value, without parameters, lowercased.
std::string MediaType(std::string_view value) {
  std::string v(value.substr(0, value.find(';')));
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(v));
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
  if (JsonNestingDepth(req.body) > kMaxNestingDepth) {
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

JsonService* ApiHandler::restServiceFor(std::string_view signing_name) const {
  for (JsonService* s : services_) {
    if (s->restJson() && s->signingName() == signing_name) return s;
  }
  return nullptr;
}

JsonService* ApiHandler::serviceFor(std::string_view target) const {
  for (JsonService* s : services_) {
    if (s->restJson()) continue;
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
    if (!s->restJson() && s->targetPrefix() == prefix && s->implements(op)) return s;
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

http::HttpResponse ApiHandler::handleRest(const http::HttpRequest& req, JsonService& service,
                                          const std::string& request_id) {
  const model::ServiceModel& model = service.model();
  StatusOr<RestReply> result = [&]() -> StatusOr<RestReply> {
    auto identity = auth::VerifySigV4(req, secrets_, policy_, clock_.now());
    if (!identity.ok()) return identity.status();
    if (identity->service != service.signingName()) {  // routing read the scope unverified
      return WithAwsErrorType(absl::UnauthenticatedError("Credential should be scoped to "
                                                         "correct service."),
                              "InvalidSignatureException");
    }
    HF_ASSIGN_OR_RETURN(RestRoute route, MatchRestRoute(model, req.method, req.path()));
    const std::string_view invalid =
        ValidationErrorTypeOf(model, route.operation, service.validationErrorType());
    HF_ASSIGN_OR_RETURN(nlohmann::json input, BindRestInput(model, route, req, invalid));
    if (Status valid = model.validateInput(route.operation, input); !valid.ok()) {
      if (AwsErrorTypeOf(valid)) return valid;
      return WithAwsErrorType(std::move(valid), invalid);
    }
    input = model.pruneInput(route.operation, std::move(input));
    if (!service.implements(route.operation)) {
      return absl::UnimplementedError(absl::StrCat("Hyperfleet does not implement ",
                                                   route.operation, " yet."));
    }
    HF_ASSIGN_OR_RETURN(nlohmann::json out,
                        service.callAs(route.operation, input, identity->access_key_id));
    return ShapeRestOutput(model, route.operation,
                           model.pruneOutput(route.operation, std::move(out)));
  }();
  if (!result.ok()) {
    if (HttpStatusFor(result.status()) >= 500) {
      spdlog::error("request {} failed: {}", request_id, result.status().ToString());
    }
    return RestErrorResponse(model, result.status(), request_id);
  }
  http::HttpResponse r;
  r.status = result->status;
  r.headers = std::move(result->headers);
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("x-amzn-RequestId", request_id);
  r.body = result->body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

http::HttpResponse ApiHandler::handle(http::HttpRequest&& req) {
  const std::string request_id = ids_.uuid();
  if (!req.header("X-Amz-Target")) {
    if (JsonService* rest = restServiceFor(CredentialScopeService(req))) {
      return handleRest(req, *rest, request_id);
    }
  }
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
