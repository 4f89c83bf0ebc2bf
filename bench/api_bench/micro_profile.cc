#include "micro_profile.h"

#include <optional>

#include "hyperfleet/http/http.h"

namespace api_bench {
namespace {

// Keeps results alive so that the optimiser cannot drop the work being timed.
volatile size_t g_sink = 0;
void Sink(size_t v) { g_sink = g_sink + v; }

template <class Fn>
double MicrosPerCall(Fn&& fn) {
  // Run for about 0.3 s after a short warm-up.
  for (int i = 0; i < 50; ++i) fn();
  int n = 0;
  const auto t0 = Steady::now();
  while (SecondsSince(t0) < 0.3) {
    for (int i = 0; i < 20; ++i) fn();
    n += 20;
  }
  return 1e6 * SecondsSince(t0) / n;
}

}  // namespace

std::vector<MicroResult> MicroProfile(const Target& target, const ClusterInfo& cluster) {
  std::vector<MicroResult> out;
  hf::http::HttpRequest req;
  req.method = "POST";
  req.target = "/";
  req.headers = {{"Content-Type", kContentType}, {"X-Amz-Target", "SageMaker.DescribeCluster"}};
  req.body = DescribeBody(cluster.name);
  out.push_back({"SigV4 sign (client side, per request)", MicrosPerCall([&] {
                   hf::http::HttpRequest copy = req;
                   hf::auth::SignSigV4(copy, target.key, target.region, "sagemaker",
                                       target.host_header, std::chrono::system_clock::now());
                   Sink(copy.headers.size());
                 })});
  hf::auth::SignSigV4(req, target.key, target.region, "sagemaker", target.host_header,
                      std::chrono::system_clock::now());
  hf::auth::SigV4Policy policy;
  policy.region = target.region;
  policy.services = {"sagemaker"};
  hf::auth::SecretLookup secrets = [&](std::string_view id) -> std::optional<std::string> {
    if (id == target.key.access_key_id) return target.key.secret_access_key;
    return std::nullopt;
  };
  bool verified = true;
  out.push_back({"SigV4 verify (server side, per request)", MicrosPerCall([&] {
                   auto v = hf::auth::VerifySigV4(req, secrets, policy,
                                                  std::chrono::system_clock::now());
                   verified = verified && v.ok();
                 })});
  if (!verified) out.back().what += " [verification FAILED]";
  out.push_back({"JSON parse of the request body", MicrosPerCall([&] {
                   Sink(Json::parse(req.body, nullptr, false).size());
                 })});
  const Json describe = Json::parse(cluster.describe_body, nullptr, false);
  out.push_back({"JSON dump of a DescribeCluster reply (" +
                     std::to_string(cluster.describe_body.size()) + " B)",
                 MicrosPerCall([&] { Sink(describe.dump().size()); })});
  const Json page = Json::parse(cluster.page_body, nullptr, false);
  out.push_back({"JSON build of a 100-node page (copy of parsed summaries)", MicrosPerCall([&] {
                   Json copy = Json::array();
                   for (const auto& s : page["ClusterNodeSummaries"]) copy.push_back(s);
                   Sink(copy.size());
                 })});
  out.push_back({"JSON dump of a 100-node page (" + std::to_string(cluster.page_body.size()) +
                     " B)",
                 MicrosPerCall([&] { Sink(page.dump().size()); })});
  out.push_back({"JSON parse of a 100-node page (client side, not done per request)",
                 MicrosPerCall([&] {
                   Sink(Json::parse(cluster.page_body, nullptr, false).size());
                 })});
  return out;
}

}  // namespace api_bench
