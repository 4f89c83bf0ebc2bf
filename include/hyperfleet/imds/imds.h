#pragma once
// IMDSv2's answers at 169.254.169.254 (docs/nodes.md "IMDS"): its session tokens and what a
// node reads about itself, decided from the request, the asking node and the time (pure,
// apart from drawing a token). Served by the local provider for every cluster's nodes, and
// by the node agent on a registered machine that has no metadata service of its own
// (docs/ssh-provider.md).
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/http/http.h"

namespace hf::imds {

/// What IMDS tells a node about itself.
struct ImdsNode {
  std::string instance_id;
  std::string instance_type;  ///< as the API names it ("ml.c5.xlarge"); IMDS drops "ml."
  std::string ip;
  std::string hostname;  ///< "ip-10-224-4-2"
};

/// IMDSv2 session tokens of one endpoint. Thread-safe.
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

/// The node that asks, from the request's remote address (nullopt: none the endpoint serves).
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

}  // namespace hf::imds
