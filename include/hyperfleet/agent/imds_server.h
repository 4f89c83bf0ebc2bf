#pragma once
// IMDS on a registered machine (docs/ssh-provider.md "IMDS"): when agent.env says so, the
// node agent answers HyperPod's IMDSv2 paths at 169.254.169.254:80 for this node only, with
// hf_imds's answers (the same as the local provider's). It adds 169.254.169.254/32 to `lo`
// (iproute2's `ip`) and removes it when it stops. It never takes over a metadata service
// the machine has: when something already answers TCP at 169.254.169.254:80 it refuses.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"
#include "hyperfleet/imds/imds.h"

namespace hf::http {
class HttpServer;
}

namespace hf::agent {

/// What the agent serves as IMDS.
struct AgentImds {
  imds::ImdsNode node;  ///< instance id, type, local IPv4, hostname of this node
  std::string region;   ///< placement/region; the availability zone is region + "a"
};

/// agent.env's IMDS keys: HF_IMDS=serve turns it on (absent or "off": nullopt) and then needs
/// HF_IMDS_INSTANCE_TYPE, HF_IMDS_LOCAL_IPV4, HF_IMDS_HOSTNAME and HF_IMDS_REGION;
/// `instance_id` is HF_INSTANCE_ID. Errors: InvalidArgument naming the key that is missing
/// or has another value.
StatusOr<std::optional<AgentImds>> ImdsFromEnv(
    const std::map<std::string, std::string>& values, std::string_view instance_id);

/// Where and how ImdsServer listens (tests change them).
struct ImdsServerOptions {
  std::string address = "169.254.169.254";
  uint16_t port = 80;
  /// Add `address`/32 to lo when it is not there; Stop() removes it (also when an agent
  /// that was killed left it there: nothing listened at it, so it was not another's).
  bool add_address = true;
  /// How long the check for an existing metadata service waits for a TCP connection.
  int probe_timeout_ms = 1000;
};

/// The running endpoint. Stop() (or destruction) ends it.
class ImdsServer {
 public:
  /// Checks that nothing answers at address:port, adds the address to lo when asked, binds
  /// and serves. Errors: FailedPrecondition when a metadata service already answers there
  /// (nothing is changed); Internal when the address cannot be added; Unavailable when it
  /// cannot be bound.
  static StatusOr<std::unique_ptr<ImdsServer>> Start(const AgentImds& imds,
                                                     const ImdsServerOptions& options = {});
  ~ImdsServer();
  ImdsServer(const ImdsServer&) = delete;
  ImdsServer& operator=(const ImdsServer&) = delete;
  uint16_t port() const;
  /// Stops serving and removes the address from lo (with add_address). Idempotent.
  void Stop();

 private:
  ImdsServer() = default;
  struct State;
  std::unique_ptr<State> state_;
};

/// True when something accepts a TCP connection at address:port within `timeout_ms` (an
/// existing metadata service).
bool SomethingListensAt(const std::string& address, uint16_t port, int timeout_ms);

}  // namespace hf::agent
