// hf_ssh: the known_hosts line, the argument vector, and runs against a real sshd on
// 127.0.0.1 (pinned host key, wrong key refused before anything runs, unreachable, timeout).
#include "hyperfleet/ssh/ssh_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ssh/ssh_args.h"
#include "unit/ssh/local_sshd.h"

namespace hf::ssh {
namespace {

using namespace std::chrono_literals;

// A real ed25519 public key (ssh-keygen output).
constexpr std::string_view kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host";

TEST(KnownHostsLineTest, Port22IsTheBareAddressCommentDropped) {
  auto line = KnownHostsLine("10.250.1.5", 22, kKey);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line,
            "10.250.1.5 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl");
}

TEST(KnownHostsLineTest, OtherPortIsBracketed) {
  auto line = KnownHostsLine("node7.example", 2222, kKey);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->starts_with("[node7.example]:2222 ssh-ed25519 AAAA")) << *line;
}

TEST(KnownHostsLineTest, BadKeysAndAddressesRefused) {
  {
    // A newline inside the key would write two known_hosts lines.
    std::string split(kKey);
    split.insert(split.find(' ') + 20, "\n");
    EXPECT_FALSE(KnownHostsLine("10.250.1.5", 22, split).ok());
  }
  struct Case {
    std::string_view address, key;
  } cases[] = {
      {"10.0.0.1", ""},
      {"10.0.0.1", "ssh-ed25519"},
      {"10.0.0.1", "ssh-ed25519 not*base64"},
      // Valid base64, but the blob names another type than the first field.
      {"10.0.0.1", "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
      {"", kKey},
      {"-oProxyCommand=x", kKey},
      {"10.0.0.1 evil", kKey},
      {"10.0.0.1,other", kKey},
  };
  for (const auto& c : cases) {
    auto line = KnownHostsLine(c.address, 22, c.key);
    EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument) << c.address << " / " << c.key;
  }
}

TEST(SshArgvTest, PinsTheHostKeyAndUsesOnlyTheGivenIdentity) {
  SshTarget t{.address = "10.250.1.5", .port = 2222, .user = "admin", .identity_file = "/d/key",
              .known_hosts_file = "/d/known_hosts", .connect_timeout_seconds = 7};
  auto argv = internal::SshArgv(t, "uname -m");
  ASSERT_TRUE(argv.ok()) << argv.status();
  auto has_option = [&](std::string_view o) {
    for (size_t i = 0; i + 1 < argv->size(); ++i) {
      if ((*argv)[i] == "-o" && (*argv)[i + 1] == o) return true;
    }
    return false;
  };
  for (auto o : {"BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/d/known_hosts",
                 "GlobalKnownHostsFile=/dev/null", "IdentitiesOnly=yes", "IdentityAgent=none",
                 "ConnectTimeout=7", "ServerAliveInterval=5", "ServerAliveCountMax=3",
                 "LogLevel=ERROR", "UpdateHostKeys=no"}) {
    EXPECT_TRUE(has_option(o)) << o;
  }
  const auto& a = *argv;
  EXPECT_EQ(a[1], "-F");
  EXPECT_EQ(a[2], "/dev/null");
  auto at = [&](std::string_view flag) {
    return std::find(a.begin(), a.end(), flag) - a.begin();
  };
  EXPECT_EQ(a[at("-i") + 1], "/d/key");
  EXPECT_EQ(a[at("-p") + 1], "2222");
  // The destination and command come after "--": nothing of them is read as an option.
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[a.size() - 3], "--");
  EXPECT_EQ(a[a.size() - 2], "admin@10.250.1.5");
  EXPECT_EQ(a.back(), "uname -m");
}

