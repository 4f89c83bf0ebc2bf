#pragma once
// The IMDSv2 endpoint every cluster's nodes reach at 169.254.169.254 (docs/nodes.md): its
// session tokens and its answers, decided from the request, the asking node and the time
// (pure, apart from drawing a token), and the listening socket made inside a network
// namespace.
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http_server.h"

namespace hf::provider::local {

/// What IMDS tells a node about itself.
struct ImdsNode {
  std::string instance_id;
  std::string instance_type;  ///< as the API names it ("ml.c5.xlarge"); IMDS drops "ml."
  std::string ip;
  std::string hostname;  ///< "ip-10-224-4-2"
};

/// IMDSv2 session tokens of one cluster. Thread-safe.
class ImdsTokens {
 public:
  /// Stores `token`, valid until `now` + `ttl`, dropping the expired ones.
  void Add(const std::string& token, std::chrono::seconds ttl,
           std::chrono::steady_clock::time_point now);
  /// True when `token` was added and has not expired at `now`.
  bool Valid(std::string_view token, std::chrono::steady_clock::time_point now);

 private:
  std::mutex mu_;
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> expiry_;
};

/// The node that asks, from the request's remote address (nullopt: none of the cluster).
using ImdsNodeOf = std::function<std::optional<ImdsNode>(std::string_view remote_address)>;

/// IMDS's answer to `req`: PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds
/// 1..21600) draws a token (24 random bytes as hex); GET or HEAD of /latest/meta-data/...
/// with a valid X-aws-ec2-metadata-token answers instance-id, instance-type, local-ipv4,
/// hostname, local-hostname (<hostname>.<region>.compute.internal) and
/// placement/{availability-zone,region} as text. 400 for a bad TTL, 401 for a missing or
/// expired token, 404 for an unknown node or path, 405 for another method.
http::HttpResponse ImdsResponse(const http::HttpRequest& req, ImdsTokens& tokens,
                                const ImdsNodeOf& node_of, const std::string& region,
                                std::chrono::steady_clock::time_point now);

/// A listening TCP socket (close-on-exec) bound to `ipv4`:`port` inside the network namespace
/// /run/netns/`ns`. Errors: Internal naming the namespace and errno text.
StatusOr<int> ListenInNetns(const std::string& ns, const std::string& ipv4, uint16_t port);

}  // namespace hf::provider::local
