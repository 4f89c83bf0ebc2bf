#include "hyperfleet/auth/credentials.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

namespace hf::auth {
namespace {

std::string_view Trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
                                   c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(std::string(what) + " " + path + ": " + std::strerror(errno));
}

// `n` characters drawn uniformly from `alphabet` (at most 256 symbols) with RAND_bytes.
// Bytes beyond the largest multiple of the alphabet size are rejected so no symbol is favoured.
StatusOr<std::string> RandomString(size_t n, std::string_view alphabet) {
  const unsigned limit = 256 - 256 % alphabet.size();
  std::string out;
  out.reserve(n);
  while (out.size() < n) {
    unsigned char buf[64];
    if (RAND_bytes(buf, sizeof(buf)) != 1) {
      return absl::InternalError("RAND_bytes failed: cannot generate an access key");
    }
    for (unsigned char b : buf) {
      if (b < limit && out.size() < n) out.push_back(alphabet[b % alphabet.size()]);
    }
  }
  return out;
}

StatusOr<AccessKey> GenerateKey() {
  // Same shapes as AWS keys: "AKIA" + 16 of [A-Z0-9], and a 40-character base64-ish secret.
  HF_ASSIGN_OR_RETURN(std::string id, RandomString(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"));
  HF_ASSIGN_OR_RETURN(
      std::string secret,
      RandomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"));
  return AccessKey{"AKIA" + id, std::move(secret)};
}

// mkdir -p of the directory holding `path`; directories it creates get mode 0700.
Status MakeParentDirs(const std::string& path) {
  size_t last = path.rfind('/');
  if (last == std::string::npos || last == 0) return absl::OkStatus();
  std::string dir = path.substr(0, last);
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("cannot create directory", prefix);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Errno("cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) return absl::InternalError(dir + " is not a directory");
  return absl::OkStatus();
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Writes `content` to `path` with mode 0600 through a temporary file and rename(), so a
// reader never sees a half-written credentials file.
Status WriteFileAtomically(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());  // creates the file with mode 0600
  if (fd < 0) return Errno("cannot create", tmp);
  Status status = WriteAll(fd, content, tmp);
  if (status.ok() && ::fchmod(fd, 0600) != 0) status = Errno("cannot chmod", tmp);
  if (status.ok() && ::fsync(fd) != 0) status = Errno("cannot sync", tmp);
  if (::close(fd) != 0 && status.ok()) status = Errno("cannot close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = Errno("cannot rename to", path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable; failing to sync the directory is not worth an error.
  size_t last = path.rfind('/');
  std::string dir = last == std::string::npos ? "." : (last == 0 ? "/" : path.substr(0, last));
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

// Reads the whole file; nullopt (with errno ENOENT) when it does not exist.
StatusOr<std::optional<std::string>> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Errno("cannot open", path);
  }
  std::string text;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      Status status = Errno("cannot read", path);
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(text));
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
    std::string_view line = Trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      size_t close = line.find(']');
      if (close == std::string_view::npos) continue;  // not a section header: ignore
      sections.push_back({std::string(Trim(line.substr(1, close - 1))), {}});
      continue;
    }
    if (sections.empty()) continue;  // keys before any section belong to no profile
    // Python's configparser (used by the AWS CLI) accepts '=' or ':' and lowercases names.
    size_t sep = line.find_first_of("=:");
    if (sep == std::string_view::npos) continue;
    std::string name = ToLower(Trim(line.substr(0, sep)));
    std::string_view value = Trim(line.substr(sep + 1));
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
  HF_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFile(path));
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
  HF_RETURN_IF_ERROR(MakeParentDirs(path));
  HF_ASSIGN_OR_RETURN(AccessKey key, GenerateKey());
  HF_RETURN_IF_ERROR(WriteFileAtomically(path, FormatCredentials(key)));
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
