// The Node side of the control planes (src/eks/cp/control_plane_nodes.h): node names, kubectl's
// node lists, the merge patch of an update and what kubectl's failures mean (tables); the
// node credentials in a temporary directory, checked with OpenSSL.
#include "eks/cp/control_plane_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "eks/cp/control_plane_files.h"
#include "hyperfleet/common/fs.h"
#include "x509_helpers.h"

namespace hf::eks {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

TEST(ValidNodeNameTest, DnsSubdomainsOnly) {
  for (const std::string& name : std::vector<std::string>{"hyperpod-i-0123456789abcdef0", "a", "0", "a.b-c.d", std::string(253, 'a')}) {
    EXPECT_TRUE(ValidNodeName(name)) << name;
  }
  for (const std::string& name : std::vector<std::string>{"", "A", "Hyperpod-i-1", "-a", "a-", "a..b", ".a", "a.",
                                 "a_b", "a/b", "../x", "a b", std::string(254, 'a')}) {
    EXPECT_FALSE(ValidNodeName(name)) << name;
    EXPECT_TRUE(absl::IsInvalidArgument(CheckNodeName(name))) << name;
  }
}

// A Node as kubectl shows it, with `extra` merged in.
json NodeJson(const std::string& name, const json& extra = json::object()) {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"resourceVersion", "41"}}}};
  node.merge_patch(extra);
  return node;
}

std::string List(std::vector<json> items) {
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump();
}

json Ready(const std::string& status) {
  return {{"status",
           {{"conditions",
             {{{"type", "MemoryPressure"}, {"status", "False"}},
              {{"type", "Ready"}, {"status", status}, {"reason", "KubeletReady"}}}}}}};
}

TEST(ParseNodeListTest, ReadyConditionLabelsTaintsUnschedulable) {
  const std::string text = List({
      NodeJson("n-true", Ready("True")),
      NodeJson("n-false", Ready("False")),
      NodeJson("n-unknown", Ready("Unknown")),
      NodeJson("n-none",
               {{"status", {{"conditions", {{{"type", "MemoryPressure"}, {"status", "True"}}}}}}}),
      NodeJson("a-labelled",
               {{"metadata", {{"labels", {{"kubernetes.io/hostname", "a"}, {"x", ""}}},
                              {"annotations", {{"hyperfleet/node-health-status", "Schedulable"}}}}},
                {"spec",
                 {{"unschedulable", true},
                  {"taints",
                   {{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}},
                    {{"key", "node.kubernetes.io/unreachable"},
                     {"effect", "NoExecute"},
                     {"timeAdded", "2024-01-01T00:00:00Z"}}}}}}}),
  });
  auto nodes = ParseNodeList(text);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 5u);
  // Sorted by name.
  EXPECT_EQ((*nodes)[0].name, "a-labelled");
  EXPECT_EQ((*nodes)[1].name, "n-false");
  EXPECT_EQ((*nodes)[4].name, "n-unknown");
  const KubeNode& a = (*nodes)[0];
  EXPECT_FALSE(a.ready);  // no conditions at all
  EXPECT_TRUE(a.unschedulable);
  EXPECT_EQ(a.labels, (std::map<std::string, std::string>{{"kubernetes.io/hostname", "a"},
                                                          {"x", ""}}));
  EXPECT_EQ(a.annotations, (std::map<std::string, std::string>{
                               {"hyperfleet/node-health-status", "Schedulable"}}));
  EXPECT_THAT(a.taints, ElementsAre(Taint{"k", "v", "NoSchedule"},
                                    Taint{"node.kubernetes.io/unreachable", "", "NoExecute"}));
  EXPECT_FALSE((*nodes)[1].ready);  // False
  EXPECT_FALSE((*nodes)[2].ready);  // Ready condition missing
  EXPECT_TRUE((*nodes)[3].ready);   // True
  EXPECT_FALSE((*nodes)[4].ready);  // Unknown
  EXPECT_FALSE((*nodes)[3].unschedulable);
  EXPECT_TRUE((*nodes)[3].labels.empty());
  EXPECT_TRUE((*nodes)[3].taints.empty());
}

