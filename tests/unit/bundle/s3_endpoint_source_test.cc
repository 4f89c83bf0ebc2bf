// S3EndpointSource against an in-test S3 endpoint on 127.0.0.1 (hf::http::HttpServer) that
// serves ListObjectsV2 in pages and GetObject, and refuses requests not SigV4-signed for s3.
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/http/http_server.h"

namespace hf::bundle {
namespace {

constexpr char kKeyId[] = "AKIDBUNDLETEST";
constexpr char kSecret[] = "bundle-test-secret";

class FixedClock final : public Clock {
 public:
  SystemTime now() const override { return FromEpochSeconds(1'780'000'000); }
};

std::string Decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> Query(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    size_t eq = pair.find('=');
    out[Decode(pair.substr(0, eq))] = eq == std::string_view::npos ? "" : Decode(pair.substr(eq + 1));
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
  }
  return out;
}

http::HttpResponse Xml(int status, std::string body) {
  return {status, {{"Content-Type", "application/xml"}}, std::move(body)};
}

http::HttpResponse S3Error(int status, std::string_view code, std::string_view message) {
  return Xml(status, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + std::string(code) +
                         "</Code><Message>" + std::string(message) + "</Message></Error>");
}

std::string Contents(std::string_view key, int size) {
  return "<Contents><Key>" + std::string(key) + "</Key><Size>" + std::to_string(size) +
         "</Size><StorageClass>STANDARD</StorageClass></Contents>";
}

std::string ListResult(std::string_view prefix, const std::string& contents, bool truncated,
                       std::string_view next_token = "") {
  std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<Prefix>" + std::string(prefix) + "</Prefix><MaxKeys>1000</MaxKeys>" + contents +
      "<IsTruncated>" + (truncated ? "true" : "false") + "</IsTruncated>";
  if (!next_token.empty()) {
    xml += "<NextContinuationToken>" + std::string(next_token) + "</NextContinuationToken>";
  }
  return xml + "</ListBucketResult>";
}

// A tiny S3: buckets "my-bucket" (two listing pages), "evil-bucket" (a traversal key),
// "empty-bucket", "broken-bucket" (500); anything else is NoSuchBucket.
class FakeS3 {
 public:
  FakeS3() {
    http::HttpServerOptions options;
    options.port = 0;
    options.io_threads = 1;
    auto server = http::HttpServer::Start(options, [this](http::HttpRequest&& r) {
      return Handle(std::move(r));
    });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = std::move(*server);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  http::HttpServer& server() { return *server_; }

  // Recorded by the handler.
  std::vector<std::string> targets() {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }
  std::vector<std::string> services() {
    std::lock_guard<std::mutex> lock(mu_);
    return services_;
  }

 private:
  http::HttpResponse Handle(http::HttpRequest&& r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      targets_.push_back(r.target);
    }
    if (r.method != "GET") return S3Error(405, "MethodNotAllowed", "only GET");
    if (!r.header("x-amz-content-sha256")) {
      return S3Error(400, "InvalidRequest", "Missing required header x-amz-content-sha256");
    }
    auth::SigV4Policy policy;
    policy.region = "us-west-2";
    policy.services = {"s3"};
    auto secrets = [](std::string_view id) -> std::optional<std::string> {
      if (id == kKeyId) return std::string(kSecret);
      return std::nullopt;
    };
    auto identity = auth::VerifySigV4(r, secrets, policy, FixedClock().now());
    if (!identity.ok()) {
      return S3Error(403, "SignatureDoesNotMatch", std::string(identity.status().message()));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      services_.push_back(identity->service);
    }

    std::string path(r.path());
    size_t slash = path.find('/', 1);
    std::string bucket = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    std::string key = slash == std::string::npos ? "" : Decode(path.substr(slash + 1));
    if (bucket == "broken-bucket") return S3Error(500, "InternalError", "We encountered an error");
    if (bucket != "my-bucket" && bucket != "evil-bucket" && bucket != "empty-bucket") {
      return S3Error(404, "NoSuchBucket", "The specified bucket does not exist");
    }
    if (slash == std::string::npos) {  // ListObjectsV2
      auto q = Query(r.query());
      if (q["list-type"] != "2") return S3Error(400, "InvalidArgument", "list-type");
      const std::string& prefix = q["prefix"];
      if (bucket == "empty-bucket") return Xml(200, ListResult(prefix, "", false));
      if (bucket == "evil-bucket") {
        return Xml(200, ListResult(prefix, Contents("lc/on_create.sh", 3) +
                                               Contents("lc/../../etc/passwd", 10),
                                   false));
      }
      if (prefix != "lc/") return Xml(200, ListResult(prefix, "", false));
      auto token = q.find("continuation-token");
      if (token == q.end()) {
        return Xml(200, ListResult(prefix,
                                   Contents("lc/", 0) +  // a console "folder"
                                       Contents("lc/utils/install.sh", 7) +
                                       Contents("lc/on_create.sh", 20),
                                   true, "page 2/+="));
      }
      if (token->second != "page 2/+=") return S3Error(400, "InvalidArgument", "bad token");
      return Xml(200, ListResult(prefix,
                                 Contents("lc/provisioning_parameters.json", 2) +
                                     Contents("lc/utils/", 0),
                                 false));
    }
    // GetObject
    if (key == "lc/on_create.sh") return {200, {}, "#!/bin/bash\necho hi\n"};
    if (key == "lc/utils/install.sh") return {200, {}, "install"};
    return S3Error(404, "NoSuchKey", "The specified key does not exist.");
  }

