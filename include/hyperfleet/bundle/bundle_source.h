#pragma once
// Lifecycle bundles: the files under a cluster's LifeCycleConfig.SourceS3Uri, which the
// control plane lists and reads for the node agent (docs/nodes.md, GET /agent/v1/bundle and
// /agent/v1/bundle/file). Two sources: plain files under <data-dir>/s3/<bucket>/<key>
// (LocalBucketSource) and an S3-compatible endpoint (S3EndpointSource).
//
// Error messages are written for a user reading a node's failure, e.g.
//   NotFound            "no lifecycle scripts found at s3://b/p/ (the prefix is empty)"
//   FailedPrecondition  "key '../x' under s3://b/p/ escapes the lifecycle script directory"
//   FailedPrecondition  "lifecycle bundle at s3://b/p/ has more than 10000 objects (the limit)"
//   Unavailable         "S3 endpoint http://10.0.0.1:9000 is unreachable: ..."
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::bundle {

/// A bucket and a key prefix.
struct S3Location {
  std::string bucket;  ///< a valid S3 bucket name (ValidateBucketName)
  /// Key prefix: empty (the whole bucket) or ending in "/"; passes CheckPrefix.
  std::string prefix;

  /// "s3://<bucket>/<prefix>", e.g. "s3://my-bucket/lifecycle/".
  std::string uri() const;
  bool operator==(const S3Location&) const = default;
};

/// Parses an S3 URI as LifeCycleConfig.SourceS3Uri may hold it (the service model's S3Uri
/// pattern is `(https|s3)://([^/]+)/?(.*)`):
///   s3://bucket[/prefix...]
///   https://bucket.s3.<region>.amazonaws.com[/prefix...]   (virtual-hosted)
///   https://bucket.s3.amazonaws.com[/prefix...]            (virtual-hosted, legacy global)
///   https://bucket.s3-<region>.amazonaws.com[/prefix...]   (virtual-hosted, legacy dash)
///   https://s3.<region>.amazonaws.com/bucket[/prefix...]   (path-style; also s3.amazonaws.com
///                                                           and s3-<region>.amazonaws.com)
/// ".amazonaws.com.cn" hosts are accepted too. In https URLs the path is percent-decoded.
/// The prefix is normalised to end with "/" unless empty ("s3://b/p" and "s3://b/p/" both
/// give prefix "p/").
/// Errors: InvalidArgument naming `field` for anything else: another scheme or host, a port,
/// query or fragment, a bad percent-escape, an invalid bucket name, or a prefix that
/// CheckPrefix refuses (it would escape the node's /tmp/<bucket>/<prefix>/ directory), e.g.
///   "LifeCycleConfig.SourceS3Uri 'ftp://x/y' is not an S3 URI (expected s3://bucket/prefix
///    or an https S3 URL)"
StatusOr<S3Location> ParseS3Uri(std::string_view uri,
                                std::string_view field = "LifeCycleConfig.SourceS3Uri");

/// Checks S3 bucket naming (AWS "Bucket naming rules", general purpose buckets): 3-63
/// characters of a-z 0-9 . -, starting and ending with a letter or digit, no "..", not an
/// IPv4 address, no "xn--" / "sthree-" prefix nor "-s3alias" / "--ol-s3" suffix.
/// Errors: InvalidArgument "bucket name '<b>' is invalid: <rule>".
Status ValidateBucketName(std::string_view bucket);

/// Checks a prefix: empty, or relative path segments each ending in "/", with no "." or ".."
/// segment, no empty segment, no NUL or backslash. Errors: InvalidArgument.
Status CheckPrefix(std::string_view prefix);

/// The unsafe-key rule for a key relative to the bundle's prefix: it must be non-empty, not
/// absolute, and have no "." or ".." segment, no empty segment (so no "//" or trailing "/"),
/// no NUL and no backslash. `where` (e.g. "s3://b/p/") goes into the message.
/// Errors: FailedPrecondition, e.g. "key '../x' under s3://b/p/ escapes the lifecycle script
/// directory", "key 'a//b' under s3://b/p/ has an empty path segment", "key 'a\\b' under
/// s3://b/p/ contains a backslash". Control bytes in keys are printed as \xNN.
Status CheckRelativeKey(std::string_view relative_key, std::string_view where);

/// One object of a bundle.
struct BundleObject {
  std::string key;     ///< relative to the prefix, e.g. "on_create.sh", "utils/install.sh"
  uint64_t size = 0;   ///< bytes
  bool operator==(const BundleObject&) const = default;
};

/// Bounds on a bundle, so a wrong prefix (a whole data bucket) cannot exhaust the host.
struct BundleLimits {
  uint64_t max_total_bytes = 256ull << 20;  ///< sum of object sizes; also caps one read()
  size_t max_objects = 10000;               ///< objects in one listing
};

/// Where a cluster's lifecycle scripts come from. Implementations are thread-safe.
class BundleSource {
 public:
  virtual ~BundleSource() = default;

  /// Every object under `location.prefix`, recursively (sub-folders included), keys
  /// relative to the prefix, sorted by key (byte order). Folder placeholder objects (keys
  /// ending in "/" with size 0) are skipped.
  /// Errors: NotFound "no lifecycle scripts found at s3://b/p/ (...)" when the prefix holds
  /// nothing or the bucket does not exist; FailedPrecondition for an unsafe key
  /// (CheckRelativeKey) or a bundle over the limits; InvalidArgument for a bad bucket name or
  /// prefix; PermissionDenied when the endpoint refuses the credentials; Unavailable when
  /// the endpoint cannot be reached or answers with a server error.
  virtual StatusOr<std::vector<BundleObject>> list(const S3Location& location) = 0;

  /// The bytes of `relative_key` under `location.prefix`.
  /// Errors: FailedPrecondition for an unsafe key or an object over max_total_bytes;
  /// NotFound "lifecycle script 'k' not found at s3://b/p/"; otherwise as list().
  virtual StatusOr<std::string> read(const S3Location& location,
                                     std::string_view relative_key) = 0;
};

/// Objects as plain files: the object `key` of bucket `b` is the file <root>/<b>/<key>
/// (root is <data-dir>/s3). Directories recurse; files that are not regular (sockets, FIFOs,
/// devices) and dangling symlinks are skipped; a symlink, or a directory on the way, whose
/// target resolves outside <root>/<bucket> is an unsafe key (FailedPrecondition). Directory
/// symlinks inside the bucket are followed once each (loops end). A missing <root>/<bucket>
/// is NotFound.
class LocalBucketSource final : public BundleSource {
 public:
  explicit LocalBucketSource(std::filesystem::path root, BundleLimits limits = {});
  StatusOr<std::vector<BundleObject>> list(const S3Location& location) override;
  StatusOr<std::string> read(const S3Location& location, std::string_view relative_key) override;

 private:
  std::filesystem::path root_;
  BundleLimits limits_;
};

/// Options of an S3-compatible endpoint (AWS S3, MinIO, ...).
struct S3EndpointOptions {
  /// Scheme, host and optional port, no path: "http://127.0.0.1:9000",
  /// "https://s3.us-west-2.amazonaws.com". Requests are path-style: <endpoint>/<bucket>/<key>.
  std::string endpoint_url;
  std::string region = "us-east-1";  ///< SigV4 credential scope region
  auth::AccessKey key;               ///< signs every request (SigV4, service "s3")
  int timeout_seconds = 60;          ///< bounds one HTTP exchange
  BundleLimits limits;
};

/// Lists with ListObjectsV2 (GET /<bucket>?list-type=2&prefix=..., following
/// NextContinuationToken) and reads with GetObject (GET /<bucket>/<key>), every request
/// signed with SigV4 for service "s3" with an x-amz-content-sha256 header, as S3 requires.
/// Keys of a listing pass the unsafe-key rule ("p/../../etc/passwd" is FailedPrecondition).
/// S3 errors map to statuses: NoSuchBucket/NoSuchKey → NotFound, AccessDenied,
/// InvalidAccessKeyId, SignatureDoesNotMatch → PermissionDenied, 5xx and transport failures
/// → Unavailable, a malformed answer → Unavailable. Requests are serialised (one HTTP
/// client, keep-alive).
/// Known limit: SignSigV4 builds the canonical URI by the non-S3 rule (encode twice), which
/// agrees with S3's rule only for keys of A-Z a-z 0-9 - _ . ~ and "/"; a GetObject of a key
/// with other bytes (a space, "+") would be refused by a real S3 endpoint.
class S3EndpointSource final : public BundleSource {
 public:
  /// `clock` (not owned, must outlive the source) dates the signatures.
  S3EndpointSource(S3EndpointOptions options, const Clock& clock);
  ~S3EndpointSource() override;
  StatusOr<std::vector<BundleObject>> list(const S3Location& location) override;
  StatusOr<std::string> read(const S3Location& location, std::string_view relative_key) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hf::bundle
