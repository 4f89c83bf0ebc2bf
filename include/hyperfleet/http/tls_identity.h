#pragma once
// A TLS server's own identity when no CA is involved: a self-signed certificate and its
// key, made once with OpenSSL and kept in a directory, which clients pin by fingerprint
// (the agent endpoint for machines: docs/nodes.md "The agent endpoint over TLS").
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::http {

/// A certificate and its private key, PEM, with the certificate's fingerprint.
struct TlsIdentity {
  std::string certificate_pem;
  std::string private_key_pem;  ///< PKCS#8; a secret
  std::string sha256;           ///< lowercase hex SHA-256 of the certificate's DER
};

/// `dir`/cert.pem and `dir`/key.pem: read when cert.pem exists (the key must match it), else
/// made now: an EC P-256 key (mode 0600, whatever the umask) and a self-signed certificate
/// (CN "hyperfleet agent endpoint", subjectAltName `address`: an IP address or a DNS name,
/// valid from a day ago for 20 years), key first, so a cert.pem is always complete. `dir` is
/// made owner-only (0700) when missing. The certificate is kept as it is whatever `address`
/// is later: clients pin its fingerprint, so a new one would cut every provisioned node off.
/// Errors: InvalidArgument for an empty address; FailedPrecondition naming the file when
/// cert.pem or key.pem is unreadable, not PEM, or the two do not match (remove both to make
/// a new identity); Internal for OpenSSL or file-system failures.
StatusOr<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir, std::string_view address);

/// Lowercase hex SHA-256 of the DER of the first certificate in `certificate_pem` (what
/// `openssl x509 -noout -fingerprint -sha256` prints, without colons). Errors:
/// InvalidArgument when it holds no certificate.
StatusOr<std::string> CertificateSha256(std::string_view certificate_pem);

/// What IssueCertificate puts in a certificate.
struct CertificateRequest {
  std::string common_name;                 ///< subject CN, e.g. "kube-apiserver" or a user
  std::vector<std::string> organizations;  ///< subject O entries (Kubernetes: the groups)
  /// subjectAltName entries: IP addresses or DNS names, as SubjectAltName takes them.
  std::vector<std::string> alt_names;
  bool ca = false;           ///< a CA (keyCertSign, CA:TRUE) rather than a leaf
  bool server_auth = false;  ///< extendedKeyUsage serverAuth (leaf)
  bool client_auth = false;  ///< extendedKeyUsage clientAuth (leaf)
  long valid_days = 20 * 365;
};

/// A new EC P-256 key and a certificate for it made from `request`, valid from a day ago;
/// signed by `issuer` (its certificate and key) or, when `issuer` is null, self-signed (a
/// root CA). `sha256` is set as in TlsIdentity. Errors: InvalidArgument for an empty common
/// name, an issuer whose PEM does not parse, or a leaf with neither usage; Internal for
/// OpenSSL failures.
StatusOr<TlsIdentity> IssueCertificate(const CertificateRequest& request,
                                       const TlsIdentity* issuer);

/// A new EC P-256 key pair as PEM: PKCS#8 private key and SubjectPublicKeyInfo public key
/// (e.g. the key Kubernetes signs service-account tokens with). Errors: Internal.
struct KeyPairPem {
  std::string private_key_pem;  ///< a secret
  std::string public_key_pem;
};
StatusOr<KeyPairPem> MakeEcKeyPair();

}  // namespace hf::http
