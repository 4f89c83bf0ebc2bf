#include "hyperfleet/agentapi/node_tokens.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/paths.h"

namespace hf::agentapi {
namespace {
constexpr size_t kSecretBytes = 32;

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}
}  // namespace

StatusOr<NodeTokens> NodeTokens::LoadOrCreate(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    std::string secret = ss.str();
    if (secret.size() != kSecretBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected a ", kSecretBytes, "-byte node secret, found ",
                       secret.size(), " bytes"));
    }
    return NodeTokens(std::move(secret));
  }
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    HF_RETURN_IF_ERROR(EnsureDirectory(path.substr(0, slash)));
  }
  std::string secret(kSecretBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()), kSecretBytes) != 1) {
    return absl::InternalError("RAND_bytes failed while making the node secret");
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat(tmp, ": ", std::strerror(errno)));
  bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return NodeTokens(std::move(secret));
}

std::string NodeTokens::tokenFor(std::string_view instance_id) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(instance_id.data()), instance_id.size(), mac, &len);
  return Hex(mac, len);
}

bool NodeTokens::verify(std::string_view instance_id, std::string_view token) const {
  const std::string expected = tokenFor(instance_id);
  return token.size() == expected.size() &&
         CRYPTO_memcmp(token.data(), expected.data(), expected.size()) == 0;
}

}  // namespace hf::agentapi
