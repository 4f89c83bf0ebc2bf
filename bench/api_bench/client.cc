#include "client.h"

#include <boost/asio/connect.hpp>

#include "hyperfleet/http/http.h"

namespace api_bench {

bhttp::request<bhttp::string_body> SignedRequest(const Target& t, std::string_view op,
                                                 std::string body) {
  hf::http::HttpRequest r;
  r.method = "POST";
  r.target = "/";
  r.headers = {{"Content-Type", kContentType},
               {"X-Amz-Target", std::string("SageMaker.") + std::string(op)}};
  r.body = std::move(body);
  hf::auth::SignSigV4(r, t.key, t.region, "sagemaker", t.host_header,
                      std::chrono::system_clock::now());
  bhttp::request<bhttp::string_body> m{bhttp::verb::post, "/", 11};
  for (const auto& [name, value] : r.headers) m.insert(name, value);
  m.body() = std::move(r.body);
  m.keep_alive(true);
  m.prepare_payload();
  return m;
}

std::string DescribeBody(const std::string& cluster) {
  return Json{{"ClusterName", cluster}}.dump();
}

std::string ListNodesBody(const std::string& cluster, const std::string& token) {
  Json j = {{"ClusterName", cluster}, {"MaxResults", kPageSize}};
  if (!token.empty()) j["NextToken"] = token;
  return j.dump();
}

std::string ScanNextToken(std::string_view body) {
  constexpr std::string_view kKey = "\"NextToken\":\"";
  auto pos = body.find(kKey);
  if (pos == std::string_view::npos) return {};
  pos += kKey.size();
  auto end = body.find('"', pos);
  return end == std::string_view::npos ? std::string() : std::string(body.substr(pos, end - pos));
}

int CountSummaries(std::string_view body) {
  int n = 0;
  for (size_t pos = 0; (pos = body.find("\"NodeLogicalId\"", pos)) != std::string_view::npos;
       pos += 15) {
    ++n;
  }
  return n;
}

SyncClient::Reply SyncClient::call(std::string_view op, const std::string& body) {
  Reply r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    beast::error_code ec;
    if (!connected_) {
      tcp::resolver resolver(ioc_);
      auto results = resolver.resolve(target_.host, target_.port, ec);
      if (!ec) {
        stream_.expires_after(std::chrono::seconds(10));
        stream_.connect(results, ec);
      }
      if (ec) {
        r.error = "connect: " + ec.message();
        continue;
      }
      stream_.socket().set_option(tcp::no_delay(true), ec);
      connected_ = true;
    }
    auto req = SignedRequest(target_, op, body);
    stream_.expires_after(std::chrono::seconds(60));
    bhttp::write(stream_, req, ec);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256u << 20);
    if (!ec) bhttp::read(stream_, buffer_, parser, ec);
    if (ec) {
      r.error = ec.message();
      close();
      continue;
    }
    auto res = parser.release();
    r.status = static_cast<int>(res.result_int());
    r.body = std::move(res.body());
    r.error.clear();
    if (!res.keep_alive()) close();
    return r;
  }
  return r;
}

void SyncClient::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
  buffer_.clear();
  connected_ = false;
}

}  // namespace api_bench
