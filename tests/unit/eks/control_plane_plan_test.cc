// The EKS control planes' plan (hyperfleet/eks/control_plane_plan.h), by hand-computed cases:
// ports, pod ranges, certificate names, and the flags each Kubernetes release gets.
#include "hyperfleet/eks/control_plane_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hf::eks {
namespace {
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(KubeVersionTest, ParsesVersionOutputAndGitVersions) {
  EXPECT_EQ(ParseKubeVersion("Kubernetes v1.20.2\n"), (KubeVersion{1, 20, 2}));
  EXPECT_EQ(ParseKubeVersion("v1.31.10-eks-1234"), (KubeVersion{1, 31, 10}));
  EXPECT_FALSE(ParseKubeVersion("Kubernetes"));
  EXPECT_FALSE(ParseKubeVersion("v1.20"));
  EXPECT_LT((KubeVersion{1, 23, 99}), kInsecureFlagsRemoved);
  EXPECT_FALSE((KubeVersion{1, 24, 0}) < kInsecureFlagsRemoved);
}

TEST(ChoosePortsTest, LowestFreeInMemberOrder) {
  auto ports = ChoosePorts({26000, 26002}, 26000, 26999);
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(*ports, (ControlPlanePorts{26001, 26003, 26004, 26005, 26006, 26007, 26008}));
  EXPECT_THAT(PortList(*ports), ElementsAre(26001, 26003, 26004, 26005, 26006, 26007, 26008));
}

TEST(ChoosePortsTest, TooFewIsResourceExhausted) {
  EXPECT_TRUE(ChoosePorts({}, 100, 106).ok());
  auto ports = ChoosePorts({103}, 100, 106);
  EXPECT_TRUE(absl::IsResourceExhausted(ports.status())) << ports.status();
}

TEST(ChoosePodCidrTest, SkipsUsedAndTheServiceRange) {
  EXPECT_EQ(*ChoosePodCidr({}, "10.100.0.0/16"), "10.200.0.0/16");
  EXPECT_EQ(*ChoosePodCidr({"10.200.0.0/16", "10.201.0.0/16"}, "172.20.0.0/16"),
            "10.202.0.0/16");
  // A service range inside 10.200/16 or covering it takes it too.
  EXPECT_EQ(*ChoosePodCidr({}, "10.200.128.0/20"), "10.201.0.0/16");
  EXPECT_EQ(*ChoosePodCidr({}, "10.192.0.0/12"), "10.208.0.0/16");
}

TEST(ChoosePodCidrTest, BadServiceCidrNamesTheField) {
  for (const char* bad : {"10.100.0.0", "10.100.0.0/33", "fd00::/64", "x/16", ""}) {
    auto cidr = ChoosePodCidr({}, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(cidr.status())) << bad;
    EXPECT_THAT(cidr.status().message(), HasSubstr("serviceCidr")) << bad;
  }
}

// The service range takes /1 to /30 with an explicit length; the exact message is the API's.
TEST(ChoosePodCidrTest, ServiceCidrBoundsAndMessage) {
  for (const char* bad : {"10.100.0.0/0", "10.100.0.0/31", "10.100.0.0/32", "10.100.0.0/",
                          "10.100.0.0/16/1", "10.100.0/16"}) {
    auto cidr = ChoosePodCidr({}, bad);
    EXPECT_EQ(cidr.status(), absl::InvalidArgumentError(absl::StrCat(
                                 "serviceCidr ", bad,
                                 " is not an IPv4 CIDR block with a prefix of /1 to /30")));
    EXPECT_EQ(FirstServiceIp(bad).status(), cidr.status()) << bad;
  }
  EXPECT_EQ(*ChoosePodCidr({}, "128.0.0.0/1"), "10.200.0.0/16");
  EXPECT_EQ(*ChoosePodCidr({}, "10.200.0.4/30"), "10.201.0.0/16");
  EXPECT_EQ(*FirstServiceIp("10.100.7.9/16"), "10.100.0.1");  // host bits cleared
}

// Used ranges that are not /1 to /30 blocks are ignored, as they always were.
TEST(ChoosePodCidrTest, UsedEntriesOutsideTheBoundsAreIgnored) {
  auto cidr = ChoosePodCidr(
      {"10.200.0.0/30", "junk", "10.201.0.0/32", "10.202.0.1", "0.0.0.0/0"}, "10.100.0.0/16");
  ASSERT_TRUE(cidr.ok()) << cidr.status();
  EXPECT_EQ(*cidr, "10.201.0.0/16");
}

TEST(ChoosePodCidrTest, AllTakenIsResourceExhausted) {
  std::vector<std::string> used = {"10.128.0.0/9"};  // 10.128-10.255
  EXPECT_TRUE(absl::IsResourceExhausted(ChoosePodCidr(used, "10.100.0.0/16").status()));
}

TEST(ApiserverAltNamesTest, LoopbackHostsServiceIpAndNames) {
  auto names = ApiserverAltNames({"192.0.2.2", "127.0.0.1", "10.224.4.1", "192.0.2.2"},
                                 "10.100.0.0/16");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("127.0.0.1", "192.0.2.2", "10.224.4.1", "10.100.0.1",
                                  "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                  "kubernetes.default.svc.cluster.local", "localhost"));
  EXPECT_EQ(*FirstServiceIp("172.20.0.0/16"), "172.20.0.1");
  EXPECT_TRUE(absl::IsInvalidArgument(ApiserverAltNames({}, "nope").status()));
}

TEST(ValidClusterNameTest, ModelCharactersOnly) {
  for (const char* good : {"a", "my-cluster_1", "0abc"}) EXPECT_TRUE(ValidClusterName(good));
  for (const char* bad : {"", "-a", "_a", "a/b", "..", "a.b", "a b"}) {
    EXPECT_FALSE(ValidClusterName(bad)) << bad;
  }
  EXPECT_TRUE(ValidClusterName(std::string(100, 'a')));
  EXPECT_FALSE(ValidClusterName(std::string(101, 'a')));
}

ControlPlanePlan SamplePlan() {
  ControlPlanePlan plan;
  plan.spec = {"c1", "1.31", "10.100.0.0/16", ""};
  plan.ports = {26001, 26002, 26003, 26004, 26005, 26006, 26007};
  plan.pod_cidr = "10.200.0.0/16";
  plan.endpoint_host = "192.0.2.2";
  plan.advertise_address = "192.0.2.2";
  return plan;
}

TEST(PlanJsonTest, RoundTripsAndNamesBadMembers) {
  ControlPlanePlan plan = SamplePlan();
  plan.spec.token_webhook_url = "http://127.0.0.1:8080/eks/v1/authenticate/c1";
  auto back = PlanFromJson(PlanToJson(plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ports, plan.ports);
  EXPECT_EQ(back->spec.token_webhook_url, plan.spec.token_webhook_url);
  EXPECT_EQ(back->pod_cidr, "10.200.0.0/16");
  nlohmann::json bad = PlanToJson(plan);
  bad["ports"]["scheduler"] = 70000;
  EXPECT_THAT(PlanFromJson(bad).status().message(), HasSubstr("ports.scheduler"));
  bad = PlanToJson(plan);
  bad.erase("pod_cidr");
  EXPECT_THAT(PlanFromJson(bad).status().message(), HasSubstr("pod_cidr"));
}

const Component& Find(const std::vector<Component>& components, const std::string& name) {
  auto it = std::find_if(components.begin(), components.end(),
                         [&](const Component& c) { return c.name == name; });
  EXPECT_NE(it, components.end()) << name;
  return *it;
}

TEST(ComponentCommandsTest, Release120GetsInsecurePortsOfItsOwn) {
  const Binaries bin{"/usr/bin/etcd", "/k/kube-apiserver", "/k/kube-controller-manager",
                     "/k/kube-scheduler", {1, 20, 2}};
  const auto components = ComponentCommands(SamplePlan(), {"/d/c1"}, bin);
  ASSERT_EQ(components.size(), 4u);
  EXPECT_EQ(components[0].name, "etcd");
  EXPECT_EQ(components[0].argv[0], "/usr/bin/etcd");
  EXPECT_EQ(components[1].name, "kube-apiserver");
  for (size_t i = 0; i < components.size(); ++i) {
    EXPECT_EQ(components[i].after_apiserver_ready, i >= 2) << components[i].name;
  }
  EXPECT_THAT(components[0].argv, Contains("--listen-client-urls=http://127.0.0.1:26001"));
  EXPECT_THAT(components[0].argv, Contains("--data-dir=/d/c1/etcd"));
  const auto& api = Find(components, "kube-apiserver").argv;
  EXPECT_THAT(api, Contains("--secure-port=26003"));
  EXPECT_THAT(api, Contains("--bind-address=0.0.0.0"));
  EXPECT_THAT(api, Contains("--insecure-port=0"));
  EXPECT_THAT(api, Contains("--etcd-servers=http://127.0.0.1:26001"));
  EXPECT_THAT(api, Contains("--service-cluster-ip-range=10.100.0.0/16"));
  EXPECT_THAT(api, Not(Contains(HasSubstr("token-webhook"))));
  // Node credentials act for their own Node only (authorizer and admission together).
  EXPECT_THAT(api, Contains("--authorization-mode=Node,RBAC"));
  EXPECT_THAT(api, Contains("--enable-admission-plugins=NodeRestriction"));
  EXPECT_THAT(api, Contains("--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname"));
  const auto& cm = Find(components, "kube-controller-manager").argv;
  EXPECT_THAT(cm, Contains("--secure-port=26004"));
  EXPECT_THAT(cm, Contains("--port=26005"));
  EXPECT_THAT(cm, Contains("--cluster-cidr=10.200.0.0/16"));
  EXPECT_THAT(cm, Contains("--allocate-node-cidrs=true"));
  EXPECT_THAT(cm, Contains("--node-cidr-mask-size=24"));
  EXPECT_THAT(cm, Contains("--use-service-account-credentials=true"));
  EXPECT_THAT(cm, Contains("--root-ca-file=/d/c1/pki/ca.crt"));
  const auto& sched = Find(components, "kube-scheduler").argv;
  EXPECT_THAT(sched, Contains("--secure-port=26006"));
  EXPECT_THAT(sched, Contains("--port=26007"));
}

TEST(ComponentCommandsTest, NewerReleasesGetNoInsecureFlags) {
  const Binaries bin{"etcd", "apiserver", "cm", "sched", {1, 31, 0}};
  for (const Component& c : ComponentCommands(SamplePlan(), {"/d/c1"}, bin)) {
    EXPECT_THAT(c.argv, Not(Contains(HasSubstr("--insecure-port")))) << c.name;
    EXPECT_THAT(c.argv, Not(Contains(HasSubstr("--port=")))) << c.name;
    EXPECT_THAT(c.argv, Not(Contains(HasSubstr("--address=")))) << c.name;
  }
}

TEST(ComponentCommandsTest, TokenWebhookWhenTheSpecNamesOne) {
  ControlPlanePlan plan = SamplePlan();
  plan.spec.token_webhook_url = "http://127.0.0.1:8080/eks/v1/authenticate/c1";
  const Binaries bin{"etcd", "apiserver", "cm", "sched", {1, 20, 2}};
  const auto components = ComponentCommands(plan, {"/d/c1"}, bin);
  const auto& api = Find(components, "kube-apiserver").argv;
  EXPECT_THAT(api, Contains("--authentication-token-webhook-config-file="
                            "/d/c1/token-webhook.kubeconfig"));
  EXPECT_THAT(api, Contains("--authentication-token-webhook-version=v1"));
  const auto config = nlohmann::json::parse(TokenWebhookKubeconfig(plan.spec.token_webhook_url));
  EXPECT_EQ(config["clusters"][0]["cluster"]["server"], plan.spec.token_webhook_url);
}

TEST(BootstrapObjectsTest, BindsEachPolicyGroupToItsClusterRole) {
  const nlohmann::json list = BootstrapObjects();
  ASSERT_EQ(list["items"].size(), 3u);
  std::map<std::string, std::string> role_of;
  for (const auto& item : list["items"]) {
    EXPECT_EQ(item["kind"], "ClusterRoleBinding");
    EXPECT_EQ(item["subjects"][0]["kind"], "Group");
    role_of[item["subjects"][0]["name"]] = item["roleRef"]["name"];
  }
  EXPECT_EQ(role_of[std::string(kAdminPolicyGroup)], "admin");
  EXPECT_EQ(role_of[std::string(kEditPolicyGroup)], "edit");
  EXPECT_EQ(role_of[std::string(kViewPolicyGroup)], "view");
}

}  // namespace
}  // namespace hf::eks
