// http::IssueCertificate and MakeEcKeyPair (tls_identity.h): a CA, a leaf it signs, the
// subject and usages, and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "hyperfleet/http/tls_identity.h"

namespace hf::http {
namespace {

X509* Parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

TEST(IssueCertificateTest, CaSignsALeafWithItsNamesAndGroups) {
  CertificateRequest ca_request;
  ca_request.common_name = "test-ca";
  ca_request.ca = true;
  auto ca = IssueCertificate(ca_request, nullptr);
  ASSERT_TRUE(ca.ok()) << ca.status();
  CertificateRequest leaf_request;
  leaf_request.common_name = "alice";
  leaf_request.organizations = {"system:masters", "team"};
  leaf_request.alt_names = {"10.0.0.1", "example.test"};
  leaf_request.client_auth = true;
  leaf_request.server_auth = true;
  auto leaf = IssueCertificate(leaf_request, &*ca);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(*CertificateSha256(leaf->certificate_pem), leaf->sha256);

  X509* ca_cert = Parse(ca->certificate_pem);
  X509* cert = Parse(leaf->certificate_pem);
  ASSERT_TRUE(ca_cert && cert);
  EXPECT_EQ(X509_check_ca(ca_cert), 1);
  EXPECT_EQ(X509_check_ca(cert), 0);
  EXPECT_EQ(X509_verify(cert, X509_get0_pubkey(ca_cert)), 1);
  EXPECT_EQ(X509_check_issued(ca_cert, cert), X509_V_OK);
  EXPECT_EQ(X509_check_ip_asc(cert, "10.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_host(cert, "example.test", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0), 1);
  char org[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_organizationName, org, sizeof(org));
  EXPECT_STREQ(org, "system:masters");
  X509_free(ca_cert);
  X509_free(cert);
}

TEST(IssueCertificateTest, Refusals) {
  CertificateRequest request;
  request.client_auth = true;
  EXPECT_TRUE(absl::IsInvalidArgument(IssueCertificate(request, nullptr).status()));
  request.common_name = "x";
  request.client_auth = false;
  EXPECT_TRUE(absl::IsInvalidArgument(IssueCertificate(request, nullptr).status()));
  request.client_auth = true;
  TlsIdentity bogus{"not pem", "not pem", ""};
  EXPECT_TRUE(absl::IsInvalidArgument(IssueCertificate(request, &bogus).status()));
}

TEST(MakeEcKeyPairTest, PrivateAndPublicPem) {
  auto pair = MakeEcKeyPair();
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_THAT(pair->private_key_pem, ::testing::HasSubstr("BEGIN PRIVATE KEY"));
  EXPECT_THAT(pair->public_key_pem, ::testing::HasSubstr("BEGIN PUBLIC KEY"));
  EXPECT_NE(MakeEcKeyPair()->public_key_pem, pair->public_key_pem);
}

}  // namespace
}  // namespace hf::http
