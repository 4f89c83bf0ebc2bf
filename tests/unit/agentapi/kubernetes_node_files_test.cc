// An EKS-orchestrated cluster's nodes (agentapi/kubernetes_node_files.h): their kubelet's and
// kube-proxy's files and labels as tables, the hold while the control plane cannot take them,
// and the agent service handing both out over real SQLite (in memory) with a fake
// eks::ControlPlanes.
#include "hyperfleet/agentapi/kubernetes_node_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <tuple>

#include "fakes/fake_clock.h"
#include "hyperfleet/agentapi/agent_service.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace ls = model::lifecycle_state;

constexpr char kEksArn[] = "arn:aws:eks:us-west-2:123456789012:cluster/eks-demo";

model::Cluster EksCluster() {
  model::Cluster c;
  c.id = "abcdefabcdef";
  c.name = "ml-cluster";
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
  c.spec = {{"Orchestrator", {{"Eks", {{"ClusterArn", kEksArn}}}}}};
  for (const char* name : {"workers", "gpu-deep"}) {
    model::InstanceGroup g;
    g.name = name;
    g.instance_type = "ml.c5.xlarge";
    g.target_count = 1;
    g.spec = {{"InstanceGroupName", name}, {"InstanceCount", 1}};
    if (g.name == "gpu-deep") {
      g.instance_type = "ml.g5.8xlarge";
      g.spec["OnStartDeepHealthChecks"] = {"InstanceStress", "InstanceConnectivity"};
    }
    c.groups.push_back(g);
  }
  return c;
}

model::Node EksNode(const std::string& group = "workers", const std::string& id = "i-0123456789abcdef0") {
  model::Node n;
  n.cluster_id = "abcdefabcdef";
  n.instance_id = id;
  n.logical_id = group + "-x";
  n.group = group;
  n.instance_type = group == "workers" ? "ml.c5.xlarge" : "ml.g5.8xlarge";
  n.private_ip = "10.224.0.5";
  n.hostname = "ip-10-224-0-5";
  n.lifecycle = {{"SourceS3Uri", "s3://my-bucket/lcs"}, {"OnCreate", "on_create.sh"}};
  return n;
}

eks::NodeJoin Join() {
  return {"CA-PEM\n", "KUBELET-KUBECONFIG\n", "PROXY-KUBECONFIG\n", "10.200.0.0/16"};
}

