#include "hyperfleet/auth/credentials.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/random.h"
#include "hyperfleet/common/strings.h"

namespace hf::auth {
namespace {

AccessKey GenerateKey() {
  // Same shapes as AWS keys: "AKIA" + 16 of [A-Z0-9], and a 40-character base64-ish secret.
  return AccessKey{
      "AKIA" + RandomString("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 16),
      RandomString("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 40)};
}

// The whole file; nullopt when it does not exist.
StatusOr<std::optional<std::string>> ReadIfExists(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  if (absl::IsNotFound(text.status())) return std::optional<std::string>();
  if (!text.ok()) return text.status();
  return std::optional<std::string>(*std::move(text));
}

std::string FormatCredentials(const AccessKey& key) {
  return "# Hyperfleet access keys, in the format of ~/.aws/credentials.\n"
         "[default]\n"
         "aws_access_key_id = " + key.access_key_id + "\n"
         "aws_secret_access_key = " + key.secret_access_key + "\n";
}

}  // namespace

std::vector<AccessKey> CredentialStore::Parse(std::string_view text) {
  struct Section {
    std::string name;
    AccessKey key;
  };
  std::vector<Section> sections;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = StripAsciiWhitespace(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      size_t close = line.find(']');
      if (close == std::string_view::npos) continue;  // not a section header: ignore
      sections.push_back({std::string(StripAsciiWhitespace(line.substr(1, close - 1))), {}});
      continue;
    }
    if (sections.empty()) continue;  // keys before any section belong to no profile
    // Python's configparser (used by the AWS CLI) accepts '=' or ':' and lowercases names.
    size_t sep = line.find_first_of("=:");
    if (sep == std::string_view::npos) continue;
    std::string name = absl::AsciiStrToLower(AbslView(StripAsciiWhitespace(line.substr(0, sep))));
    std::string_view value = StripAsciiWhitespace(line.substr(sep + 1));
    if (name == "aws_access_key_id") {
      sections.back().key.access_key_id = std::string(value);
    } else if (name == "aws_secret_access_key") {
      sections.back().key.secret_access_key = std::string(value);
    }
  }
  // [default] first: it is the key local clients use.
  std::stable_partition(sections.begin(), sections.end(),
                        [](const Section& s) { return s.name == "default"; });
  std::vector<AccessKey> keys;
  for (auto& s : sections) {
    if (s.key.access_key_id.empty() || s.key.secret_access_key.empty()) continue;
    keys.push_back(std::move(s.key));
  }
  return keys;
}

StatusOr<CredentialStore> CredentialStore::LoadOrCreate(const std::string& path,
                                                        std::optional<AccessKey>* created) {
  if (created != nullptr) created->reset();
  HF_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadIfExists(path));
  CredentialStore store;
  if (text) {
    std::vector<AccessKey> keys = Parse(*text);
    if (keys.empty()) {
      return absl::InvalidArgumentError(
          path + " holds no key pair (a [profile] with aws_access_key_id and "
                 "aws_secret_access_key)");
    }
    for (auto& key : keys) store.add(std::move(key));
    return store;
  }
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    HF_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash), 0700));
  }
  AccessKey key = GenerateKey();
  // Through a temporary file and rename(): a reader never sees a half-written file.
  HF_RETURN_IF_ERROR(WriteFileAtomically(path, FormatCredentials(key), 0600));
  if (created != nullptr) *created = key;
  store.add(std::move(key));
  return store;
}

CredentialStore::CredentialStore(CredentialStore&& other) noexcept {
  std::unique_lock lock(other.mu_);
  keys_ = std::move(other.keys_);
}

CredentialStore& CredentialStore::operator=(CredentialStore&& other) noexcept {
  if (this != &other) {
    std::scoped_lock lock(mu_, other.mu_);
    keys_ = std::move(other.keys_);
  }
  return *this;
}

void CredentialStore::add(AccessKey key) {
  std::unique_lock lock(mu_);
  for (auto& existing : keys_) {
    if (existing.access_key_id == key.access_key_id) {
      existing = std::move(key);
      return;
    }
  }
  keys_.push_back(std::move(key));
}

std::optional<std::string> CredentialStore::secretFor(std::string_view access_key_id) const {
  std::shared_lock lock(mu_);
  for (const auto& key : keys_) {
    if (key.access_key_id == access_key_id) return key.secret_access_key;
  }
  return std::nullopt;
}

std::vector<AccessKey> CredentialStore::all() const {
  std::shared_lock lock(mu_);
  return keys_;
}

}  // namespace hf::auth
