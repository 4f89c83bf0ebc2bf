// TLS identities and certificates with OpenSSL's API (no `openssl` program is run).
#include "hyperfleet/http/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/common/fs.h"

namespace hf::http {
namespace {

constexpr long kValidDays = 20 * 365;
constexpr unsigned kKeyMode = 0600;

template <auto Free>
struct Deleter {
  template <class T>
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Ext = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BN_free>>;

Status OpenSslError(const std::string& what) {
  return absl::InternalError("OpenSSL: cannot " + what);
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

Cert ReadCertificate(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key ReadKey(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

std::string Fingerprint(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  X509_digest(cert, EVP_sha256(), md, &len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), static_cast<std::size_t>(len)));
}

// "IP:a.b.c.d" / "IP:::1" for an address, else "DNS:name"; brackets of "[v6]" dropped.
std::string SubjectAltName(std::string_view address) {
  std::string host(address.data(), address.size());
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned char buf[16];
  const bool ip = inet_pton(AF_INET, host.c_str(), buf) == 1 ||
                  inet_pton(AF_INET6, host.c_str(), buf) == 1;
  return absl::StrCat(ip ? "IP:" : "DNS:", host);
}

// Adds the extension `nid` = `value` (OpenSSL's config syntax) to `cert`.
Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  Ext ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!ext || !X509_add_ext(cert, ext.get(), -1)) {
    return OpenSslError(absl::StrCat("add certificate extension ", value));
  }
  return absl::OkStatus();
}

// The extensions of `request` as (nid, value) pairs; `issued`: signed by another CA.
std::vector<std::pair<int, std::string>> Extensions(const CertificateRequest& request,
                                                    bool issued) {
  std::vector<std::pair<int, std::string>> out;
  out.emplace_back(NID_subject_key_identifier, "hash");
  if (issued) out.emplace_back(NID_authority_key_identifier, "keyid");
  if (request.ca) {
    out.emplace_back(NID_basic_constraints, "critical,CA:TRUE");
    out.emplace_back(NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign");
  } else {
    out.emplace_back(NID_basic_constraints, "critical,CA:FALSE");
    out.emplace_back(NID_key_usage, "critical,digitalSignature");
    std::vector<std::string> usages;
    if (request.server_auth) usages.push_back("serverAuth");
    if (request.client_auth) usages.push_back("clientAuth");
    out.emplace_back(NID_ext_key_usage, absl::StrJoin(usages, ","));
  }
  if (!request.alt_names.empty()) {
    std::vector<std::string> sans;
    for (const std::string& name : request.alt_names) sans.push_back(SubjectAltName(name));
    out.emplace_back(NID_subject_alt_name, absl::StrJoin(sans, ","));
  }
  return out;
}

// The identity of `cert` and `key` as PEM.
StatusOr<TlsIdentity> ToIdentity(X509* cert, EVP_PKEY* key) {
  TlsIdentity identity;
  Bio key_bio(BIO_new(BIO_s_mem())), cert_bio(BIO_new(BIO_s_mem()));
  if (!key_bio || !cert_bio ||
      !PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) ||
      !PEM_write_bio_X509(cert_bio.get(), cert)) {
    return OpenSslError("write PEM");
  }
  identity.private_key_pem = BioText(key_bio.get());
  identity.certificate_pem = BioText(cert_bio.get());
  identity.sha256 = Fingerprint(cert);
  return identity;
}

// A new EC P-256 key and a self-signed certificate for `address`, as PEM.
StatusOr<TlsIdentity> MakeIdentity(std::string_view address) {
  CertificateRequest request;
  request.common_name = "hyperfleet agent endpoint";
  request.alt_names = {std::string(address)};
  request.server_auth = true;
  request.valid_days = kValidDays;
  return IssueCertificate(request, nullptr);
}

// The stored identity; FailedPrecondition naming the file when it is unusable.
StatusOr<TlsIdentity> LoadIdentity(const std::string& cert_path, const std::string& key_path,
                                   std::string certificate_pem) {
  const std::string remedy = " (remove cert.pem and key.pem to make a new identity)";
  Cert cert = ReadCertificate(certificate_pem);
  if (!cert) {
    return absl::FailedPreconditionError(
        absl::StrCat(cert_path, " holds no PEM certificate", remedy));
  }
  auto key_pem = ReadFile(key_path);
  if (!key_pem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", key_path, ": ", key_pem.status().message(), remedy));
  }
  Key key = ReadKey(*key_pem);
  if (!key) {
    return absl::FailedPreconditionError(
        absl::StrCat(key_path, " holds no PEM private key", remedy));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(key_path, " is not the key of ", cert_path, remedy));
  }
  // Owner-only even if someone loosened it since.
  struct stat st {};
  if (::stat(key_path.c_str(), &st) == 0 && (st.st_mode & 0777) != kKeyMode &&
      ::chmod(key_path.c_str(), kKeyMode) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot make ", key_path, " owner-only: ", std::strerror(errno)));
  }
  TlsIdentity identity;
  identity.sha256 = Fingerprint(cert.get());
  identity.certificate_pem = std::move(certificate_pem);
  identity.private_key_pem = *std::move(key_pem);
  return identity;
}

}  // namespace