TEST(SshArgvTest, BadTargetsNameTheField) {
  SshTarget ok{.address = "10.0.0.1", .identity_file = "/k", .known_hosts_file = "/kh"};
  struct Case {
    SshTarget t;
    std::string_view field;
  } cases[] = {
      {[&] { auto t = ok; t.address = "-oProxyCommand=sh"; return t; }(), "address"},
      {[&] { auto t = ok; t.user = "a@b"; return t; }(), "user"},
      {[&] { auto t = ok; t.user = "-l"; return t; }(), "user"},
      {[&] { auto t = ok; t.user = ""; return t; }(), "user"},
      {[&] { auto t = ok; t.identity_file = ""; return t; }(), "identity_file"},
      {[&] { auto t = ok; t.known_hosts_file = ""; return t; }(), "known_hosts_file"},
      {[&] { auto t = ok; t.connect_timeout_seconds = 0; return t; }(), "connect_timeout_seconds"},
  };
  for (const auto& c : cases) {
    auto argv = internal::SshArgv(c.t, "true");
    ASSERT_EQ(argv.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(std::string(argv.status().message()).find(c.field), std::string::npos) << argv.status();
  }
}

TEST(SshEnvironmentTest, NoneOfTheCallersEnvironment) {
  ::setenv("SSH_AUTH_SOCK", "/tmp/agent.sock", 1);
  for (const auto& e : internal::SshEnvironment()) {
    EXPECT_FALSE(e.starts_with("SSH_AUTH_SOCK=")) << e;
    EXPECT_FALSE(e.starts_with("SSH_ASKPASS")) << e;
  }
  ::unsetenv("SSH_AUTH_SOCK");
}

// ---- Against a real sshd ------------------------------------------------------------------

class SshdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::LocalSshd::Available()) GTEST_SKIP() << "no sshd (openssh-server) on this host";
    char tmpl[] = "/tmp/hf-ssh-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string why = sshd_.Start(dir_);
    ASSERT_EQ(why, "");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A target pinning `host_key`, with `key` as identity.
  SshTarget Target(const std::string& host_key, const std::string& key, uint16_t port = 0) {
    auto line = KnownHostsLine("127.0.0.1", port ? port : sshd_.port(), host_key);
    EXPECT_TRUE(line.ok()) << line.status();
    const std::string kh = dir_ + "/known_hosts-" + std::to_string(n_++);
    std::ofstream(kh) << *line << "\n";
    return SshTarget{.address = "127.0.0.1", .port = port ? port : sshd_.port(),
                     .user = sshd_.user(), .identity_file = key, .known_hosts_file = kh,
                     .connect_timeout_seconds = 5};
  }

  std::string dir_;
  int n_ = 0;
  testing::LocalSshd sshd_;
};

TEST_F(SshdTest, RunsACommandWithInputAndExitCode) {
  auto t = Target(sshd_.host_public_key(), sshd_.client_key());
  auto r = ssh::Run(t, "cat; echo to-err >&2; exit 3", "hello over ssh\n", 20s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "hello over ssh\n");
  EXPECT_EQ(r->err, "to-err\n");
}

TEST_F(SshdTest, WrongHostKeyRefusedBeforeAnythingRuns) {
  auto t = Target(sshd_.wrong_host_public_key(), sshd_.client_key());
  const std::string marker = dir_ + "/ran";
  auto r = ssh::Run(t, "touch " + marker, "", 20s);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("ost key"), std::string_view::npos) << r.status();
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(SshdTest, UnknownIdentityRefused) {
  auto t = Target(sshd_.host_public_key(), sshd_.other_key());
  auto r = ssh::Run(t, "true", "", 20s);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("ermission denied"), std::string_view::npos) << r.status();
}

TEST_F(SshdTest, NobodyListeningIsUnavailable) {
  auto t = Target(sshd_.host_public_key(), sshd_.client_key(), testing::LocalSshd::FreePort());
  auto r = ssh::Run(t, "true", "", 20s);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("refused"), std::string_view::npos) << r.status();
}

TEST_F(SshdTest, TimeoutKillsTheSession) {
  auto t = Target(sshd_.host_public_key(), sshd_.client_key());
  auto r = ssh::Run(t, "sleep 60", "", 1500ms);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_F(SshdTest, StartGivesTheStreams) {
  auto t = Target(sshd_.host_public_key(), sshd_.client_key());
  auto child = Start(t, "tr a-z A-Z", Stdio::Pipe(), Stdio::Pipe(), Stdio::Null());
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_EQ(::write(child->stdin_fd(), "abc\n", 4), 4);
  child->CloseStdin();
  std::string out;
  char buf[64];
  for (ssize_t n; (n = ::read(child->stdout_fd(), buf, sizeof buf)) > 0;) out.append(buf, n);
  EXPECT_EQ(out, "ABC\n");
  EXPECT_EQ(child->Wait().exit_code, 0);
}

}  // namespace
}  // namespace hf::ssh
