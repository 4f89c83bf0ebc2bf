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
  /// Loads `path`; when it does not exist, creates it (mode 0600, written to a temporary file
  /// then renamed; missing parent directories are made with mode 0700) holding one fresh
  /// random key pair in profile [default] ("AKIA" + 16 of [A-Z0-9], a 40-character secret,
  /// from RAND_bytes) and sets `*created` to that pair; otherwise resets `*created`.
  /// `created` may be null. Errors: unreadable or unwritable file (Internal), a file with no
  /// key pair (InvalidArgument).
  static StatusOr<CredentialStore> LoadOrCreate(const std::string& path,
                                                std::optional<AccessKey>* created);
  /// Parses credentials text as the AWS CLI reads it: `[name]` sections, `key = value` or
  /// `key: value` lines, key names in any case, whole-line `#`/`;` comments, surrounding
  /// whitespace and CRLF ignored. Sections without both keys, and lines that are neither, are
  /// skipped. Keys come in file order, except that profile [default] comes first.
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
