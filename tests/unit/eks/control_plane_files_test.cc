// A control plane's files (src/eks/control_plane_files.h) in a temporary directory, checked
// with OpenSSL: the chain, the names, the groups, the modes; and components.json's codec.
#include "eks/cp/control_plane_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "hyperfleet/common/fs.h"
#include "x509_helpers.h"

namespace hf::eks {
namespace {
using ::testing::HasSubstr;

using test::Cert;
using test::Field;
using test::ParseCert;

bool SignedBy(X509* cert, X509* ca) {
  EVP_PKEY* key = X509_get0_pubkey(ca);
  return key != nullptr && X509_verify(cert, key) == 1;
}

unsigned Mode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
}

class ControlPlaneFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/eks-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ControlPlaneFilesTest, CertificatesChainNameAndGroup) {
  ControlPlanePlan plan;
  plan.spec = {"c1", "1.31", "10.100.0.0/16", "http://127.0.0.1:8080/eks/v1/authenticate/c1"};
  plan.ports.apiserver = 26003;
  const ControlPlaneLayout layout{dir_ + "/c1"};
  auto names = ApiserverAltNames({"192.0.2.2"}, plan.spec.service_cidr);
  ASSERT_TRUE(names.ok());
  ASSERT_TRUE(WriteControlPlaneFiles(layout, plan, *names).ok());

  Cert ca = ParseCert(*ReadFile(layout.pki() + "/ca.crt"));
  Cert api = ParseCert(*ReadFile(layout.pki() + "/apiserver.crt"));
  ASSERT_TRUE(ca && api);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_TRUE(SignedBy(api.get(), ca.get()));
  EXPECT_FALSE(SignedBy(ca.get(), api.get()));
  for (const char* ip : {"127.0.0.1", "192.0.2.2", "10.100.0.1"}) {
    EXPECT_EQ(X509_check_ip_asc(api.get(), ip, 0), 1) << ip;
  }
  EXPECT_EQ(X509_check_ip_asc(api.get(), "192.0.2.3", 0), 0);
  EXPECT_EQ(X509_check_host(api.get(), "kubernetes.default.svc", 0, 0, nullptr), 1);
  EXPECT_EQ(Mode(layout.pki() + "/apiserver.key"), 0600u);
  EXPECT_EQ(Mode(layout.pki() + "/sa.key"), 0600u);
  EXPECT_EQ(Mode(layout.pki()), 0700u);
  EXPECT_THAT(*ReadFile(layout.pki() + "/sa.pub"), HasSubstr("BEGIN PUBLIC KEY"));

  // The admin kubeconfig: our server, our CA, a client certificate in system:masters.
  EXPECT_EQ(Mode(layout.admin_kubeconfig()), 0600u);
  const auto config = nlohmann::json::parse(*ReadFile(layout.admin_kubeconfig()));
  EXPECT_EQ(config["clusters"][0]["cluster"]["server"], "https://127.0.0.1:26003");
  std::string client_pem;
  ASSERT_TRUE(absl::Base64Unescape(
      config["users"][0]["user"]["client-certificate-data"].get<std::string>(), &client_pem));
  Cert admin = ParseCert(client_pem);
  ASSERT_TRUE(admin);
  EXPECT_TRUE(SignedBy(admin.get(), ca.get()));
  EXPECT_EQ(Field(admin.get(), NID_organizationName), "system:masters");
  const auto cm = nlohmann::json::parse(*ReadFile(layout.controller_manager_kubeconfig()));
  std::string cm_pem;
  ASSERT_TRUE(absl::Base64Unescape(
      cm["users"][0]["user"]["client-certificate-data"].get<std::string>(), &cm_pem));
  EXPECT_EQ(Field(ParseCert(cm_pem).get(), NID_commonName), "system:kube-controller-manager");

  // The webhook's kubeconfig follows the spec: written, then removed when it names none.
  EXPECT_THAT(*ReadFile(layout.token_webhook_kubeconfig()), HasSubstr("authenticate/c1"));
  plan.spec.token_webhook_url.clear();
  ASSERT_TRUE(WriteTokenWebhookKubeconfig(layout, plan).ok());
  EXPECT_TRUE(absl::IsNotFound(ReadFile(layout.token_webhook_kubeconfig()).status()));
}

TEST(SupervisorConfigTest, RoundTripsAndRefusesMalformed) {
  SupervisorConfig config;
  config.components = {{"etcd", {"/usr/bin/etcd", "--name=default"}}};
  config.apiserver_port = 26003;
  config.kubectl = "/k/kubectl";
  config.admin_kubeconfig = "/d/admin.kubeconfig";
  auto back = SupervisorConfigFromJson(SupervisorConfigToJson(config));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->components[0].argv, config.components[0].argv);
  EXPECT_EQ(back->apiserver_port, 26003);
  nlohmann::json bad = SupervisorConfigToJson(config);
  bad["components"][0]["argv"] = nlohmann::json::array();
  EXPECT_TRUE(absl::IsInvalidArgument(SupervisorConfigFromJson(bad).status()));
  bad = SupervisorConfigToJson(config);
  bad.erase("kubectl");
  EXPECT_THAT(SupervisorConfigFromJson(bad).status().message(), HasSubstr("kubectl"));
}

}  // namespace
}  // namespace hf::eks