  std::mutex mu_;
  std::vector<std::string> targets_;
  std::vector<std::string> services_;
  std::unique_ptr<http::HttpServer> server_;
};

S3EndpointOptions Options(const std::string& url, std::string secret = kSecret) {
  S3EndpointOptions o;
  o.endpoint_url = url;
  o.region = "us-west-2";
  o.key = {kKeyId, std::move(secret)};
  o.timeout_seconds = 10;
  return o;
}

const S3Location kLc{"my-bucket", "lc/"};

TEST(S3EndpointSource, ListsEveryPageSignedForS3AndReads) {
  FakeS3 s3;
  FixedClock clock;
  S3EndpointSource source(Options(s3.url()), clock);
  auto listed = source.list(kLc);
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<BundleObject> expected = {{"on_create.sh", 20},
                                        {"provisioning_parameters.json", 2},
                                        {"utils/install.sh", 7}};
  EXPECT_EQ(*listed, expected);
  auto targets = s3.targets();
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0], "/my-bucket?list-type=2&prefix=lc%2F");
  EXPECT_EQ(targets[1], "/my-bucket?list-type=2&prefix=lc%2F&continuation-token=page%202%2F%2B%3D");

  auto bytes = source.read(kLc, "on_create.sh");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "#!/bin/bash\necho hi\n");
  EXPECT_EQ(*source.read(kLc, "utils/install.sh"), "install");
  EXPECT_EQ(s3.targets().back(), "/my-bucket/lc/utils/install.sh");
  for (const auto& service : s3.services()) EXPECT_EQ(service, "s3");
  EXPECT_EQ(s3.services().size(), 4u);  // every request verified

  auto missing = source.read(kLc, "on_init.sh");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(missing.status().message()),
            "lifecycle script 'on_init.sh' not found at s3://my-bucket/lc/");
}

TEST(S3EndpointSource, TraversalKeyInAListingIsFailedPrecondition) {
  FakeS3 s3;
  FixedClock clock;
  S3EndpointSource source(Options(s3.url()), clock);
  auto listed = source.list({"evil-bucket", "lc/"});
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(listed.status().message()),
            "key '../../etc/passwd' under s3://evil-bucket/lc/ escapes the lifecycle script "
            "directory");
  // read() refuses the same key before any request.
  size_t before = s3.targets().size();
  EXPECT_EQ(source.read({"evil-bucket", "lc/"}, "../../etc/passwd").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s3.targets().size(), before);
}

TEST(S3EndpointSource, EmptyPrefixAndMissingBucketAreNotFound) {
  FakeS3 s3;
  FixedClock clock;
  S3EndpointSource source(Options(s3.url()), clock);
  auto empty = source.list({"empty-bucket", "lc/"});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(empty.status().message()),
            "no lifecycle scripts found at s3://empty-bucket/lc/ (the prefix is empty)");
  auto other_prefix = source.list({"my-bucket", "nothing/"});
  EXPECT_EQ(other_prefix.status().code(), absl::StatusCode::kNotFound);
  auto no_bucket = source.list({"no-bucket", "lc/"});
  EXPECT_EQ(no_bucket.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(no_bucket.status().message()).find("bucket 'no-bucket' does not exist"),
            std::string::npos)
      << no_bucket.status();
}

TEST(S3EndpointSource, EndpointFailuresMapToStatuses) {
  FakeS3 s3;
  FixedClock clock;
  // Wrong secret: the endpoint's SigV4 check fails.
  S3EndpointSource wrong_key(Options(s3.url(), "not-the-secret"), clock);
  auto denied = wrong_key.list(kLc);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied) << denied.status();
  EXPECT_NE(std::string(denied.status().message()).find("SignatureDoesNotMatch"),
            std::string::npos);

  S3EndpointSource source(Options(s3.url()), clock);
  auto broken = source.list({"broken-bucket", "lc/"});
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kUnavailable) << broken.status();

  std::string url = s3.url();
  s3.server().stop();
  S3EndpointSource gone(Options(url), clock);
  auto unreachable = gone.list(kLc);
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(unreachable.status().message()).find("is unreachable"),
            std::string::npos)
      << unreachable.status();
}

TEST(S3EndpointSource, LimitsAreEnforced) {
  FakeS3 s3;
  FixedClock clock;
  S3EndpointOptions by_count = Options(s3.url());
  by_count.limits.max_objects = 2;
  auto counted = S3EndpointSource(by_count, clock).list(kLc);
  EXPECT_EQ(counted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(counted.status().message()).find("more than 2 objects"),
            std::string::npos);
  S3EndpointOptions by_size = Options(s3.url());
  by_size.limits.max_total_bytes = 10;
  S3EndpointSource small(by_size, clock);
  EXPECT_EQ(small.list(kLc).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(small.read(kLc, "on_create.sh").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hf::bundle
