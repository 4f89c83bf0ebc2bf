// S3 URIs, bucket names and the unsafe-key rule shared by every bundle source.
#include <cctype>
#include <cstdio>
#include <optional>

#include "hyperfleet/bundle/bundle_source.h"
#include "bundle/bundle_limits.h"
#include "hyperfleet/common/uri.h"

namespace hf::bundle {
namespace {

// Keys appear in messages: control bytes and quotes must not garble a node's failure text.
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 512)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out.append(buf);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > 512) out.append("...");
  return out;
}

// What is wrong with a relative path (segments separated by '/'), or nullopt when safe.
// `allow_trailing_slash`: a prefix ends in "/", a key does not.
std::optional<std::string> PathProblem(std::string_view path, bool allow_trailing_slash) {
  if (path.find('\0') != std::string_view::npos) return "contains a NUL byte";
  if (path.find('\\') != std::string_view::npos) return "contains a backslash";
  if (!path.empty() && path.front() == '/') return "escapes the lifecycle script directory";
  if (allow_trailing_slash && !path.empty() && path.back() == '/') path.remove_suffix(1);
  bool escapes = false;
  bool empty_segment = path.empty();
  bool dot_segment = false;
  while (true) {
    size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    if (seg == "..") escapes = true;
    if (seg == ".") dot_segment = true;
    if (seg.empty()) empty_segment = true;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  if (escapes) return "escapes the lifecycle script directory";
  if (dot_segment) return "has a '.' path segment";
  if (empty_segment) return "has an empty path segment";
  return std::nullopt;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A region as it appears in S3 host names: "us-west-2", "cn-north-1".
bool IsRegionLabel(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

// True when `service_host` (the host without its bucket) names S3 itself: "s3", "s3.<region>"
// or "s3-<region>", followed by ".amazonaws.com" or ".amazonaws.com.cn".
bool IsS3ServiceHost(std::string_view host) {
  for (std::string_view domain : {".amazonaws.com", ".amazonaws.com.cn"}) {
    if (!EndsWith(host, domain)) continue;
    std::string_view head = host.substr(0, host.size() - domain.size());
    if (head == "s3") return true;
    if (head.starts_with("s3.") || head.starts_with("s3-")) return IsRegionLabel(head.substr(3));
  }
  return false;
}

Status UriError(std::string_view field, std::string_view uri, std::string_view why) {
  return absl::InvalidArgumentError(std::string(field) + " '" + Printable(uri) + "' " +
                                    std::string(why));
}

}  // namespace

std::string S3Location::uri() const { return "s3://" + bucket + "/" + prefix; }

Status ValidateBucketName(std::string_view bucket) {
  auto bad = [&](std::string_view rule) {
    return absl::InvalidArgumentError("bucket name '" + Printable(bucket) + "' is invalid: " +
                                      std::string(rule));
  };
  if (bucket.size() < 3 || bucket.size() > 63) return bad("it must be 3 to 63 characters");
  for (char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-')) {
      return bad("only lowercase letters, digits, '.' and '-' are allowed");
    }
  }
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  if (!alnum(bucket.front()) || !alnum(bucket.back())) {
    return bad("it must begin and end with a letter or digit");
  }
  if (bucket.find("..") != std::string_view::npos) return bad("it must not contain '..'");
  int dots = 0;
  bool digits_and_dots = true;
  for (char c : bucket) {
    if (c == '.') ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c))) digits_and_dots = false;
  }
  if (digits_and_dots && dots == 3) return bad("it must not be formatted as an IP address");
  if (bucket.starts_with("xn--") || bucket.starts_with("sthree-") ||
      EndsWith(bucket, "-s3alias") || EndsWith(bucket, "--ol-s3")) {
    return bad("the prefix or suffix is reserved by S3");
  }
  return absl::OkStatus();
}

