// Registration's pure decisions, table-tested: the probe's output, the fit against the
// instance catalog (GPUs exactly, CPUs and memory at least), OS, and the request's fields.
#include "hyperfleet/machines/checks.h"

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace hf::machines {
namespace {

const model::InstanceTypeSpec& Spec(std::string_view name) {
  const auto* s = model::InstanceCatalog::Embedded().find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

TEST(ParseProbeTest, ReadsEveryKey) {
  auto p = ParseProbe(
      "Welcome banner\ncpus=192\nmem_kb=2113929216\ngpu=NVIDIA H100 80GB HBM3\n"
      "gpu=NVIDIA H100 80GB HBM3\ngpus=8\nneuron=0\nos_id=\"ubuntu\"\nos_version=\"22.04\"\n"
      "arch=x86_64\nsudo=yes\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->facts.cpus, 192);
  EXPECT_DOUBLE_EQ(p->facts.memory_gib, 2016);
  EXPECT_EQ(p->facts.gpus, 8);
  EXPECT_EQ(p->facts.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p->facts.os_id, "ubuntu");
  EXPECT_EQ(p->facts.os_version, "22.04");
  EXPECT_EQ(p->facts.arch, "x86_64");
  EXPECT_TRUE(p->root_capable);
}

TEST(ParseProbeTest, NvidiaSmiLinesCountWhenProcSaysLess) {
  auto p = ParseProbe("cpus=4\nmem_kb=16000000\ngpu=A\ngpu=A\ngpus=0\nos_id=debian\narch=x86_64\nsudo=no\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->facts.gpus, 2);
  EXPECT_FALSE(p->root_capable);
}

TEST(ParseProbeTest, MissingOrBadKeysRefused) {
  struct Case {
    std::string_view out, says;
  } cases[] = {
      {"mem_kb=1\nos_id=debian\narch=x86_64\n", "cpus"},
      {"cpus=2\nos_id=debian\narch=x86_64\n", "mem_kb"},
      {"cpus=2\nmem_kb=1\narch=x86_64\n", "os_id"},
      {"cpus=2\nmem_kb=1\nos_id=debian\n", "arch"},
      {"cpus=two\nmem_kb=1\nos_id=debian\narch=x86_64\n", "cpus=two"},
      {"cpus=2\nmem_kb=-5\nos_id=debian\narch=x86_64\n", "mem_kb=-5"},
  };
  for (const auto& c : cases) {
    auto p = ParseProbe(c.out);
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.out;
    EXPECT_NE(std::string(p.status().message()).find(c.says), std::string::npos) << p.status();
  }
}

store::MachineFacts Facts(int cpus, double mem, int gpus, int neuron = 0) {
  store::MachineFacts f;
  f.cpus = cpus;
  f.memory_gib = mem;
  f.gpus = gpus;
  f.neuron_devices = neuron;
  f.os_id = "debian";
  f.os_version = "12";
  f.arch = "x86_64";
  return f;
}

TEST(HardwareMismatchesTest, Table) {
  struct Case {
    std::string_view type;
    store::MachineFacts facts;
    std::vector<std::string> want;
  } cases[] = {
      {"ml.c5.large", Facts(2, 3.8, 0), {}},             // MemTotal below 4 GiB, within 90 %
      {"ml.c5.large", Facts(64, 512, 0), {}},            // more is fine
      {"ml.c5.large", Facts(1, 4, 0), {"CPUs: the machine has 1, ml.c5.large has 2"}},
      {"ml.c5.large", Facts(2, 3.5, 0),
       {"memory: the machine has 3.5 GiB, ml.c5.large has 4 GiB (at least 3.6 GiB needed)"}},
      {"ml.c5.large", Facts(2, 4, 1), {"GPUs: the machine has 1 NVIDIA GPU, ml.c5.large has 0"}},
      {"ml.p5.48xlarge", Facts(192, 2000, 8), {}},
      {"ml.p5.48xlarge", Facts(192, 2000, 0),
       {"GPUs: the machine has 0 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)"}},
      {"ml.p5.48xlarge", Facts(2, 23.4, 0),
       {"GPUs: the machine has 0 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)",
        "CPUs: the machine has 2, ml.p5.48xlarge has 192",
        "memory: the machine has 23.4 GiB, ml.p5.48xlarge has 2048 GiB (at least 1843.2 GiB needed)"}},
      {"ml.p5.48xlarge", Facts(192, 2000, 9),  // GPUs exactly, not at least
       {"GPUs: the machine has 9 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)"}},
      {"ml.trn1.32xlarge", Facts(128, 500, 0, 16), {}},
      {"ml.trn1.32xlarge", Facts(128, 500, 0, 0),
       {"Neuron devices: the machine has 0, ml.trn1.32xlarge has 16"}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(HardwareMismatches(c.facts, Spec(c.type)), c.want) << c.type;
  }
}

TEST(OsMismatchesTest, Table) {
  struct Case {
    std::string_view id, version;
    bool ok;
  } cases[] = {{"debian", "12", true},   {"ubuntu", "22.04", true}, {"ubuntu", "24.04", true},
               {"debian", "11", false},  {"ubuntu", "20.04", false}, {"rocky", "9", false},
               {"", "", false}};
  for (const auto& c : cases) {
    store::MachineFacts f;
    f.os_id = c.id;
    f.os_version = c.version;
    auto m = OsMismatches(f);
    EXPECT_EQ(m.empty(), c.ok) << c.id << " " << c.version;
    if (!c.ok) {
      EXPECT_NE(m[0].find("Debian 12, Ubuntu 22.04 or Ubuntu 24.04"), std::string::npos);
    }
  }
}

TEST(ArchProblemTest, SameArchOnly) {
  store::MachineFacts f;
  f.arch = "aarch64";
  EXPECT_EQ(ArchProblem(f, "x86_64"),
            "architecture: the machine is aarch64, the node binary is built for x86_64");
  f.arch = "x86_64";
  EXPECT_EQ(ArchProblem(f, "x86_64"), "");
}

TEST(FieldChecksTest, HostsUsersAndAddresses) {
  EXPECT_TRUE(IsIpv4("10.250.1.5"));
  EXPECT_FALSE(IsIpv4("10.250.1"));
  EXPECT_FALSE(IsIpv4("node1"));
  EXPECT_FALSE(IsIpv4("::1"));
  for (std::string_view h : {"10.0.0.1", "gpu-7.lab.example", "localhost"}) {
    EXPECT_TRUE(CheckHost(h, "Address").ok()) << h;
  }
  for (std::string_view h : {"", "-oProxyCommand=x", "a b", "a@b", "a;b", ".x"}) {
    auto s = CheckHost(h, "Address");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << h;
    EXPECT_TRUE(std::string(s.message()).starts_with("Address")) << s;
  }
  for (std::string_view u : {"root", "ubuntu", "_svc", "a.b-c_1"}) {
    EXPECT_TRUE(CheckUser(u, "User").ok()) << u;
  }
  for (std::string_view u : {"", "Root", "-l", "a b", "a@b", "1abc",
                             "0123456789012345678901234567890123"}) {
    auto s = CheckUser(u, "User");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << u;
    EXPECT_TRUE(std::string(s.message()).starts_with("User")) << s;
  }
}

// ssh-keygen -t ed25519 -N '' (unencrypted) and -N secret (encrypted), test-only keys.
constexpr std::string_view kPlainKey = R"(-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACAqMDBi52/uPQsC23KJCj20onbrl4hLQKIXgPpW6gZMcwAAAIhg/5wWYP+c
FgAAAAtzc2gtZWQyNTUxOQAAACAqMDBi52/uPQsC23KJCj20onbrl4hLQKIXgPpW6gZMcw
AAAEDsKvvSGgfDLUx1gtS0UTCb9tycRLkRJeWXu+l6EIsxsiowMGLnb+49CwLbcokKPbSi
duuXiEtAoheA+lbqBkxzAAAABHRlc3QB
-----END OPENSSH PRIVATE KEY-----
)";
constexpr std::string_view kEncryptedKey = R"(-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABCtr7yQgY
DGM/rFAnajQD5eAAAAEAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIEUoQoPRuDl9eC8r
2aNDYe1aYyBhF185blkt75W4XOxmAAAAkG1k2rjbldQTBGWi2P0qXP6kjb21iqoAm40SfV
W5arnvDRGBbLkpcd/lNgJWuda9i606f17L+XDKgma7GGDzPm6BkmcORFpi+k6tCc+yel6l
2aezqAnmfi3fm62p612plmHCJeqhCzbE5cU3EzJjRhO0HGvEGmxHMO5xPcLEZ5xgwm70Vr
rAX8AYwZysS/gptw==
-----END OPENSSH PRIVATE KEY-----
)";

TEST(CheckPrivateKeyTest, PlainKeyAcceptedOthersRefusedWithoutEchoingThem) {
  EXPECT_TRUE(CheckPrivateKey(kPlainKey, "SshPrivateKey").ok()) << CheckPrivateKey(kPlainKey, "SshPrivateKey");
  struct Case {
    std::string key;
    std::string_view says;
  } cases[] = {
      {"", "must be an OpenSSH private key"},
      {std::string(kEncryptedKey), "encrypted"},
      {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
       "must be an OpenSSH private key"},
      {"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----", "encrypted"},
      {"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES\n\nabc\n-----END RSA PRIVATE KEY-----",
       "encrypted"},
      {"-----BEGIN OPENSSH PRIVATE KEY-----\nnotbase64!!\n-----END OPENSSH PRIVATE KEY-----",
       "not a readable"},
  };
  for (const auto& c : cases) {
    auto s = CheckPrivateKey(c.key, "SshPrivateKey");
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_TRUE(std::string(s.message()).starts_with("SshPrivateKey")) << s;
    EXPECT_NE(std::string(s.message()).find(c.says), std::string::npos) << s;
    if (c.key.size() > 60) {
      EXPECT_EQ(std::string(s.message()).find(c.key.substr(40, 16)), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace hf::machines
