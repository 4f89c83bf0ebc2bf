#include "hyperfleet/agentapi/node_tokens.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/random.h"
#include "hyperfleet/common/strings.h"

namespace hf::agentapi {
namespace {
constexpr size_t kSecretBytes = 32;
}  // namespace

StatusOr<NodeTokens> NodeTokens::LoadOrCreate(const std::string& path) {
  StatusOr<std::string> existing = ReadFile(path);
  if (existing.ok()) {
    if (existing->size() != kSecretBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected a ", kSecretBytes, "-byte node secret, found ",
                       existing->size(), " bytes"));
    }
    return NodeTokens(*std::move(existing));
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    HF_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash), 0700));
  }
  std::string secret = RandomBytes(kSecretBytes);
  HF_RETURN_IF_ERROR(WriteFileAtomically(path, secret, 0600));
  return NodeTokens(std::move(secret));
}

std::string NodeTokens::tokenFor(std::string_view instance_id) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(instance_id.data()), instance_id.size(), mac, &len);
  return absl::BytesToHexString(
      AbslView(std::string_view(reinterpret_cast<const char*>(mac), len)));
}

bool NodeTokens::verify(std::string_view instance_id, std::string_view token) const {
  const std::string expected = tokenFor(instance_id);
  return token.size() == expected.size() &&
         CRYPTO_memcmp(token.data(), expected.data(), expected.size()) == 0;
}

}  // namespace hf::agentapi