Status CheckPrefix(std::string_view prefix) {
  if (prefix.empty()) return absl::OkStatus();
  if (prefix.back() != '/') {
    return absl::InvalidArgumentError("prefix '" + Printable(prefix) + "' must end with '/'");
  }
  if (auto problem = PathProblem(prefix, /*allow_trailing_slash=*/true)) {
    return absl::InvalidArgumentError("prefix '" + Printable(prefix) + "' " + *problem);
  }
  return absl::OkStatus();
}

Status CheckRelativeKey(std::string_view relative_key, std::string_view where) {
  if (relative_key.empty()) {
    return absl::FailedPreconditionError("an empty key under " + std::string(where) +
                                         " is not a file name");
  }
  if (auto problem = PathProblem(relative_key, /*allow_trailing_slash=*/false)) {
    return absl::FailedPreconditionError("key '" + Printable(relative_key) + "' under " +
                                         std::string(where) + " " + *problem);
  }
  return absl::OkStatus();
}

StatusOr<S3Location> ParseS3Uri(std::string_view uri, std::string_view field) {
  const std::string_view kExpected =
      "is not an S3 URI (expected s3://bucket/prefix or an https S3 URL)";
  S3Location location;
  std::string path;  // after the bucket, decoded
  if (uri.starts_with("s3://")) {
    std::string_view rest = uri.substr(5);
    size_t slash = rest.find('/');
    location.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) path = std::string(rest.substr(slash + 1));
  } else if (uri.starts_with("https://")) {
    std::string_view rest = uri.substr(8);
    if (rest.find_first_of("?#") != std::string_view::npos) {
      return UriError(field, uri, "must not have a query or fragment");
    }
    size_t slash = rest.find('/');
    std::string_view host = rest.substr(0, slash);
    std::string_view raw_path =
        slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (host.find_first_of(":@") != std::string_view::npos) {
      return UriError(field, uri, "must not have a port or user info");
    }
    StatusOr<std::string> decoded = UriDecode(raw_path);
    if (!decoded.ok()) return UriError(field, uri, "has a bad percent-escape");
    if (IsS3ServiceHost(host)) {
      // Path-style: the first path segment is the bucket.
      size_t bucket_end = decoded->find('/');
      location.bucket = decoded->substr(0, bucket_end);
      if (bucket_end != std::string::npos) path = decoded->substr(bucket_end + 1);
    } else {
      // Virtual-hosted: <bucket>.<S3 service host>; buckets may contain dots, so try each.
      bool found = false;
      for (size_t dot = host.find('.'); dot != std::string_view::npos;
           dot = host.find('.', dot + 1)) {
        if (IsS3ServiceHost(host.substr(dot + 1))) {
          location.bucket = std::string(host.substr(0, dot));
          found = true;
          break;
        }
      }
      if (!found) return UriError(field, uri, kExpected);
      path = *decoded;
    }
  } else {
    return UriError(field, uri, kExpected);
  }
  if (Status s = ValidateBucketName(location.bucket); !s.ok()) {
    return UriError(field, uri, "has an invalid bucket: " + std::string(s.message()));
  }
  if (!path.empty() && path.back() != '/') path.push_back('/');
  if (Status s = CheckPrefix(path); !s.ok()) {
    return UriError(field, uri, "has an unusable prefix: " + std::string(s.message()));
  }
  location.prefix = std::move(path);
  return location;
}

Status BundleTooLarge(const BundleLimits& limits, const std::string& where) {
  return absl::FailedPreconditionError("lifecycle bundle at " + where + " is larger than " +
                                       std::to_string(limits.max_total_bytes) +
                                       " bytes (the limit)");
}

Status CountBundleObject(const BundleLimits& limits, const std::string& where, size_t count,
                         uint64_t size, uint64_t* total) {
  if (count >= limits.max_objects) {
    return absl::FailedPreconditionError("lifecycle bundle at " + where + " has more than " +
                                         std::to_string(limits.max_objects) +
                                         " objects (the limit)");
  }
  *total += size;
  if (size > limits.max_total_bytes || *total > limits.max_total_bytes) {
    return BundleTooLarge(limits, where);
  }
  return absl::OkStatus();
}

}  // namespace hf::bundle
