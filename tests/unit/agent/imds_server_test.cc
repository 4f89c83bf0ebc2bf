// The agent's IMDS on registered machines (include/hyperfleet/agent/imds_server.h): agent.env's
// keys, the answers over real HTTP (curl), the refusal to take over an existing service, and
// (root) 169.254.169.254 added to lo and removed again, in a network namespace of the test's.
#include "hyperfleet/agent/imds_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "hyperfleet/agent/env_file.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::agent {
namespace {

using namespace std::chrono_literals;

const std::map<std::string, std::string> kServe = {
    {"HF_IMDS", "serve"},
    {"HF_IMDS_INSTANCE_TYPE", "ml.c5.large"},
    {"HF_IMDS_LOCAL_IPV4", "10.250.3.11"},
    {"HF_IMDS_HOSTNAME", "ip-10-250-3-11"},
    {"HF_IMDS_REGION", "us-west-2"}};

AgentImds Node() {
  auto imds = ImdsFromEnv(kServe, "i-0123456789abcdef0");
  EXPECT_TRUE(imds.ok() && imds->has_value());
  return **imds;
}

TEST(ImdsFromEnv, ServesOnlyWhenAskedAndNamesAMissingKey) {
  auto none = ImdsFromEnv({}, "i-1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto off = ImdsFromEnv({{"HF_IMDS", "off"}}, "i-1");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());

  auto on = ImdsFromEnv(kServe, "i-1");
  ASSERT_TRUE(on.ok() && on->has_value());
  EXPECT_EQ((*on)->node.instance_id, "i-1");
  EXPECT_EQ((*on)->node.instance_type, "ml.c5.large");
  EXPECT_EQ((*on)->node.ip, "10.250.3.11");
  EXPECT_EQ((*on)->node.hostname, "ip-10-250-3-11");
  EXPECT_EQ((*on)->region, "us-west-2");

  for (const char* key : {"HF_IMDS_INSTANCE_TYPE", "HF_IMDS_LOCAL_IPV4", "HF_IMDS_HOSTNAME",
                          "HF_IMDS_REGION"}) {
    auto values = kServe;
    values.erase(key);
    auto r = ImdsFromEnv(values, "i-1");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(key), std::string_view::npos) << r.status();
  }
  auto bad = ImdsFromEnv({{"HF_IMDS", "yes"}}, "i-1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HF_IMDS"), std::string_view::npos);
}

TEST(ImdsFromEnv, LoadAgentEnvReadsIt) {
  char tmpl[] = "/tmp/hf-imds-env-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/agent.env";
  std::string text = "HF_AGENT_URL=http://10.0.0.1:9081\nHF_INSTANCE_ID=i-9\nHF_AGENT_TOKEN=t\n";
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  AgentOptions options;
  ASSERT_TRUE(LoadAgentEnv(path, &options).ok());
  EXPECT_FALSE(options.imds.has_value());
  for (const auto& [k, v] : kServe) text += k + "=" + v + "\n";
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  ASSERT_TRUE(LoadAgentEnv(path, &options).ok());
  ASSERT_TRUE(options.imds.has_value());
  EXPECT_EQ(options.imds->node.instance_id, "i-9");
  ASSERT_TRUE(WriteFileAtomically(path, text + "HF_IMDS_REGION=\n").ok());
  Status s = LoadAgentEnv(path, &options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("HF_IMDS_REGION"), std::string_view::npos) << s;
  unlink(path.c_str());
  rmdir(tmpl);
}

/// curl's output for one request (status code last, on a line of its own).
std::string Curl(const std::vector<std::string>& args) {
  ProcessSpec spec;
  spec.argv = {"curl", "-s", "-m", "5", "-w", "\n%{http_code}"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::vector<std::string>{"LC_ALL=C", "no_proxy=*"};
  spec.out = Stdio::Pipe();
  auto r = RunProcess(spec, RunOptions{.timeout = 10s});
  return r.ok() ? r->out : "<" + std::string(r.status().message()) + ">";
}

/// What a lifecycle script reads: a token, then the paths with it, then one without.
std::string ReadAsAScriptWould(const std::string& base) {
  std::string token = Curl({"-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60",
                            base + "/latest/api/token"});
  token = token.substr(0, token.find('\n'));
  std::string out;
  for (const char* path : {"instance-id", "instance-type", "local-ipv4", "hostname",
                           "placement/availability-zone", "placement/region"}) {
    out += Curl({"-H", "X-aws-ec2-metadata-token: " + token,
                 base + "/latest/meta-data/" + path}) + "\n";
  }
  out += Curl({base + "/latest/meta-data/instance-id"});
  return out;
}

const char* kExpected =
    "i-0123456789abcdef0\n200\nc5.large\n200\n10.250.3.11\n200\n"
    "ip-10-250-3-11.us-west-2.compute.internal\n200\nus-west-2a\n200\nus-west-2\n200\n"
    "\n401";

TEST(ImdsServer, AnswersWithATokenAndRefusesWithout) {
  ImdsServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.add_address = false;
  auto server = ImdsServer::Start(Node(), o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  EXPECT_EQ(ReadAsAScriptWould(base), kExpected);
  (*server)->Stop();
  EXPECT_EQ(Curl({base + "/latest/meta-data/instance-id"}), "\n000");
}

TEST(ImdsServer, NeverTakesOverAServiceThatAnswers) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof sa;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ImdsServerOptions o;
  o.address = "127.0.0.1";
  o.port = ntohs(sa.sin_port);
  o.add_address = false;
  auto server = ImdsServer::Start(Node(), o);
  close(fd);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition) << server.status();
}

/// Runs `body` on a thread of its own in a new network namespace (root): what it starts,
/// threads and programs alike, is in that namespace too.
void InOwnNetns(const std::function<void()>& body) {
  std::thread([&] {
    ASSERT_EQ(unshare(CLONE_NEWNET), 0);
    auto up = RunCapture({"ip", "link", "set", "lo", "up"});
    ASSERT_TRUE(up.ok() && up->ok());
    body();
  }).join();
}

std::string LoAddresses() {
  auto r = RunCapture({"ip", "-o", "-4", "addr", "show", "dev", "lo"});
  return r.ok() ? r->out : "";
}

TEST(ImdsServer, AddsTheAddressToLoAndRemovesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace, ip addr)";
  InOwnNetns([] {
    EXPECT_EQ(LoAddresses().find("169.254.169.254"), std::string::npos);
    auto server = ImdsServer::Start(Node());  // the real address and port
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_NE(LoAddresses().find(" 169.254.169.254/32 "), std::string::npos) << LoAddresses();
    EXPECT_EQ(ReadAsAScriptWould("http://169.254.169.254"), kExpected);
    // A second agent (a restart while the first still serves) leaves it alone.
    auto second = ImdsServer::Start(Node());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    (*server)->Stop();
    EXPECT_EQ(LoAddresses().find("169.254.169.254"), std::string::npos) << LoAddresses();
    // Left on lo by an agent that was killed (nobody listens): taken over and removed.
    auto left = RunCapture({"ip", "addr", "add", "169.254.169.254/32", "dev", "lo"});
    ASSERT_TRUE(left.ok() && left->ok());
    auto again = ImdsServer::Start(Node());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ReadAsAScriptWould("http://169.254.169.254"), kExpected);
    (*again)->Stop();
    EXPECT_EQ(LoAddresses().find("169.254.169.254"), std::string::npos) << LoAddresses();
  });
}

}  // namespace
}  // namespace hf::agent
