// Lifecycle bundles from an S3-compatible endpoint: ListObjectsV2 and GetObject, path-style,
// SigV4-signed (service "s3"). Request and response shapes from the Amazon S3 API reference.
#include <pugixml.hpp>

#include <algorithm>
#include <mutex>
#include <set>

#include "hyperfleet/bundle/bundle_source.h"
#include "bundle/bundle_limits.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/http/http_client.h"

namespace hf::bundle {
namespace {

// "http://host:port/..." -> "host:port" (the Host header the request is signed with).
std::string Authority(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme != std::string_view::npos) url.remove_prefix(scheme + 3);
  return std::string(url.substr(0, url.find('/')));
}

std::string StripTrailingSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// The <Code> and <Message> of an S3 error body, "HTTP <status>" when there are none.
std::string S3ErrorText(const http::HttpResponse& response, std::string* code_out) {
  pugi::xml_document doc;
  std::string code, message;
  if (doc.load_buffer(response.body.data(), response.body.size())) {
    pugi::xml_node error = doc.child("Error");
    code = error.child_value("Code");
    message = error.child_value("Message");
  }
  if (code_out) *code_out = code;
  std::string text = "HTTP " + std::to_string(response.status);
  if (!code.empty()) text += " " + code;
  if (!message.empty()) text += ": " + message;
  return text;
}

}  // namespace

struct S3EndpointSource::Impl {
  Impl(S3EndpointOptions o, const Clock& c) : options(std::move(o)), clock(c) {}

  S3EndpointOptions options;
  const Clock& clock;
  std::string endpoint;  // without trailing '/'
  std::string host;
  std::mutex mu;  // guards client (one connection)
  http::HttpClient client;

  // One signed GET of `target`; transport failures are Unavailable naming the endpoint.
  StatusOr<http::HttpResponse> Get(const std::string& target, std::string_view what) {
    http::HttpRequest request;
    request.method = "GET";
    request.target = target;
    // S3 requires the payload hash header on every signed request; a GET has no body.
    request.headers.emplace_back("x-amz-content-sha256", auth::Sha256Hex(""));
    auth::SignSigV4(request, options.key, options.region, "s3", host, clock.now());
    std::lock_guard<std::mutex> lock(mu);
    auto response = client.Send(endpoint, request, options.timeout_seconds);
    if (!response.ok()) {
      return absl::UnavailableError("S3 endpoint " + endpoint + " is unreachable while " +
                                    std::string(what) + ": " +
                                    std::string(response.status().message()));
    }
    return response;
  }

  // Maps a non-2xx answer to a status; NoSuchBucket/NoSuchKey are left to the caller.
  Status HttpError(const http::HttpResponse& response, std::string_view what) {
    std::string text = S3ErrorText(response, nullptr);
    std::string message = "S3 endpoint " + endpoint + " refused " + std::string(what) + ": " + text;
    if (response.status == 401 || response.status == 403) {
      return absl::PermissionDeniedError(message);
    }
    if (response.status >= 500 || response.status == 429) {
      return absl::UnavailableError(message);
    }
    if (response.status == 404) return absl::NotFoundError(message);
    return absl::FailedPreconditionError(message);
  }
};

S3EndpointSource::S3EndpointSource(S3EndpointOptions options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), clock)) {
  impl_->endpoint = StripTrailingSlash(impl_->options.endpoint_url);
  impl_->host = Authority(impl_->endpoint);
}

S3EndpointSource::~S3EndpointSource() = default;

