// EKS nodes on the local provider: what systemd-nspawn gives an EKS node and a Slurm node
// (pure), the instance spec's image variant in provider records (pure), and (root, with
// $HF_TEST_EKS_NODE_IMAGE naming a built EKS image; tests/e2e/it_eks_node.py builds one and
// runs this) one EKS node booted by the provider: containerd started by hand runs the shipped
// pause image, the kubelet runs, the host's sysctls stay as they were.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/nspawn_argv.h"
#include "provider/local/sys.h"
#include "unit/provider/local_node_fixture.h"

namespace hf::provider {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json NodeJson(std::string_view variant) {
  nlohmann::json node = {{"hostname", "ip-10-224-0-5"},
                         {"merged", "/d/nodes/i-1/merged"},
                         {"netns", "hf-f-i-1"},
                         {"fsx", "/d/clusters/c/fsx"},
                         {"binary", "/usr/bin/hyperfleet"},
                         {"spank_plugin", ""},
                         {"binds", nlohmann::json::array()}};
  if (!variant.empty()) node["image_variant"] = std::string(variant);
  node["containerd_dir"] = "/d/nodes/i-1/containerd";
  return node;
}

const std::vector<std::string> kEksOnly = {
    "--capability=all", "--system-call-filter=@keyring bpf", "--bind-ro=/dev/kmsg",
    "--bind=/d/nodes/i-1/containerd:/var/lib/containerd"};

TEST(NspawnArgv, SlurmNodeGetsNoneOfTheKubeletsNeeds) {
  for (std::string_view variant : {"slurm", "", "unknown"}) {
    const std::vector<std::string> argv = local::NspawnArgv(NodeJson(variant));
    const std::vector<std::string> start = {"systemd-nspawn", "--boot", "--register=no",
                                            "--keep-unit", "--quiet", "-D",
                                            "/d/nodes/i-1/merged"};
    ASSERT_GE(argv.size(), start.size());
    EXPECT_TRUE(std::equal(start.begin(), start.end(), argv.begin())) << variant;
    EXPECT_THAT(argv, Contains("--network-namespace-path=/run/netns/hf-f-i-1"));
    EXPECT_THAT(argv, Contains("--bind=/d/clusters/c/fsx:/fsx"));
    for (const std::string& arg : kEksOnly) EXPECT_THAT(argv, Not(Contains(arg))) << variant;
    for (const std::string& arg : argv) {
      EXPECT_THAT(arg, Not(HasSubstr("capability"))) << variant;
      EXPECT_THAT(arg, Not(HasSubstr("system-call-filter"))) << variant;
    }
  }
}

TEST(NspawnArgv, EksNodeGetsWhatTheKubeletNeedsAndTheSlurmNodesArguments) {
  const std::vector<std::string> slurm = local::NspawnArgv(NodeJson("slurm"));
  const std::vector<std::string> eks = local::NspawnArgv(NodeJson("eks"));
  std::vector<std::string> expected = slurm;
  expected.insert(expected.end(), kEksOnly.begin(), kEksOnly.end());
  EXPECT_EQ(eks, expected);
}

TEST(InstanceSpecCodec, KeepsTheImageVariant) {
  InstanceSpec spec;
  spec.instance_id = "i-0123456789abcdef0";
  spec.cluster_id = "c1";
  spec.group = "workers";
  spec.image_variant = NodeImageVariant::kEks;
  nlohmann::json record = {{"private_ip", "10.0.0.1"}};
  WriteInstanceSpec(spec, record);
  EXPECT_EQ(record["image_variant"], "eks");
  EXPECT_EQ(record["private_ip"], "10.0.0.1");  // other members of the record stay
  const InstanceSpec back = ReadInstanceSpec(record);
  EXPECT_EQ(back.image_variant, NodeImageVariant::kEks);
  EXPECT_EQ(back.instance_id, spec.instance_id);
  EXPECT_EQ(back.group, "workers");
  spec.image_variant = NodeImageVariant::kSlurm;
  WriteInstanceSpec(spec, record);
  EXPECT_EQ(record["image_variant"], "slurm");
  EXPECT_EQ(ReadInstanceSpec(record).image_variant, NodeImageVariant::kSlurm);
  // Records from before the member, or damaged: a Slurm node.
  for (const nlohmann::json& old : {nlohmann::json{{"instance_id", "i-1"}},
                                    nlohmann::json{{"image_variant", "gpu"}},
                                    nlohmann::json{{"image_variant", 3}}}) {
    EXPECT_EQ(ReadInstanceSpec(old).image_variant, NodeImageVariant::kSlurm) << old.dump();
  }
}

TEST(NodeImageVariantNames, RoundTrip) {
  for (NodeImageVariant v : {NodeImageVariant::kSlurm, NodeImageVariant::kEks}) {
    EXPECT_EQ(ParseNodeImageVariant(NodeImageVariantName(v)), v);
  }
  EXPECT_EQ(ParseNodeImageVariant("EKS"), std::nullopt);
}

// --- One EKS node on this host (root, a built EKS image) -------------------------------------

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

const std::vector<std::string> kKubeletSysctls = {
    "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"};
std::map<std::string, std::string> HostSysctls() {
  std::map<std::string, std::string> out;
  for (const std::string& s : kKubeletSysctls) {
    out[s] = Trim(ReadFile("/proc/sys/" + s).value_or("?"));
  }
  return out;
}

class LocalEksNode : public LocalNodeTest {
 protected:
  LocalEksNode() : LocalNodeTest("ekscluster") {}
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the local provider needs root";
    const char* image = std::getenv("HF_TEST_EKS_NODE_IMAGE");
    if (image == nullptr || !fs::exists(fs::path(image) / "usr/local/bin/kubelet")) {
      GTEST_SKIP() << "set HF_TEST_EKS_NODE_IMAGE to a built EKS node image's rootfs "
                      "(tests/e2e/it_eks_node.py does)";
    }
    MakeDataDir("hf-eks-node-test");
    options_.image_rootfs = data_dir_ + "/no-slurm-image";  // only EKS nodes here
    // Found on the first EKS launch, as the server does (Options::eks_image).
    options_.eks_image = [root = std::string(image), this]() -> StatusOr<std::string> {
      ++eks_image_asked_;
      return root;
    };
    options_.node_network = "10.246.0.0/16";  // apart from local_provider_test's
    options_.agent_port = 19083;
    options_.instance_caps = [](std::string_view) { return InstanceCaps{2, 2.0}; };
  }
  int eks_image_asked_ = 0;
};