// The quoted flags of an env file's one line NAME="...".
std::vector<std::string> Flags(const std::string& line, const std::string& name) {
  EXPECT_TRUE(line.starts_with(name + "=\"")) << line;
  EXPECT_TRUE(line.ends_with("\"\n")) << line;
  if (!line.starts_with(name + "=\"") || !line.ends_with("\"\n")) return {};
  const std::string inner = line.substr(name.size() + 2, line.size() - name.size() - 4);
  std::vector<std::string> out;
  std::stringstream words(inner);
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

bool ValidLabelValue(const std::string& v) {
  static const std::regex kValue("([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?");
  return v.size() <= 63 && std::regex_match(v, kValue);
}

TEST(KubernetesNodeFilesTest, KubeletAndKubeProxyGetTheirCredentialsAndFlags) {
  const auto files = KubernetesNodeFiles(EksCluster(), EksNode(), Join());
  ASSERT_EQ(files.size(), 5u);
  const std::vector<std::tuple<std::string, uint32_t, std::string>> expected = {
      {"/var/lib/kubelet/kubeconfig", 0600, "KUBELET-KUBECONFIG\n"},
      {"/etc/kubernetes/pki/ca.crt", 0644, "CA-PEM\n"},
      {"/var/lib/kube-proxy/kubeconfig", 0600, "PROXY-KUBECONFIG\n"},
      {"/etc/hyperfleet/kubelet.env", 0644, ""},
      {"/etc/hyperfleet/kube-proxy.env", 0644, ""},
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [path, mode, content] = expected[i];
    EXPECT_EQ(files[i].path, path);
    EXPECT_EQ(files[i].mode, mode) << path;
    if (!content.empty()) EXPECT_EQ(files[i].content, content) << path;
  }
  EXPECT_EQ(Flags(files[3].content, "KUBELET_ARGS"),
            (std::vector<std::string>{
                "--kubeconfig=/var/lib/kubelet/kubeconfig",
                "--client-ca-file=/etc/kubernetes/pki/ca.crt",
                "--anonymous-auth=false",
                "--authorization-mode=Webhook",
                "--hostname-override=hyperpod-i-0123456789abcdef0",
                "--node-ip=10.224.0.5",
                "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
                "--cgroup-driver=cgroupfs",
                "--fail-swap-on=false",
                "--node-status-update-frequency=2s",
                "--node-labels=node.kubernetes.io/instance-type=ml.c5.xlarge,"
                "sagemaker.amazonaws.com/cluster-name=ml-cluster,"
                "sagemaker.amazonaws.com/compute-type=hyperpod,"
                "sagemaker.amazonaws.com/instance-group-name=workers,"
                "sagemaker.amazonaws.com/node-health-status=Schedulable",
            }));
  EXPECT_EQ(Flags(files[4].content, "KUBE_PROXY_ARGS"),
            (std::vector<std::string>{
                "--kubeconfig=/var/lib/kube-proxy/kubeconfig",
                "--hostname-override=hyperpod-i-0123456789abcdef0",
                "--cluster-cidr=10.200.0.0/16",
                "--proxy-mode=iptables",
                "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
            }));
  // Version-neutral: the image's wrapper adds --container-runtime=remote where it exists.
  EXPECT_EQ(files[3].content.find("--container-runtime=remote"), std::string::npos);
}

// With a local registry the node learns its port (containerd maps localhost:PORT to it).
TEST(KubernetesNodeFilesTest, RegistryPortGoesToRegistryEnv) {
  const auto files = KubernetesNodeFiles(EksCluster(), EksNode(), Join(), 5123);
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files[5].path, "/etc/hyperfleet/registry.env");
  EXPECT_EQ(files[5].mode, 0644u);
  EXPECT_EQ(files[5].content, "HYPERFLEET_REGISTRY_PORT=5123\n");
}

// Deep health checks are not run yet: such a node joins Unschedulable, tainted, InProgress.
TEST(KubernetesNodeFilesTest, LabelsAndTaintFollowOnStartDeepHealthChecks) {
  struct Case {
    std::string group;
    std::string health;
    bool deep;
  };
  for (const Case& c : {Case{"workers", "Schedulable", false},
                        Case{"gpu-deep", "Unschedulable", true}}) {
    SCOPED_TRACE(c.group);
    const model::Cluster cluster = EksCluster();
    const model::Node node = EksNode(c.group);
    EXPECT_EQ(HasOnStartDeepHealthChecks(cluster, node), c.deep);
    std::map<std::string, std::string> want = {
        {"sagemaker.amazonaws.com/node-health-status", c.health},
        {"sagemaker.amazonaws.com/instance-group-name", c.group},
        {"node.kubernetes.io/instance-type", node.instance_type},
        {"sagemaker.amazonaws.com/cluster-name", "ml-cluster"},
        {"sagemaker.amazonaws.com/compute-type", "hyperpod"},
    };
    if (c.deep) want["sagemaker.amazonaws.com/deep-health-check-status"] = "InProgress";
    const auto labels = KubernetesNodeLabels(cluster, node);
    EXPECT_EQ(labels, want);
    for (const auto& [key, value] : labels) EXPECT_TRUE(ValidLabelValue(value)) << key << "=" << value;
    const std::string env = KubernetesNodeFiles(cluster, node, Join())[3].content;
    const std::string taint =
        "--register-with-taints=sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule";
    EXPECT_EQ(env.find(taint) != std::string::npos, c.deep) << env;
  }
  // The longest names HyperPod allows (63 characters) are still label values.
  model::Cluster cluster = EksCluster();
  cluster.name = std::string(62, 'c') + "9";
  cluster.groups[0].name = "w-" + std::string(61, 'g');
  model::Node node = EksNode(cluster.groups[0].name);
  for (const auto& [key, value] : KubernetesNodeLabels(cluster, node)) {
    EXPECT_TRUE(ValidLabelValue(value)) << key << "=" << value;
  }
  EXPECT_FALSE(ValidLabelValue(std::string(64, 'a')));  // the check itself can fail
  EXPECT_FALSE(ValidLabelValue("-a"));
}