StatusOr<std::vector<BundleObject>> S3EndpointSource::list(const S3Location& location) {
  HF_RETURN_IF_ERROR(ValidateBucketName(location.bucket));
  HF_RETURN_IF_ERROR(CheckPrefix(location.prefix));
  const std::string where = location.uri();
  const std::string what = "listing " + where;
  const BundleLimits& limits = impl_->options.limits;
  std::vector<BundleObject> objects;
  uint64_t total = 0;
  std::string token;
  std::set<std::string> tokens_seen;  // an endpoint repeating a token would loop forever
  while (true) {
    std::string target = "/" + location.bucket + "?list-type=2&prefix=" +
                         UriEncode(location.prefix, false);
    if (!token.empty()) target += "&continuation-token=" + UriEncode(token, false);
    HF_ASSIGN_OR_RETURN(http::HttpResponse response, impl_->Get(target, what));
    if (response.status != 200) {
      std::string code;
      S3ErrorText(response, &code);
      if (code == "NoSuchBucket") {
        return absl::NotFoundError("no lifecycle scripts found at " + where + " (bucket '" +
                                   location.bucket + "' does not exist at " +
                                   impl_->endpoint + ")");
      }
      return impl_->HttpError(response, what);
    }
    pugi::xml_document doc;
    pugi::xml_node result;
    if (doc.load_buffer(response.body.data(), response.body.size())) {
      result = doc.child("ListBucketResult");
    }
    if (!result) {
      return absl::UnavailableError("S3 endpoint " + impl_->endpoint +
                                    " sent a malformed ListObjectsV2 answer while " + what);
    }
    for (pugi::xml_node contents : result.children("Contents")) {
      std::string key = contents.child_value("Key");
      std::string size_text = contents.child_value("Size");
      uint64_t size = 0;
      try {
        size = std::stoull(size_text);
      } catch (...) {
        return absl::UnavailableError("S3 endpoint " + impl_->endpoint +
                                      " sent a malformed Size for key '" + key + "' while " +
                                      what);
      }
      if (key.compare(0, location.prefix.size(), location.prefix) != 0) {
        return absl::UnavailableError("S3 endpoint " + impl_->endpoint + " listed key '" + key +
                                      "', outside the prefix, while " + what);
      }
      std::string relative = key.substr(location.prefix.size());
      // Folder placeholders ("Create folder" in the console) are not files.
      if (relative.empty() || (relative.back() == '/' && size == 0)) continue;
      HF_RETURN_IF_ERROR(CheckRelativeKey(relative, where));
      HF_RETURN_IF_ERROR(CountBundleObject(limits, where, objects.size(), size, &total));
      objects.push_back({std::move(relative), size});
    }
    if (std::string(result.child_value("IsTruncated")) != "true") break;
    token = result.child_value("NextContinuationToken");
    if (token.empty() || !tokens_seen.insert(token).second) {
      return absl::UnavailableError("S3 endpoint " + impl_->endpoint +
                                    " sent a truncated listing without a new continuation "
                                    "token while " + what);
    }
  }
  if (objects.empty()) {
    return absl::NotFoundError("no lifecycle scripts found at " + where +
                               " (the prefix is empty)");
  }
  std::sort(objects.begin(), objects.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  return objects;
}

StatusOr<std::string> S3EndpointSource::read(const S3Location& location,
                                             std::string_view relative_key) {
  HF_RETURN_IF_ERROR(ValidateBucketName(location.bucket));
  HF_RETURN_IF_ERROR(CheckPrefix(location.prefix));
  const std::string where = location.uri();
  HF_RETURN_IF_ERROR(CheckRelativeKey(relative_key, where));
  const std::string key = location.prefix + std::string(relative_key);
  const std::string what = "reading '" + std::string(relative_key) + "' at " + where;
  HF_ASSIGN_OR_RETURN(
      http::HttpResponse response,
      impl_->Get("/" + location.bucket + "/" + UriEncode(key, /*keep_slash=*/true), what));
  if (response.status != 200) {
    std::string code;
    S3ErrorText(response, &code);
    if (code == "NoSuchKey" || code == "NoSuchBucket" ||
        (response.status == 404 && code.empty())) {
      return absl::NotFoundError("lifecycle script '" + std::string(relative_key) +
                                 "' not found at " + where);
    }
    return impl_->HttpError(response, what);
  }
  if (response.body.size() > impl_->options.limits.max_total_bytes) {
    return absl::FailedPreconditionError(
        "lifecycle script '" + std::string(relative_key) + "' at " + where + " is " +
        std::to_string(response.body.size()) + " bytes, over the limit of " +
        std::to_string(impl_->options.limits.max_total_bytes));
  }
  return std::move(response.body);
}

}  // namespace hf::bundle