TEST(ParseNodeListTest, PodCidrAndInternalIp) {
  auto nodes = ParseNodeList(List({
      NodeJson("a", {{"spec", {{"podCIDR", "10.200.1.0/24"}, {"podCIDRs", {"10.200.1.0/24"}}}},
                     {"status",
                      {{"addresses",
                        {{{"type", "Hostname"}, {"address", "ip-10-224-0-5"}},
                         {{"type", "InternalIP"}, {"address", "10.224.0.5"}},
                         {{"type", "InternalIP"}, {"address", "10.224.0.6"}}}}}}}),
      NodeJson("b", Ready("True")),  // no podCIDR yet, no addresses
  }));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].pod_cidr, "10.200.1.0/24");
  EXPECT_EQ((*nodes)[0].internal_ip, "10.224.0.5");  // the first InternalIP
  EXPECT_EQ((*nodes)[1].pod_cidr, "");
  EXPECT_EQ((*nodes)[1].internal_ip, "");
  for (const json& bad : {json{{"spec", {{"podCIDR", 7}}}},
                          json{{"status", {{"addresses", "10.0.0.1"}}}},
                          json{{"status", {{"addresses", {{{"type", "InternalIP"}}}}}}}}) {
    auto parsed = ParseNodeList(List({NodeJson("x", bad)}));
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << bad.dump() << parsed.status();
  }
}

TEST(KeepPodCidrsWithinTest, OnlyNormalisedRangesInsideTheClusterCidr) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"10.200.1.0/24", "10.200.1.0/24"},  // the controller-manager's kind
      {"10.200.0.0/16", "10.200.0.0/16"},  // the whole range: still inside
      {"", ""},
      {"10.201.1.0/24", ""},               // another cluster's range
      {"10.0.0.0/8", ""},                  // wider than the range
      {"0.0.0.0/0", ""},
      {"10.200.1.5/24", ""},               // not a network address
      {"10.200.1.0", ""},                  // no length
      {"10.200.1.0/33", ""},
      {"garbage", ""},
  };
  for (const auto& [given, kept] : table) {
    std::vector<KubeNode> nodes(1);
    nodes[0].pod_cidr = given;
    KeepPodCidrsWithin(nodes, "10.200.0.0/16");
    EXPECT_EQ(nodes[0].pod_cidr, kept) << given;
  }
  std::vector<KubeNode> nodes(1);
  nodes[0].pod_cidr = "10.200.1.0/24";
  KeepPodCidrsWithin(nodes, "");  // no known range: nothing is routed
  EXPECT_EQ(nodes[0].pod_cidr, "");
}

TEST(ParseNodeListTest, EmptyListAndNodeList) {
  auto empty = ParseNodeList(R"({"apiVersion":"v1","items":[],"kind":"List","metadata":{}})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  auto node_list = ParseNodeList(
      json{{"kind", "NodeList"}, {"items", json::array({NodeJson("x", Ready("True"))})}}.dump());
  ASSERT_TRUE(node_list.ok()) << node_list.status();
  EXPECT_EQ(*node_list, (std::vector<KubeNode>{{"x", true, false, {}, {}}}));
}

TEST(ParseNodeListTest, GarbageIsAnError) {
  for (const std::string& text : std::vector<std::string>{
           std::string(""), std::string("not json"), std::string("[]"), std::string("{}"),
           std::string(R"({"items":{}})"), std::string(R"({"items":[1]})"),
           std::string(R"({"items":[{"metadata":{}}]})"),
           List({NodeJson("x", {{"metadata", {{"labels", {{"a", 1}}}}}})}),
           List({NodeJson("x", {{"metadata", {{"annotations", "a"}}}})}),
           List({NodeJson("x", {{"spec", {{"taints", {{{"key", "k"}}}}}}})}),
           List({NodeJson("x", {{"spec", {{"taints", "k"}}}})}),
           List({NodeJson("x", {{"status", {{"conditions", {{{"type", "Ready"}}}}}}})}),
       }) {
    auto nodes = ParseNodeList(text);
    EXPECT_TRUE(absl::IsInvalidArgument(nodes.status())) << text << ": " << nodes.status();
  }
}

TEST(NodePatchTest, LabelsSetAndRemoved) {
  NodeUpdate update;
  update.set_labels = {{"a", "1"}, {"b", ""}};
  update.remove_labels = {"gone"};
  auto patch = NodePatch(NodeJson("n"), update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ(*patch, json::parse(R"({"metadata":{"resourceVersion":"41",
                                     "labels":{"a":"1","b":"","gone":null}}})"));
}

// A label and the annotation beside it change in one patch (the health label and its marker).
TEST(NodePatchTest, AnnotationsSetWithTheLabels) {
  NodeUpdate update;
  update.set_labels = {{"a", "1"}};
  update.set_annotations = {{"hyperfleet/node-health-status", "1"}};
  auto patch = NodePatch(NodeJson("n"), update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ(*patch, json::parse(R"({"metadata":{"resourceVersion":"41","labels":{"a":"1"},
                                     "annotations":{"hyperfleet/node-health-status":"1"}}})"));
}

