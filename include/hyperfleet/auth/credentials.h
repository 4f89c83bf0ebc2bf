#pragma once
// Access keys of the control plane, kept in `<data-dir>/credentials` in the INI format of
// ~/.aws/credentials ([profile] sections with aws_access_key_id / aws_secret_access_key).
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/status.h"

namespace hf::auth {
using http::HttpRequest;

/// The set of access keys the server accepts. Thread-safe.
class CredentialStore {
 public:
  /// Loads `path`; when it does not exist, creates it (mode 0600) holding one fresh random
  /// key pair in profile [default] and sets `*created` to that pair. Errors: unreadable or
  /// unwritable file (Internal), a file with no key pair (InvalidArgument).
  static StatusOr<CredentialStore> LoadOrCreate(const std::string& path,
                                                std::optional<AccessKey>* created);
  /// Parses credentials text (INI as above). Sections without both keys are skipped.
  static std::vector<AccessKey> Parse(std::string_view text);

  CredentialStore() = default;
  CredentialStore(CredentialStore&& other) noexcept;
  CredentialStore& operator=(CredentialStore&& other) noexcept;

  /// Adds (or replaces) a key pair in memory only.
  void add(AccessKey key);
  /// The secret of `access_key_id`, if known.
  std::optional<std::string> secretFor(std::string_view access_key_id) const;
  /// All key pairs (the first one is the default for local clients).
  std::vector<AccessKey> all() const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<AccessKey> keys_;
};

}  // namespace hf::auth
