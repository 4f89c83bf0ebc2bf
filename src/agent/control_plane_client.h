#pragma once
// The agent's side of each exchange with the control plane (docs/nodes.md "Agent protocol"):
// the node's credentials on every request, typed messages (agentapi/protocol.h), and the
// retries that let an agent outlive a control plane restart. One client per thread (its
// HTTP connection is not shared).
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "hyperfleet/agent/agent_options.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http_client.h"

namespace hf::agent {

/// The error a refused request carries ({"error"}), else "HTTP <status>".
std::string BodyError(const http::HttpResponse& response);

class ControlPlaneClient {
 public:
  /// Waits `delay` between retries; false when the agent stopped meanwhile.
  using Sleep = std::function<bool(std::chrono::milliseconds delay)>;

  /// `options` (url, instance id, token, timeouts, backoff) must outlive the client.
  ControlPlaneClient(const AgentOptions& options, Sleep sleep);

  /// One exchange, with the node's Authorization. Errors: Unavailable when it could not be
  /// completed (any HTTP status is a response).
  StatusOr<http::HttpResponse> Send(const std::string& method, const std::string& target,
                                    const std::string& body);

  /// POSTs message `body`; the response body, OK only for a 2xx response. Errors:
  /// Unavailable naming the target and the control plane's error.
  template <typename Message>
  StatusOr<std::string> Post(std::string_view target, const Message& body) {
    HF_ASSIGN_OR_RETURN(auto response,
                        Send("POST", std::string(target), agentapi::Encode(body)));
    if (response.status / 100 != 2) {
      return absl::UnavailableError(
          absl::StrCat("POST ", std::string(target), ": ", BodyError(response)));
    }
    return std::move(response.body);
  }

  /// Registers, retrying with capped backoff (the control plane may be restarting, or may
  /// not know the node yet). Errors: Cancelled when stopped first.
  StatusOr<agentapi::RegisterResponse> Register(const std::string& boot_id);

  /// POSTs `report` until the control plane acknowledges it; false when stopped first.
  bool SendReport(const agentapi::LifecycleReport& report);

  /// GET with retries of transient failures (transport errors, 5xx) for up to
  /// options.download_retry_limit; a 4xx comes back as the response. Errors: Unavailable
  /// (the last failure) when the limit passed, Cancelled when stopped.
  StatusOr<http::HttpResponse> GetWithRetry(const std::string& target);

 private:
  const AgentOptions& options_;
  const Sleep sleep_;
  const std::string authorization_;
  http::HttpClient client_;
};

}  // namespace hf::agent
