#pragma once
// A fake control plane for agent tests: the agent protocol of docs/nodes.md on an
// hf::http::HttpServer, recording what the agent sends.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hyperfleet/http/http_server.h"

namespace hf::agent::testing {

class FakeControlPlane {
 public:
  static constexpr const char* kInstanceId = "i-0123456789abcdef0";
  static constexpr const char* kToken = "0123abcd";

  FakeControlPlane();
  ~FakeControlPlane();

  /// Starts serving on 127.0.0.1:`port` (0: any free port), over TLS with this PEM
  /// certificate and key when given (as `hyperfleet server --agent-listen`). Returns false
  /// on failure.
  bool Start(uint16_t port = 0, const std::string& tls_certificate_pem = "",
             const std::string& tls_private_key_pem = "");
  /// Stops serving (the agent then sees connection refused).
  void Stop();
  uint16_t port() const { return port_; }
  std::string url() const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
  }

  // What the fake answers (set before the agent runs; guarded by mu()).
  nlohmann::json registration;                 ///< the register response
  std::map<std::string, std::string> bundle;   ///< key → content
  std::vector<std::string> extra_keys;         ///< listed but not served (e.g. unsafe keys)
  nlohmann::json heartbeat_response = nlohmann::json::object();
  /// The first this-many registrations are told to wait (controller first), retry in 20 ms.
  int wait_registrations = 0;
  /// What those held registrations answer besides the wait (null: `registration`).
  nlohmann::json wait_registration;

  // What the agent sent.
  std::vector<nlohmann::json> reports;      ///< lifecycle report bodies, in order
  std::vector<nlohmann::json> log_events;   ///< every event of every logs batch, in order
  std::vector<std::string> paths;           ///< every request path, in order
  int registrations = 0;
  int heartbeats = 0;
  std::vector<int64_t> heartbeat_revisions;  ///< files_revision of each heartbeat, in order
  std::vector<nlohmann::json> heartbeat_bodies;  ///< every heartbeat body, in order
  std::vector<nlohmann::json> register_bodies;   ///< every register body, in order
  std::vector<nlohmann::json> log_batches;       ///< every logs body, in order
  int forbidden = 0;
  std::string last_error;  ///< why Start() failed

  std::mutex& mu() { return mu_; }
  /// Waits (up to `timeout`) until `pred` holds under the lock; returns whether it did.
  bool WaitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(20));
  /// Messages of the log events received so far.
  std::vector<std::string> LogMessages();
  /// States of the lifecycle reports received so far.
  std::vector<std::string> ReportStates();

 private:
  http::HttpResponse Handle(http::HttpRequest&& request);

  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<http::HttpServer> server_;
  uint16_t port_ = 0;
  bool tls_ = false;
};

}  // namespace hf::agent::testing
