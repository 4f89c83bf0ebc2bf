#pragma once
// Reading the certificates the EKS control plane tests check (OpenSSL), shared by
// control_plane_files_test and control_plane_nodes_test.
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace hf::eks::test {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
/// A parsed certificate; null when the PEM was not one.
using Cert = std::unique_ptr<X509, X509Free>;

inline Cert ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  Cert cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

/// The subject's field `nid` (e.g. NID_commonName); "" when absent.
inline std::string Field(X509* cert, int nid) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), nid, buf, sizeof(buf));
  return buf;
}

}  // namespace hf::eks::test