// The fault labels and their details annotation go in the same patch (null: removed).
TEST(NodePatchTest, AnnotationsRemoved) {
  NodeUpdate update;
  update.remove_labels = {"f/type"};
  update.remove_annotations = {"f/details"};
  auto patch = NodePatch(NodeJson("n"), update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ(*patch, json::parse(R"({"metadata":{"resourceVersion":"41","labels":{"f/type":null},
                                     "annotations":{"f/details":null}}})"));
  update = {};
  update.remove_annotations = {"f/details"};
  patch = NodePatch(NodeJson("n"), update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ(*patch, json::parse(R"({"metadata":{"resourceVersion":"41",
                                     "annotations":{"f/details":null}}})"));
}

TEST(NodePatchTest, TaintsReplacedByKeyAndEffectOthersKept) {
  const json node = NodeJson(
      "n", {{"spec",
             {{"taints",
               {{{"key", "k"}, {"value", "old"}, {"effect", "NoSchedule"}},
                {{"key", "k"}, {"effect", "NoExecute"}, {"timeAdded", "2024-01-01T00:00:00Z"}},
                {{"key", "drop"}, {"effect", "NoSchedule"}}}}}}});
  NodeUpdate update;
  update.set_taints = {{"k", "new", "NoSchedule"}, {"e", "", "PreferNoSchedule"}};
  update.remove_taints = {{"drop", "", "NoSchedule"}, {"absent", "", "NoExecute"}};
  auto patch = NodePatch(node, update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ((*patch)["spec"]["taints"], json::parse(R"([
      {"key":"k","effect":"NoExecute","timeAdded":"2024-01-01T00:00:00Z"},
      {"key":"k","value":"new","effect":"NoSchedule"},
      {"key":"e","effect":"PreferNoSchedule"}])"));
  EXPECT_FALSE((*patch)["metadata"].contains("labels"));
}

TEST(NodePatchTest, RemovingTheLastTaintSendsAnEmptyList) {
  const json node =
      NodeJson("n", {{"spec", {{"taints", {{{"key", "k"}, {"effect", "NoSchedule"}}}}}}});
  NodeUpdate update;
  update.remove_taints = {{"k", "ignored", "NoSchedule"}};
  auto patch = NodePatch(node, update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ((*patch)["spec"]["taints"], json::array());
  // A Node without taints, none removed: still an (empty) list, not an error.
  patch = NodePatch(NodeJson("n"), update);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ((*patch)["spec"]["taints"], json::array());
}

TEST(NodePatchTest, NeedsResourceVersion) {
  EXPECT_TRUE(absl::IsInvalidArgument(NodePatch(json("x"), {}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(NodePatch(json{{"metadata", {{"name", "n"}}}}, {}).status()));
}

TEST(KubectlFailureTest, ClassifiesOutput) {
  struct Case {
    std::string output;
    absl::StatusCode code;
  };
  for (const Case& c : std::vector<Case>{
           {"The connection to the server 127.0.0.1:26002 was refused - did you specify the "
            "right host or port?\n",
            absl::StatusCode::kUnavailable},
           {"Unable to connect to the server: dial tcp 10.0.0.1:26002: i/o timeout",
            absl::StatusCode::kUnavailable},
           {"Error from server (ServiceUnavailable): the server is currently unable",
            absl::StatusCode::kUnavailable},
           {"Error from server (NotFound): nodes \"x\" not found", absl::StatusCode::kNotFound},
           {"Error from server (Conflict): Operation cannot be fulfilled on nodes \"x\": the "
            "object has been modified",
            absl::StatusCode::kAborted},
           {"The Node \"x\" is invalid: spec.taints[0].effect: Unsupported value\n"
            "Error from server (Invalid)",
            absl::StatusCode::kInvalidArgument},
           {"Error from server (Forbidden): nodes \"y\" is forbidden",
            absl::StatusCode::kPermissionDenied},
           {"error: something else", absl::StatusCode::kInternal},
       }) {
    const Status st = KubectlFailure("kubectl x", c.output);
    EXPECT_EQ(st.code(), c.code) << c.output;
    EXPECT_THAT(st.message(), HasSubstr("kubectl x: "));
    EXPECT_THAT(std::string(st.message()), ::testing::Not(HasSubstr("\n")));
  }
}

// ---- node credentials (files, OpenSSL) ------------------------------------------------------

using test::Cert;
using test::Field;
using test::ParseCert;

// The client certificate and server of a kubeconfig.
std::pair<Cert, std::string> ClientOf(const std::string& kubeconfig) {
  const json config = json::parse(kubeconfig);
  std::string pem;
  EXPECT_TRUE(absl::Base64Unescape(
      config["users"][0]["user"]["client-certificate-data"].get<std::string>(), &pem));
  return {ParseCert(pem), config["clusters"][0]["cluster"]["server"].get<std::string>()};
}

unsigned Mode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
}

class NodeJoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/eks-nodes-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    plan_.spec = {"c1", "1.31", "10.100.0.0/16", ""};
    plan_.ports.apiserver = 26003;
    plan_.pod_cidr = "10.200.0.0/16";
    plan_.endpoint_host = "192.0.2.2";
    layout_ = ControlPlaneLayout{dir_ + "/c1"};
    auto names = ApiserverAltNames({"192.0.2.2"}, plan_.spec.service_cidr);
    ASSERT_TRUE(names.ok());
    ASSERT_TRUE(WriteControlPlaneFiles(layout_, plan_, *names).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  ControlPlanePlan plan_;
  ControlPlaneLayout layout_;
};

TEST_F(NodeJoinTest, NodeAndProxyIdentitiesMadeOnceKept) {
  auto join = LoadOrMakeNodeJoin(layout_, plan_, "hyperpod-i-1");
  ASSERT_TRUE(join.ok()) << join.status();
  EXPECT_EQ(join->ca_pem, *ReadFile(layout_.pki() + "/ca.crt"));
  EXPECT_EQ(join->cluster_cidr, "10.200.0.0/16");
  Cert ca = ParseCert(join->ca_pem);
  auto [kubelet, kubelet_server] = ClientOf(join->kubelet_kubeconfig);
  ASSERT_TRUE(kubelet && ca);
  EXPECT_EQ(kubelet_server, "https://192.0.2.2:26003");
  EXPECT_EQ(Field(kubelet.get(), NID_commonName), "system:node:hyperpod-i-1");
  EXPECT_EQ(Field(kubelet.get(), NID_organizationName), "system:nodes");
  EXPECT_EQ(X509_verify(kubelet.get(), X509_get0_pubkey(ca.get())), 1);
  auto [proxy, proxy_server] = ClientOf(join->kube_proxy_kubeconfig);
  ASSERT_TRUE(proxy);
  EXPECT_EQ(proxy_server, "https://192.0.2.2:26003");
  EXPECT_EQ(Field(proxy.get(), NID_commonName), "system:kube-proxy");
  EXPECT_EQ(X509_verify(proxy.get(), X509_get0_pubkey(ca.get())), 1);

  const std::string kubelet_path = layout_.node_dir("hyperpod-i-1") + "/kubelet.kubeconfig";
  EXPECT_EQ(*ReadFile(kubelet_path), join->kubelet_kubeconfig);
  EXPECT_EQ(Mode(kubelet_path), 0600u);
  EXPECT_EQ(Mode(layout_.node_dir("hyperpod-i-1")), 0700u);
  EXPECT_EQ(Mode(layout_.kube_proxy_kubeconfig()), 0600u);

  // Again: the same texts. Another node: its own kubelet identity, the same kube-proxy one.
  auto again = LoadOrMakeNodeJoin(layout_, plan_, "hyperpod-i-1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *join);
  auto other = LoadOrMakeNodeJoin(layout_, plan_, "hyperpod-i-2");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->kubelet_kubeconfig, join->kubelet_kubeconfig);
  EXPECT_EQ(other->kube_proxy_kubeconfig, join->kube_proxy_kubeconfig);
  EXPECT_EQ(Field(ClientOf(other->kubelet_kubeconfig).first.get(), NID_commonName),
            "system:node:hyperpod-i-2");
}

TEST_F(NodeJoinTest, BadNodeNameMakesNothing) {
  auto join = LoadOrMakeNodeJoin(layout_, plan_, "../etc");
  EXPECT_TRUE(absl::IsInvalidArgument(join.status())) << join.status();
  EXPECT_FALSE(std::filesystem::exists(layout_.dir + "/nodes"));
  EXPECT_FALSE(std::filesystem::exists(layout_.kube_proxy_kubeconfig()));
}

}  // namespace
}  // namespace hf::eks
