// The local provider on real namespaces: a 2-node cluster booting systemd under nspawn.
// Needs root and a node image: the first of $HF_TEST_NODE_IMAGE, the current recipe's image
// in /var/lib/hyperfleet/images (FindNodeImage), /var/lib/hyperfleet/test-image/rootfs (a
// debootstrap minbase with systemd).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hyperfleet/provider/node_image.h"
#include "hyperfleet/provider/local_provider.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/sys.h"
#include "unit/provider/local_node_fixture.h"

namespace hf::provider {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using local::WaitFor;

std::string FindImage() {
  if (const char* env = getenv("HF_TEST_NODE_IMAGE")) return env;
  // The current recipe's image, not just any rootfs in the image dir: test machines' images
  // (tests/e2e/ssh_machines.py) live there too, and booting one of those failed this test.
  if (auto image = FindNodeImage(NodeImageOptions{}); image.ok()) return image->rootfs;
  if (fs::exists("/var/lib/hyperfleet/test-image/rootfs/lib/systemd/systemd")) {
    return "/var/lib/hyperfleet/test-image/rootfs";
  }
  return "";
}

std::string Sh(int init, const std::string& script) { return InNodeSh(init, script).output; }

class LocalProviderTest : public LocalNodeTest {
 protected:
  LocalProviderTest() : LocalNodeTest("testcluster") {}
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the local provider needs root";
    image_ = FindImage();
    if (image_.empty()) GTEST_SKIP() << "no node image (see the header of this file)";
    MakeDataDir("hf-local-test");
    options_.image_rootfs = image_;
    options_.region = "us-west-2";
    options_.node_network = "10.224.0.0/12";
    options_.agent_port = 19081;
    options_.agent_token = [](std::string_view id) { return "token-" + std::string(id); };
    options_.instance_caps = [](std::string_view) { return InstanceCaps{1, 1.0}; };
  }
  std::unique_ptr<LocalProvider> Make() {
    auto p = LocalProvider::Create(options_);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  static InstanceSpec Spec(const std::string& id) {
    InstanceSpec s;
    s.instance_id = id;
    s.cluster_id = "testcluster";
    s.cluster_name = "test";
    s.group = "workers";
    s.instance_type = "ml.c5.xlarge";
    return s;
  }
  // Waits until every id is kRunning and its systemd reports running/degraded.
  static bool WaitBooted(LocalProvider& p, const std::vector<std::string>& ids,
                         std::chrono::seconds timeout) {
    return WaitFor(
        [&] {
          for (const auto& id : ids) {
            auto init = p.nodeInitPid(id);
            if (!init.ok()) return false;
            const std::string s = InNode(*init, {"systemctl", "is-system-running"}).output;
            if (s.find("running") == std::string::npos && s.find("degraded") == std::string::npos) {
              return false;
            }
          }
          return true;
        },
        timeout, 100ms);
  }
  static std::optional<InstanceObservation> Find(LocalProvider& p, const std::string& id) {
    auto all = p.list("testcluster");
    if (!all.ok()) return std::nullopt;
    for (auto& o : *all) {
      if (o.instance_id == id) return o;
    }
    return std::nullopt;
  }

  // Out of file descriptors, /proc cannot be read: list() says it cannot tell, never that
  // the running nodes stopped (which would have them replaced while they run on).
  static void ExpectListCannotTellWithoutDescriptors(LocalProvider& p,
                                                     const std::vector<std::string>& running) {
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rlimit low = saved;
    low.rlim_cur = 512;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> filler;
    for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
    const int open_errno = errno;
    auto starved = p.list("testcluster");
    for (int fd : filler) close(fd);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    ASSERT_EQ(open_errno, EMFILE);
    ASSERT_FALSE(starved.ok()) << "a node reported as state "
                               << static_cast<int>((*starved)[0].state);
    EXPECT_TRUE(absl::IsUnavailable(starved.status())) << starved.status();
    for (const auto& id : running) EXPECT_EQ(Find(p, id)->state, InstanceState::kRunning) << id;
  }

  std::string image_;
};

TEST(LocalNamesTest, FitInterfaceNameLimit) {
  EXPECT_EQ(LocalNames::Bridge("abc123", "x").size(), 11u);
  EXPECT_EQ(LocalNames::NodeVeth("abc123", "i-0123456789abcdef0").size(), 13u);
  EXPECT_EQ(LocalNames::ImdsVeth("abc123", "x").size(), 13u);
  EXPECT_EQ(LocalNames::NodeNetns("abc123", "i-1"), "hf-abc123-i-1");
  EXPECT_EQ(LocalNames::Hostname("10.224.4.2"), "ip-10-224-4-2");
  EXPECT_NE(LocalNames::NodeVeth("abc123", "i-1"), LocalNames::NodeVeth("abc124", "i-1"));
}

TEST_F(LocalProviderTest, MissingImageFailsTheLaunch) {
  options_.image_rootfs = data_dir_ + "/no-image";
  auto p = Make();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->launch(Spec("i-noimage")).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto o = Find(*p, "i-noimage");
    return o && o->state == InstanceState::kFailed;
  }, 30s));
  EXPECT_NE(Find(*p, "i-noimage")->message.find("node image missing"), std::string::npos);
  ASSERT_TRUE(p->terminate("i-noimage").ok());
  EXPECT_TRUE(WaitFor([&] { return p->list("testcluster")->empty(); }, 30s));
  EXPECT_FALSE(fs::exists(p->nodeDir("i-noimage")));
}