TEST(KubernetesNodeFilesTest, TheJoinDecidesBetweenHoldingAndStartingTheUnits) {
  const Status unavailable = absl::UnavailableError("the apiserver does not answer");
  LifecycleSpec run;
  run.run = true;
  run.on_create = "on_create.sh";
  LifecycleSpec none;  // results are final: a reboot runs nothing
  LifecycleSpec held;
  held.wait = true;
  held.wait_reason = "other";
  model::Cluster slurm = EksCluster();
  slurm.spec = json::object();
  model::Cluster failed = EksCluster();
  failed.status = model::cluster_status::kFailed;
  auto node = [](const char* state, bool shutting_down = false) {
    model::Node n = EksNode();
    n.lifecycle_state = state;
    if (shutting_down) n.status = model::instance_status::kShuttingDown;
    return n;
  };
  const std::vector<std::string> units = {"containerd.service", "kubelet.service",
                                          "kube-proxy.service"};
  struct Case {
    const char* what;
    model::Cluster cluster;
    model::Node node;
    LifecycleSpec plan;
    Status join;
    bool wait;
    bool with_units;
  };
  const std::vector<Case> cases = {
      {"joined, scripts to run", EksCluster(), node(ls::kNone), run, absl::OkStatus(), false, true},
      {"joined after a reboot", EksCluster(), node(ls::kSucceeded), none, absl::OkStatus(), false, true},
      {"not joined, scripts to run", EksCluster(), node(ls::kWaiting), run, unavailable, true, false},
      {"not joined after a reboot", EksCluster(), node(ls::kSucceeded), none, unavailable, true, false},
      {"no control plane", EksCluster(), node(ls::kNone), run, absl::NotFoundError("no eks-demo"),
       true, false},
      {"scripts failed", EksCluster(), node(ls::kFailed), none, absl::OkStatus(), false, false},
      {"scripts failed, not joined", EksCluster(), node(ls::kFailed), none, unavailable, false, false},
      {"interrupted run", EksCluster(), node(ls::kStarted), run, unavailable, false, false},
      {"shutting down", EksCluster(), node(ls::kNone, true), none, unavailable, false, false},
      {"failed cluster", failed, node(ls::kNone), none, unavailable, false, false},
      {"held for another reason", EksCluster(), node(ls::kNone), held, absl::OkStatus(), true, false},
      {"a Slurm cluster", slurm, node(ls::kNone), run, absl::OkStatus(), false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const KubernetesStart got = PlanKubernetesStart(c.cluster, c.node, c.plan, c.join, 250);
    EXPECT_EQ(got.lifecycle.wait, c.wait);
    EXPECT_EQ(got.start_units, c.with_units ? units : std::vector<std::string>{});
    if (c.wait && c.plan.wait) {
      EXPECT_EQ(got.lifecycle, c.plan);
    } else if (c.wait) {
      EXPECT_FALSE(got.lifecycle.run);
      EXPECT_EQ(got.lifecycle.retry_ms, 250);
      EXPECT_NE(got.lifecycle.wait_reason.find("EKS cluster eks-demo"), std::string::npos)
          << got.lifecycle.wait_reason;
      EXPECT_NE(got.lifecycle.wait_reason.find(std::string(c.join.message())), std::string::npos)
          << got.lifecycle.wait_reason;
    } else {
      EXPECT_EQ(got.lifecycle, c.plan);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The agent service with a fake eks::ControlPlanes.

class FakeControlPlanes : public eks::ControlPlanes {
 public:
  Status ensure(const eks::ControlPlaneSpec&) override { return absl::OkStatus(); }
  eks::ControlPlaneStatus status(std::string_view) override { return {}; }
  Status remove(std::string_view) override { return absl::OkStatus(); }
  std::vector<std::string> list() override { return {}; }
  StatusOr<eks::NodeJoin> nodeJoin(std::string_view name, std::string_view node) override {
    std::lock_guard lock(mu);
    calls.push_back(std::string(name) + "/" + std::string(node));
    return join;
  }
  StatusOr<std::vector<eks::KubeNode>> nodes(std::string_view) override {
    return std::vector<eks::KubeNode>{};
  }
  Status updateNode(std::string_view, std::string_view, const eks::NodeUpdate&) override {
    return absl::OkStatus();
  }
  Status removeNode(std::string_view, std::string_view) override { return absl::OkStatus(); }

  std::mutex mu;
  StatusOr<eks::NodeJoin> join = absl::UnavailableError("the apiserver is starting");
  std::vector<std::string> calls;
};

class EksNodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hf-eks-nodes-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "s3/my-bucket/lcs");
    std::ofstream(root_ / "s3/my-bucket/lcs/on_create.sh") << "#!/bin/bash\necho hi\n";
    store_ = std::move(store::OpenSqliteStore(":memory:").value());
    bundles_ = std::make_unique<bundle::LocalBucketSource>(root_ / "s3");
    model::Cluster c = EksCluster();
    c.creation_time = clock_.now();
    model::Cluster slurm = EksCluster();
    slurm.id = "slurmslurm12";
    slurm.name = "slurm-cluster";
    slurm.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/slurmslurm12";
    slurm.spec = json::object();
    store::WriteBatch b;
    b.clusters.push_back({c, store::kMustNotExist, false});
    b.clusters.push_back({slurm, store::kMustNotExist, false});
    b.nodes.push_back({EksNode(), store::kMustNotExist, false});
    model::Node other = EksNode("workers", "i-00000000000000009");
    other.cluster_id = slurm.id;
    b.nodes.push_back({other, store::kMustNotExist, false});
    auto committed = store_->commit(b);
    ASSERT_TRUE(committed.ok()) << committed.status();
    StartService(&planes_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void StartService(eks::ControlPlanes* planes) {
    service_.reset();
    cache_ = std::make_unique<NodeStatusCache>(clock_, kDefaultHeartbeatSeconds);
    AgentService::Options options;
    options.control_planes = planes;
    service_ = std::make_unique<AgentService>(
        *store_, *bundles_, tokens_, *cache_,
        [this](const std::string&, const std::string&, const std::vector<LogLine>& lines) {
          for (const auto& l : lines) logged_.push_back(l.message);
        },
        [](const std::string&) {}, clock_, ids_, options);
  }

  RegisterResponse Post(const std::string& path, const json& body,
                        const std::string& id = "i-0123456789abcdef0") {
    http::HttpRequest r;
    r.method = "POST";
    r.target = path;
    r.headers.emplace_back("Authorization", "HyperfleetNode " + id + ":" + tokens_.tokenFor(id));
    r.body = body.dump();
    http::HttpResponse out = service_->handle(std::move(r));
    EXPECT_EQ(out.status, 200) << out.body;
    auto parsed = Parse<RegisterResponse>(out.body);
    EXPECT_TRUE(parsed.ok()) << out.body;
    return parsed.ok() ? *parsed : RegisterResponse{};
  }
  RegisterResponse Register(const std::string& id = "i-0123456789abcdef0") {
    return Post(kRegisterPath, {{"boot_id", "b"}}, id);
  }
  std::optional<std::vector<NodeFile>> HeartbeatFiles(int64_t revision) {
    http::HttpRequest r;
    r.method = "POST";
    r.target = kHeartbeatPath;
    const std::string id = "i-0123456789abcdef0";
    r.headers.emplace_back("Authorization", "HyperfleetNode " + id + ":" + tokens_.tokenFor(id));
    r.body = json{{"files_revision", revision}}.dump();
    auto parsed = Parse<HeartbeatResponse>(service_->handle(std::move(r)).body);
    EXPECT_TRUE(parsed.ok());
    return parsed.ok() ? parsed->files : std::nullopt;
  }
  int Calls() {
    std::lock_guard lock(planes_.mu);
    return static_cast<int>(planes_.calls.size());
  }

  fs::path root_;
  testing::FakeClock clock_;
  SequentialIdSource ids_{1};
  NodeTokens tokens_{std::string(32, 'k')};
  FakeControlPlanes planes_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<bundle::BundleSource> bundles_;
  std::unique_ptr<NodeStatusCache> cache_;
  std::unique_ptr<AgentService> service_;
  std::vector<std::string> logged_;
};

bool HasFile(const std::vector<NodeFile>& files, const std::string& path) {
  return std::any_of(files.begin(), files.end(), [&](const NodeFile& f) { return f.path == path; });
}

TEST_F(EksNodeServiceTest, ScriptsWaitForTheJoinThenTheNodeGetsItsFilesAndUnits) {
  RegisterResponse held = Register();
  EXPECT_TRUE(held.lifecycle.wait);
  EXPECT_FALSE(held.lifecycle.run);
  EXPECT_EQ(held.lifecycle.retry_ms, kDefaultLifecycleRetryMs);
  EXPECT_NE(held.lifecycle.wait_reason.find("EKS cluster eks-demo"), std::string::npos);
  EXPECT_NE(held.lifecycle.wait_reason.find("the apiserver is starting"), std::string::npos);
  EXPECT_TRUE(held.start_units.empty());
  EXPECT_FALSE(HasFile(held.files, kKubeletEnvPath));
  EXPECT_EQ(planes_.calls, (std::vector<std::string>{"eks-demo/hyperpod-i-0123456789abcdef0"}));
  EXPECT_NE(std::find_if(logged_.begin(), logged_.end(),
                         [](const std::string& l) {
                           return l.starts_with("[SageMaker] Waiting to run the lifecycle scripts: "
                                                "the Kubernetes control plane of EKS cluster eks-demo");
                         }),
            logged_.end());
  // Asked again at most once per retry interval, however often the node calls.
  Register();
  HeartbeatFiles(held.files_revision);
  EXPECT_EQ(Calls(), 1);

  {
    std::lock_guard lock(planes_.mu);
    planes_.join = Join();
  }
  clock_.advance(std::chrono::milliseconds(kDefaultLifecycleRetryMs));
  RegisterResponse go = Register();
  EXPECT_TRUE(go.lifecycle.run);
  EXPECT_FALSE(go.lifecycle.wait);
  EXPECT_EQ(go.start_units, (std::vector<std::string>{"containerd.service", "kubelet.service",
                                                      "kube-proxy.service"}));
  EXPECT_NE(go.files_revision, held.files_revision);
  const auto kube = KubernetesNodeFiles(EksCluster(), EksNode(), Join());
  for (const auto& f : kube) {
    EXPECT_NE(std::find(go.files.begin(), go.files.end(), f), go.files.end()) << f.path;
  }
  EXPECT_EQ(Calls(), 2);

  // Kept: heartbeats holding these files get none, and nodeJoin is not asked again.
  EXPECT_FALSE(HeartbeatFiles(go.files_revision).has_value());
  auto stale = HeartbeatFiles(held.files_revision);
  ASSERT_TRUE(stale.has_value());
  EXPECT_TRUE(HasFile(*stale, kKubeletKubeconfigPath));
  clock_.advance(std::chrono::minutes(5));
  EXPECT_EQ(Register().files_revision, go.files_revision);
  EXPECT_EQ(Calls(), 2);

  // A restarted control plane asks once more and hands out the same revision.
  StartService(&planes_);
  EXPECT_FALSE(HeartbeatFiles(go.files_revision).has_value());
  EXPECT_EQ(Calls(), 3);
}

TEST_F(EksNodeServiceTest, OtherClustersAndAServerWithoutControlPlanesAskNothing) {
  // A Slurm cluster's node: nothing asked, nothing added.
  RegisterResponse slurm = Register("i-00000000000000009");
  EXPECT_TRUE(slurm.lifecycle.run);
  EXPECT_TRUE(slurm.start_units.empty());
  EXPECT_FALSE(HasFile(slurm.files, kKubeletEnvPath));
  EXPECT_EQ(Calls(), 0);
  // Without control planes an EKS node is not held (there is nothing to wait for).
  StartService(nullptr);
  RegisterResponse eks = Register();
  EXPECT_TRUE(eks.lifecycle.run);
  EXPECT_TRUE(eks.start_units.empty());
  EXPECT_FALSE(HasFile(eks.files, kKubeletEnvPath));
  EXPECT_EQ(Calls(), 0);
}

}  // namespace
}  // namespace hf::agentapi
