#include "control_plane_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hf::agent {

std::string BodyError(const http::HttpResponse& response) {
  auto error = agentapi::Parse<agentapi::ErrorBody>(response.body);
  if (error.ok() && !error->error.empty()) return error->error;
  return "HTTP " + std::to_string(response.status);
}

ControlPlaneClient::ControlPlaneClient(const AgentOptions& options, Sleep sleep)
    : options_(options),
      sleep_(std::move(sleep)),
      authorization_(absl::StrCat(agentapi::kAuthorizationScheme, options.instance_id, ":",
                                  options.token)),
      // https: only the pinned certificate (CheckAgentEndpoint made sure there is a pin).
      client_(http::HttpClientOptions{options.cert_sha256}) {}

StatusOr<http::HttpResponse> ControlPlaneClient::Send(const std::string& method,
                                                      const std::string& target,
                                                      const std::string& body) {
  http::HttpRequest request;
  request.method = method;
  request.target = target;
  request.headers.push_back({"Authorization", authorization_});
  if (method == "POST") request.headers.push_back({"Content-Type", "application/json"});
  request.body = body;
  return client_.Send(options_.url, request, options_.request_timeout_seconds);
}

StatusOr<agentapi::RegisterResponse> ControlPlaneClient::Register(const std::string& boot_id) {
  agentapi::RegisterRequest request;
  request.boot_id = boot_id;
  auto delay = options_.backoff_initial;
  for (;;) {
    auto response = Post(agentapi::kRegisterPath, request);
    std::string why;
    if (response.ok()) {
      auto parsed = agentapi::Parse<agentapi::RegisterResponse>(*response);
      if (parsed.ok()) return parsed;
      why = "register response: " + std::string(parsed.status().message());
    } else {
      why = std::string(response.status().message());
    }
    spdlog::warn("register with {} failed ({}); retrying in {} ms", options_.url, why,
                 delay.count());
    if (!sleep_(delay)) return absl::CancelledError("stopped before registering");
    delay = std::min(delay * 2, options_.backoff_max);
  }
}

bool ControlPlaneClient::SendReport(const agentapi::LifecycleReport& report) {
  auto delay = options_.backoff_initial;
  for (;;) {
    auto result = Post(agentapi::kLifecyclePath, report);
    if (result.ok()) {
      spdlog::info("reported lifecycle {} {} {}", report.state, report.script, report.message);
      return true;
    }
    spdlog::warn("lifecycle report {} not acknowledged ({}); retrying", report.state,
                 std::string(result.status().message()));
    if (!sleep_(delay)) return false;
    delay = std::min(delay * 2, options_.backoff_max);
  }
}

StatusOr<http::HttpResponse> ControlPlaneClient::GetWithRetry(const std::string& target) {
  const auto give_up = std::chrono::steady_clock::now() + options_.download_retry_limit;
  auto delay = options_.backoff_initial;
  for (;;) {
    auto response = Send("GET", target, "");
    if (response.ok() && response->status < 500) return response;
    const std::string why =
        response.ok() ? BodyError(*response) : std::string(response.status().message());
    if (std::chrono::steady_clock::now() >= give_up) return absl::UnavailableError(why);
    spdlog::warn("GET {} failed ({}); retrying", target, why);
    if (!sleep_(delay)) return absl::CancelledError("stopped");
    delay = std::min(delay * 2, options_.backoff_max);
  }
}

}  // namespace hf::agent
