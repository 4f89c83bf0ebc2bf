#pragma once
// SigV4-signed SageMaker requests and a blocking client (setup, polling, the profile).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <string_view>

#include "hyperfleet/auth/sigv4.h"
#include "options.h"

namespace api_bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

/// Where requests go and how they are signed.
struct Target {
  std::string host;
  std::string port;
  std::string host_header;  // host:port as signed
  hf::auth::AccessKey key;
  std::string region;
};

/// A POST / for SageMaker.<op>, signed now with the project's SigV4 signer.
bhttp::request<bhttp::string_body> SignedRequest(const Target& t, std::string_view op,
                                                 std::string body);

std::string DescribeBody(const std::string& cluster);
std::string ListNodesBody(const std::string& cluster, const std::string& token);

/// Cheap scans of a ListClusterNodes page (a full parse would cost the generator more CPU
/// than the server spends producing the page): the NextToken (hex, no escapes) and the
/// number of node summaries.
std::string ScanNextToken(std::string_view body);
int CountSummaries(std::string_view body);

/// A blocking client for setup and polling (one keep-alive connection).
class SyncClient {
 public:
  explicit SyncClient(const Target& target) : target_(target), stream_(ioc_) {}

  struct Reply {
    int status = 0;
    std::string body;
    std::string error;  // transport failure
  };

  /// One call, tried twice on a transport failure (a closed keep-alive connection).
  Reply call(std::string_view op, const std::string& body);

 private:
  void close();

  const Target& target_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
};

}  // namespace api_bench