StatusOr<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir, std::string_view address) {
  if (address.empty()) {
    return absl::InvalidArgumentError("TLS identity: the address for subjectAltName is empty");
  }
  const std::string cert_path = dir + "/cert.pem";
  const std::string key_path = dir + "/key.pem";
  auto existing = ReadFile(cert_path);
  if (existing.ok()) return LoadIdentity(cert_path, key_path, *std::move(existing));
  if (!absl::IsNotFound(existing.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", cert_path, ": ", existing.status().message()));
  }
  HF_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  HF_ASSIGN_OR_RETURN(TlsIdentity identity, MakeIdentity(address));
  // The key before the certificate: a cert.pem on disk always has its key beside it.
  HF_RETURN_IF_ERROR(WriteFileAtomically(key_path, identity.private_key_pem, kKeyMode));
  HF_RETURN_IF_ERROR(WriteFileAtomically(cert_path, identity.certificate_pem, 0644));
  return identity;
}

StatusOr<TlsIdentity> IssueCertificate(const CertificateRequest& request,
                                       const TlsIdentity* issuer) {
  if (request.common_name.empty()) {
    return absl::InvalidArgumentError("certificate: the common name is empty");
  }
  if (!request.ca && !request.server_auth && !request.client_auth) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate ", request.common_name, ": neither server nor client use"));
  }
  Cert issuer_cert;
  Key issuer_key;
  if (issuer != nullptr) {
    issuer_cert = ReadCertificate(issuer->certificate_pem);
    issuer_key = ReadKey(issuer->private_key_pem);
    if (!issuer_cert || !issuer_key) {
      return absl::InvalidArgumentError("certificate: the issuer's PEM does not parse");
    }
  }
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generate an EC P-256 key");
  Cert cert(X509_new());
  if (!cert) return OpenSslError("allocate a certificate");
  X509_set_version(cert.get(), 2);  // v3: extensions
  Bignum serial(BN_new());
  if (!serial || !BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()))) {
    return OpenSslError("make a certificate serial number");
  }
  // From a day ago: a machine whose clock is a little behind still takes it.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -24L * 3600);
  X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(request.valid_days), 0,
                   nullptr);
  X509_NAME* name = X509_get_subject_name(cert.get());
  auto add_entry = [name](const char* field, const std::string& value) {
    X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  };
  for (const std::string& org : request.organizations) add_entry("O", org);
  add_entry("CN", request.common_name);
  X509_set_issuer_name(cert.get(), issuer_cert ? X509_get_subject_name(issuer_cert.get()) : name);
  X509_set_pubkey(cert.get(), key.get());
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : cert.get(), cert.get(), nullptr,
                 nullptr, 0);
  for (const auto& [nid, value] : Extensions(request, issuer_cert != nullptr)) {
    HF_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, nid, value));
  }
  EVP_PKEY* signer = issuer_key ? issuer_key.get() : key.get();
  if (!X509_sign(cert.get(), signer, EVP_sha256())) return OpenSslError("sign the certificate");
  return ToIdentity(cert.get(), key.get());
}

StatusOr<KeyPairPem> MakeEcKeyPair() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generate an EC P-256 key");
  Bio priv(BIO_new(BIO_s_mem())), pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub ||
      !PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) ||
      !PEM_write_bio_PUBKEY(pub.get(), key.get())) {
    return OpenSslError("write PEM");
  }
  return KeyPairPem{BioText(priv.get()), BioText(pub.get())};
}

StatusOr<std::string> CertificateSha256(std::string_view certificate_pem) {
  Cert cert = ReadCertificate(certificate_pem);
  if (!cert) return absl::InvalidArgumentError("no PEM certificate");
  return Fingerprint(cert.get());
}

}  // namespace hf::http
