// Lifecycle bundles from plain files: <root>/<bucket>/<key>.
#include <algorithm>
#include <set>
#include <system_error>

#include "hyperfleet/bundle/bundle_source.h"
#include "bundle/bundle_limits.h"
#include "hyperfleet/common/fs.h"

namespace hf::bundle {
namespace fs = std::filesystem;
namespace {

// Lexical containment of canonical paths.
bool Within(const fs::path& path, const fs::path& base) {
  const std::string p = path.string(), b = base.string();
  return p == b || (p.size() > b.size() && p.compare(0, b.size(), b) == 0 && p[b.size()] == '/');
}

std::string StripTrailingSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

struct Walk {
  const fs::path& bucket;  // canonical
  const std::string& where;
  const BundleLimits& limits;
  std::vector<BundleObject> objects;
  uint64_t total = 0;
  std::set<fs::path> visited;  // canonical directories, so symlink loops end

  Status Add(std::string key, uint64_t size) {
    HF_RETURN_IF_ERROR(CountBundleObject(limits, where, objects.size(), size, &total));
    objects.push_back({std::move(key), size});
    return absl::OkStatus();
  }

  Status Dir(const fs::path& dir, const std::string& rel_prefix) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    if (ec) {
      return absl::UnavailableError("cannot read " + dir.string() + " for " + where + ": " +
                                    ec.message());
    }
    for (; it != end; it.increment(ec)) {
      if (ec) break;
      const fs::directory_entry& entry = *it;
      std::string key = rel_prefix + entry.path().filename().string();
      HF_RETURN_IF_ERROR(CheckRelativeKey(key, where));
      fs::file_status link_status = entry.symlink_status(ec);
      if (ec) continue;  // vanished meanwhile
      fs::path target = entry.path();
      if (fs::is_symlink(link_status)) {
        target = fs::canonical(entry.path(), ec);
        if (ec) continue;  // dangling: not an object
        if (!Within(target, bucket)) {
          return absl::FailedPreconditionError(
              "key '" + key + "' under " + where +
              " escapes the lifecycle script directory (a symbolic link out of the bucket)");
        }
      }
      fs::file_status st = fs::status(target, ec);
      if (ec) continue;
      if (fs::is_directory(st)) {
        fs::path canonical = fs::canonical(target, ec);
        if (ec || !visited.insert(canonical).second) continue;
        HF_RETURN_IF_ERROR(Dir(target, key + "/"));
      } else if (fs::is_regular_file(st)) {
        uint64_t size = fs::file_size(target, ec);
        if (ec) continue;
        HF_RETURN_IF_ERROR(Add(std::move(key), size));
      }
      // Sockets, FIFOs and devices are not objects.
    }
    if (ec) {
      return absl::UnavailableError("cannot read " + dir.string() + " for " + where + ": " +
                                    ec.message());
    }
    return absl::OkStatus();
  }
};

// <root>/<bucket> made canonical, after checking the bucket name and prefix.
StatusOr<fs::path> BucketDir(const fs::path& root, const S3Location& location) {
  HF_RETURN_IF_ERROR(ValidateBucketName(location.bucket));
  HF_RETURN_IF_ERROR(CheckPrefix(location.prefix));
  fs::path dir = root / location.bucket;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError("no lifecycle scripts found at " + location.uri() +
                               " (bucket '" + location.bucket +
                               "' does not exist: no directory " + dir.string() + ")");
  }
  fs::path canonical = fs::canonical(dir, ec);
  if (ec) {
    return absl::UnavailableError("cannot resolve " + dir.string() + ": " + ec.message());
  }
  return canonical;
}

}  // namespace

LocalBucketSource::LocalBucketSource(fs::path root, BundleLimits limits)
    : root_(std::move(root)), limits_(limits) {}

StatusOr<std::vector<BundleObject>> LocalBucketSource::list(const S3Location& location) {
  HF_ASSIGN_OR_RETURN(fs::path bucket, BucketDir(root_, location));
  const std::string where = location.uri();
  const std::string empty = "no lifecycle scripts found at " + where + " (the prefix is empty)";
  fs::path start = bucket;
  if (!location.prefix.empty()) start /= StripTrailingSlash(location.prefix);
  std::error_code ec;
  fs::path canonical = fs::canonical(start, ec);
  if (ec) return absl::NotFoundError(empty);
  if (!Within(canonical, bucket)) {
    return absl::FailedPreconditionError("prefix of " + where +
                                         " escapes the bucket (a symbolic link out of it)");
  }
  if (!fs::is_directory(canonical, ec)) return absl::NotFoundError(empty);

  Walk walk{bucket, where, limits_, {}, 0, {canonical}};
  HF_RETURN_IF_ERROR(walk.Dir(start, ""));
  if (walk.objects.empty()) return absl::NotFoundError(empty);
  std::sort(walk.objects.begin(), walk.objects.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  return std::move(walk.objects);
}

StatusOr<std::string> LocalBucketSource::read(const S3Location& location,
                                              std::string_view relative_key) {
  HF_ASSIGN_OR_RETURN(fs::path bucket, BucketDir(root_, location));
  const std::string where = location.uri();
  HF_RETURN_IF_ERROR(CheckRelativeKey(relative_key, where));
  const std::string missing =
      "lifecycle script '" + std::string(relative_key) + "' not found at " + where;
  fs::path path = bucket / (location.prefix + std::string(relative_key));
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  if (ec) return absl::NotFoundError(missing);
  if (!Within(canonical, bucket)) {
    return absl::FailedPreconditionError("key '" + std::string(relative_key) + "' under " +
                                         where +
                                         " escapes the lifecycle script directory (a symbolic "
                                         "link out of the bucket)");
  }
  if (!fs::is_regular_file(canonical, ec)) return absl::NotFoundError(missing);
  uint64_t size = fs::file_size(canonical, ec);
  if (ec) return absl::NotFoundError(missing);
  if (size > limits_.max_total_bytes) {
    return absl::FailedPreconditionError("lifecycle script '" + std::string(relative_key) +
                                         "' at " + where + " is " + std::to_string(size) +
                                         " bytes, over the limit of " +
                                         std::to_string(limits_.max_total_bytes));
  }
  StatusOr<std::string> bytes = ReadFile(canonical.string());
  // A file that changed size since it was measured is not read as half of one.
  if (!bytes.ok() || bytes->size() != size) {
    return absl::UnavailableError("cannot read " + canonical.string() + " for " + where);
  }
  return bytes;
}

}  // namespace hf::bundle