TEST_F(LocalEksNode, BootsWithContainerdAndTheKubeletReady) {
  const auto host_before = HostSysctls();
  auto made = LocalProvider::Create(options_);
  ASSERT_TRUE(made.ok()) << made.status();
  LocalProvider& p = **made;
  InstanceSpec spec;
  spec.instance_id = "i-0e0e0e0e0e0e0e0e1";
  spec.cluster_id = "ekscluster";
  spec.cluster_name = "eks";
  spec.group = "workers";
  spec.instance_type = "ml.c5.xlarge";
  spec.image_variant = NodeImageVariant::kEks;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(p.launch(spec).ok());
  int init = -1;
  std::string state;
  const bool booted = local::WaitFor(
      [&] {
        auto pid = p.nodeInitPid(spec.instance_id);
        if (!pid.ok()) return false;
        init = *pid;
        state = Trim(InNodeSh(init, "systemctl is-system-running").output);
        return state == "running" || state == "degraded";
      },
      120s, 100ms);
  const std::string console = ReadFile(p.nodeDir(spec.instance_id) + "/console.log").value_or("");
  ASSERT_TRUE(booted) << "state " << state << "; console:\n" << console;
  EXPECT_EQ(eks_image_asked_, 1);
  std::printf("[ metric ] EKS node: launch to systemd %s in %.1f s\n", state.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  EXPECT_EQ(state, "running") << InNodeSh(init, "systemctl --failed --no-legend").output;

  // At boot: the prep unit ran; containerd, the kubelet and kube-proxy wait for the agent.
  EXPECT_EQ(Trim(InNodeSh(init, "systemctl is-active hyperfleet-eks-prep").output), "active");
  for (const char* unit : {"containerd", "kubelet", "kube-proxy"}) {
    EXPECT_EQ(Trim(InNodeSh(init, std::string("systemctl is-active ") + unit).output), "inactive")
        << unit;
  }
  // The kubelet finds its values and cannot write the (host's) sysctls.
  EXPECT_EQ(
      Trim(InNodeSh(init, "cat /proc/sys/kernel/panic_on_oops /proc/sys/kernel/panic").output),
      "1\n10");
  EXPECT_NE(InNodeSh(init, "echo 0 > /proc/sys/kernel/panic_on_oops").exit_code, 0);

  // containerd started by hand (as the agent will) imports the pause image and runs it.
  const NodeCommand start = InNodeSh(init, "systemctl start containerd");
  ASSERT_EQ(start.exit_code, 0)
      << start.output << InNodeSh(init, "journalctl -u containerd --no-pager | tail -30").output;
  EXPECT_THAT(InNodeSh(init, "ctr -n k8s.io images ls -q").output,
              HasSubstr("registry.k8s.io/pause:3.6"));
  const NodeCommand run = InNodeSh(init, "ctr -n k8s.io run -d registry.k8s.io/pause:3.6 sandbox1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto task_is = [&](const char* status) {
    return InNodeSh(init, "ctr -n k8s.io task ls").output.find(status) != std::string::npos;
  };
  EXPECT_TRUE(local::WaitFor([&] { return task_is("RUNNING"); }, 20s, 100ms))
      << InNodeSh(init, "ctr -n k8s.io task ls").output;
  // pause stops on SIGTERM (it is PID 1 of its container).
  EXPECT_EQ(InNodeSh(init, "ctr -n k8s.io task kill -s SIGTERM sandbox1").exit_code, 0);
  EXPECT_TRUE(local::WaitFor([&] { return task_is("STOPPED"); }, 20s, 100ms))
      << InNodeSh(init, "ctr -n k8s.io task ls").output;
  EXPECT_EQ(
      InNodeSh(init, "ctr -n k8s.io task rm sandbox1 && ctr -n k8s.io c rm sandbox1").exit_code, 0);
  // Its state is in the node's host directory, not on the overlay root.
  EXPECT_TRUE(
      fs::exists(p.nodeDir(spec.instance_id) + "/containerd/io.containerd.content.v1.content"));

  const NodeCommand kubelet = InNodeSh(init, "kubelet --version");
  EXPECT_EQ(kubelet.exit_code, 0) << kubelet.output;
  EXPECT_THAT(kubelet.output, HasSubstr("Kubernetes v"));
  EXPECT_EQ(HostSysctls(), host_before);

  ASSERT_TRUE(p.terminate(spec.instance_id).ok());
  ASSERT_TRUE(local::WaitFor([&] { return p.list("ekscluster")->empty(); }, 90s));
  EXPECT_FALSE(fs::exists(p.nodeDir(spec.instance_id)));
  EXPECT_EQ(HostSysctls(), host_before);
}

}  // namespace
}  // namespace hf::provider

// main(): node_supervisor_main.cc (the binary is also the node supervisor).