TEST_F(LocalProviderTest, TwoNodeClusterLifecycle) {
  auto p = Make();
  ASSERT_NE(p, nullptr);
  const std::string fleet = p->fleetId();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->launch(Spec("i-a")).ok());
  ASSERT_TRUE(p->launch(Spec("i-b")).ok());
  ASSERT_TRUE(p->launch(Spec("i-a")).ok());  // idempotent
  ASSERT_TRUE(WaitBooted(*p, {"i-a", "i-b"}, 90s)) << ReadFile(p->nodeDir("i-a") + "/console.log").value_or("");
  std::printf("[ metric ] 2 nodes: launch to systemd running %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  auto a = *Find(*p, "i-a");
  auto b = *Find(*p, "i-b");
  EXPECT_EQ(a.state, InstanceState::kRunning);
  EXPECT_NE(a.private_ip, b.private_ip);
  const int ia = *p->nodeInitPid("i-a");
  const int ib = *p->nodeInitPid("i-b");
  const std::string subnet_prefix = a.private_ip.substr(0, a.private_ip.rfind('.'));

  // Identity: hostname, hosts, agent.env.
  EXPECT_EQ(Sh(ia, "hostname"), a.hostname + "\n");
  EXPECT_TRUE(WaitFor([&] { return Sh(ia, "cat /etc/hosts").find(b.private_ip + " ") != std::string::npos; }, 10s));
  const std::string hosts = Sh(ia, "cat /etc/hosts");
  EXPECT_NE(hosts.find(b.private_ip + " " + b.hostname + ".us-west-2.compute.internal " + b.hostname), std::string::npos) << hosts;
  EXPECT_NE(Sh(ia, "cat /etc/hyperfleet/agent.env").find("HF_AGENT_TOKEN=token-i-a"), std::string::npos);
  EXPECT_EQ(Sh(ia, "stat -c %a /etc/hyperfleet/agent.env"), "600\n");

  // Network: node to node, node to the bridge host address (the agent endpoint).
  auto bridge_ip = Sh(ia, "ip -4 route get 10.254.254.254 | sed -n 's/.* via \\([0-9.]*\\).*/\\1/p'");
  bridge_ip.erase(bridge_ip.find_last_not_of("\n") + 1);
  EXPECT_EQ(InNode(ia, {"curl", "-s", "-m", "5", "http://" + bridge_ip + ":19081/"}).output, "agent\n");
  {
    // TCP node B -> node A: a listener in A (python absent in minbase: use the agent curl path instead).
    auto r = InNode(ia, {"curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                         "http://" + b.private_ip + ":9/"});
    // Port 9 is closed in B: a refused connection (code 000, exit 7) proves B answered.
    EXPECT_EQ(r.exit_code, 7) << r.output;
  }
  EXPECT_NE(InNode(ia, {"curl", "-s", "-m", "3", "http://203.0.113.1/"}).exit_code, 0);  // no egress

  // IMDS answers each node for itself, only with a token.
  const std::string imds =
      "T=$(curl -s -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "
      "http://169.254.169.254/latest/api/token); "
      "for k in instance-id instance-type local-ipv4 placement/availability-zone; do "
      "curl -s -m 5 -H \"X-aws-ec2-metadata-token: $T\" http://169.254.169.254/latest/meta-data/$k; echo; done; "
      "curl -s -m 5 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/instance-id";
  EXPECT_EQ(Sh(ia, imds), "i-a\nc5.xlarge\n" + a.private_ip + "\nus-west-2a\n401");
  EXPECT_EQ(Sh(ib, imds), "i-b\nc5.xlarge\n" + b.private_ip + "\nus-west-2a\n401");

  // Isolation: users and /etc writes stay in node A; /fsx is shared; the kernel is read-only.
  EXPECT_EQ(InNode(ia, {"useradd", "hftestuser"}).exit_code, 0);
  EXPECT_EQ(Sh(ia, "echo x > /etc/hf-test-file && id -u hftestuser >/dev/null && echo ok"), "ok\n");
  EXPECT_NE(Sh(ib, "id hftestuser 2>&1; ls /etc/hf-test-file 2>&1").find("no such"), std::string::npos);
  EXPECT_FALSE(fs::exists("/etc/hf-test-file"));
  EXPECT_EQ(RunCapture({"id", "hftestuser"})->exit.exit_code, 1);
  EXPECT_EQ(Sh(ia, "echo shared > /fsx/f && echo ok"), "ok\n");
  EXPECT_EQ(Sh(ib, "cat /fsx/f"), "shared\n");
  EXPECT_NE(InNode(ia, {"sysctl", "-w", "vm.swappiness=10"}).exit_code, 0);

  // Reboot keeps the upper and comes back with a new init.
  (void)InNode(ia, {"systemctl", "reboot"});
  ASSERT_TRUE(WaitFor([&] { auto i = p->nodeInitPid("i-a"); return i.ok() && *i != ia; }, 60s));
  ASSERT_TRUE(WaitBooted(*p, {"i-a"}, 60s));
  const int ia2 = *p->nodeInitPid("i-a");
  EXPECT_EQ(Sh(ia2, "cat /etc/hf-test-file"), "x\n");

  // A new provider over the same data dir adopts the running nodes untouched.
  const auto sup_a = p->supervisorPidForTest("i-a");
  p.reset();
  p = Make();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->fleetId(), fleet);
  EXPECT_EQ(*p->nodeInitPid("i-a"), ia2);
  EXPECT_EQ(*p->nodeInitPid("i-b"), ib);
  EXPECT_EQ(p->supervisorPidForTest("i-a"), sup_a);
  ASSERT_TRUE(WaitFor([&] { return Sh(ib, imds) == "i-b\nc5.xlarge\n" + b.private_ip + "\nus-west-2a\n401"; }, 20s));

  ExpectListCannotTellWithoutDescriptors(*p, {"i-a", "i-b"});

  // Terminate A: B's /etc/hosts forgets it. Then B: nothing is left.
  ASSERT_TRUE(p->terminate("i-a").ok());
  EXPECT_EQ(Find(*p, "i-a")->state, InstanceState::kTerminating);
  ASSERT_TRUE(WaitFor([&] { return !Find(*p, "i-a").has_value(); }, 60s));
  // Membership changes reach the other nodes' /etc/hosts shortly after (coalesced).
  EXPECT_TRUE(WaitFor(
      [&] { return Sh(ib, "cat /etc/hosts").find(a.private_ip + " ") == std::string::npos; }, 10s));
  ASSERT_TRUE(p->terminate("i-b").ok());
  ASSERT_TRUE(WaitFor([&] { return p->list("testcluster")->empty(); }, 60s));
  p.reset();

  EXPECT_EQ(RunCapture({"ip", "netns", "list"})->out.find("hf-" + fleet), std::string::npos);
  EXPECT_EQ(RunCapture({"ip", "link", "show"})->out.find(LocalNames::Bridge(fleet, "testcluster")), std::string::npos);
  EXPECT_EQ(RunCapture({"ip", "link", "show"})->out.find(LocalNames::NodeVeth(fleet, "i-a")), std::string::npos);
  EXPECT_EQ(ReadFile("/proc/mounts")->find(data_dir_), std::string::npos);
  for (const auto& h : local::CgroupHierarchies()) {
    EXPECT_FALSE(fs::exists(h + "/hyperfleet/" + fleet)) << h;
  }
  EXPECT_EQ(RunCapture({"pgrep", "-f", data_dir_})->out, "");
  EXPECT_FALSE(fs::exists(data_dir_ + "/local/nodes/i-a"));
  EXPECT_FALSE(fs::exists(data_dir_ + "/local/clusters/testcluster"));
}

// Boot time and memory for N nodes (HF_LOCAL_BENCH=1,3,10 to run; slow).
TEST_F(LocalProviderTest, BootBenchmark) {
  const char* env = getenv("HF_LOCAL_BENCH");
  if (!env) GTEST_SKIP() << "set HF_LOCAL_BENCH=1,3,10 to measure";
  auto p = Make();
  ASSERT_NE(p, nullptr);
  std::stringstream list(env);
  std::string item;
  int round = 0;
  while (std::getline(list, item, ',')) {
    const int n = std::stoi(item);
    std::vector<std::string> ids;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      ids.push_back("i-bench" + std::to_string(round) + "x" + std::to_string(i));
      ASSERT_TRUE(p->launch(Spec(ids.back())).ok());
    }
    ASSERT_TRUE(WaitBooted(*p, ids, 300s));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // PSS of every process in each node's pid namespace (nspawn + supervisor excluded).
    std::this_thread::sleep_for(3s);  // let boot-time helpers exit before measuring idle memory
    double pss_kib = 0;
    for (const auto& id : ids) {
      const int init = *p->nodeInitPid(id);
      const std::string ns = fs::read_symlink("/proc/" + std::to_string(init) + "/ns/pid");
      for (const auto& e : fs::directory_iterator("/proc")) {
        std::error_code ec;
        if (fs::read_symlink(e.path() / "ns/pid", ec).string() != ns) continue;
        std::ifstream in(e.path() / "smaps_rollup");
        std::string key;
        long value;
        std::string unit;
        while (in >> key) {
          if (key == "Pss:") {
            in >> value;
            pss_kib += value;
            break;
          }
        }
      }
    }
    std::printf("[ metric ] %d nodes: launch to systemd running %.2f s, PSS per idle node %.1f MiB\n",
                n, secs, pss_kib / 1024 / n);
    for (const auto& id : ids) ASSERT_TRUE(p->terminate(id).ok());
    ASSERT_TRUE(WaitFor([&] { return p->list("testcluster")->empty(); }, 300s));
    ++round;
  }
}

}  // namespace
}  // namespace hf::provider

// main(): node_supervisor_main.cc (the binary is also the node supervisor).
