#pragma once
// A TLS server's own identity when no CA is involved: a self-signed certificate and its
// key, made once with OpenSSL and kept in a directory, which clients pin by fingerprint
// (the agent endpoint for machines: docs/nodes.md "The agent endpoint over TLS").
#include <string>
#include <string_view>

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

}  // namespace hf::http
