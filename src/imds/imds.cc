#include "hyperfleet/imds/imds.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/random.h"

namespace hf::imds {

void ImdsTokens::Add(const std::string& token, std::chrono::seconds ttl,
                     std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  for (auto it = expiry_.begin(); it != expiry_.end();) {
    it = it->second < now ? expiry_.erase(it) : std::next(it);
  }
  expiry_[token] = now + ttl;
}

bool ImdsTokens::Valid(std::string_view token, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = expiry_.find(token);
  return it != expiry_.end() && !(it->second < now);
}

http::HttpResponse ImdsResponse(const http::HttpRequest& req, ImdsTokens& tokens,
                                const ImdsNodeOf& node_of, const std::string& region,
                                std::chrono::steady_clock::time_point now) {
  auto text = [](int status, std::string body) {
    http::HttpResponse r;
    r.status = status;
    r.headers.emplace_back("Content-Type", "text/plain");
    r.body = std::move(body);
    return r;
  };
  const std::string path(req.path());
  if (path == "/latest/api/token") {
    if (req.method != "PUT") return text(405, "");
    int ttl = 0;
    auto header = req.header("X-aws-ec2-metadata-token-ttl-seconds");
    if (!header || !absl::SimpleAtoi(std::string(*header), &ttl) || ttl < 1 || ttl > 21600) {
      return text(400, "");
    }
    std::string token = RandomHex(24);
    tokens.Add(token, std::chrono::seconds(ttl), now);
    auto r = text(200, token);
    r.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", std::to_string(ttl));
    return r;
  }
  if (req.method != "GET" && req.method != "HEAD") return text(405, "");
  auto token = req.header("X-aws-ec2-metadata-token");
  if (!token || !tokens.Valid(*token, now)) return text(401, "");
  const std::optional<ImdsNode> node = node_of(req.remote_address);
  if (!node) return text(404, "");
  std::string type = node->instance_type;
  if (type.rfind("ml.", 0) == 0) type = type.substr(3);
  const std::string fqdn = absl::StrCat(node->hostname, ".", region, ".compute.internal");
  const std::map<std::string, std::string> values = {
      {"instance-id", node->instance_id},
      {"instance-type", type},
      {"local-ipv4", node->ip},
      {"hostname", fqdn},
      {"local-hostname", fqdn},
      {"placement/availability-zone", region + "a"},
      {"placement/region", region}};
  const std::string prefix = "/latest/meta-data/";
  if (path == "/latest/meta-data" || path == prefix) {
    return text(200, "hostname\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/");
  }
  if (path == prefix + "placement" || path == prefix + "placement/") {
    return text(200, "availability-zone\nregion");
  }
  if (path.rfind(prefix, 0) == 0) {
    auto it = values.find(path.substr(prefix.size()));
    if (it != values.end()) return text(200, it->second);
  }
  return text(404, "");
}

}  // namespace hf::imds
