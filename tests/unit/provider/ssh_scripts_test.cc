// The ssh provider's scripts (src/provider/ssh/scripts.h): what they contain, that bash
// parses them, and the parts that are safe to run on the test host run for real (the probe,
// the hosts block update against a copy of a hosts file).
#include "provider/ssh/scripts.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/provider/node_image.h"

namespace hf::provider::ssh_scripts {
namespace {
namespace fs = std::filesystem;

/// bash -n on `script`: "" when it parses, else bash's message.
std::string BashSyntaxError(const std::string& script) {
  const std::string path =
      (fs::temp_directory_path() / ("ssh_scripts_test_" + std::to_string(getpid()) + ".sh"))
          .string();
  EXPECT_TRUE(WriteFileAtomically(path, script).ok());
  auto r = RunCapture({"bash", "-n", path});
  fs::remove(path);
  if (!r.ok()) return std::string(r.status().message());
  return r->ok() ? "" : r->out;
}

/// Runs `script` with bash; stdout+stderr and whether it exited 0.
std::pair<std::string, bool> Bash(const std::string& script) {
  auto r = RunCapture({"bash", "-c", script});
  if (!r.ok()) return {std::string(r.status().message()), false};
  return {r->out, r->ok()};
}

std::string RecipeFile(const std::string& path) {
  for (const auto& [p, bytes] : NodeImageRecipe()) {
    if (p == path) return bytes;
  }
  return "";
}

TEST(SshScripts, MachinePackagesLeaveOutTheNormalBinarysRuntimeLibraries) {
  const auto packages = MachinePackages(RecipeFile("packages.txt"));
  auto has = [&](const std::string& p) {
    return std::find(packages.begin(), packages.end(), p) != packages.end();
  };
  EXPECT_TRUE(has("slurmd"));
  EXPECT_TRUE(has("munge"));
  EXPECT_TRUE(has("systemd"));
  EXPECT_FALSE(has("libcurl4"));
  EXPECT_FALSE(has("libabsl20220623"));
  EXPECT_FALSE(has("#"));
  EXPECT_EQ(MachinePackages("a b # c\n\n# Runtime libraries of x\nlibz\n"),
            (std::vector<std::string>{"a", "b"}));
}

TEST(SshScripts, RootShellUsesSudoForOtherUsers) {
  EXPECT_EQ(RootShell("root"), "bash -s");
  EXPECT_EQ(RootShell("admin"), "sudo -n bash -s");
  EXPECT_EQ(RootCommand("admin", "echo 'x'"), "sudo -n bash -c 'echo '\\''x'\\'''");
  EXPECT_EQ(Bash(RootCommand("root", "echo 'it''s'")).first, "its\n");
}

TEST(SshScripts, TheBaseScriptInstallsOnlyMissingPackagesAndRunsTheAmiLayerInMachineMode) {
  BaseInputs in;
  in.packages = {"slurmd", "munge"};
  in.recipe = {{"ami-layer.sh", RecipeFile("ami-layer.sh")},
               {"units/hyperfleet-agent.service", RecipeFile("units/hyperfleet-agent.service")}};
  const std::string s = RenderBaseScript(in);
  EXPECT_EQ(BashSyntaxError(s), "");
  EXPECT_TRUE(absl::StrContains(s, "want=( 'slurmd' 'munge' 'sshfs' )"));
  EXPECT_TRUE(absl::StrContains(s, "dpkg-query -W"));
  EXPECT_TRUE(absl::StrContains(s, "apt-get install -y -q --no-install-recommends \"${missing[@]}\""));
  EXPECT_TRUE(absl::StrContains(s, "bash \"$D/ami-layer.sh\" /\n"));
  EXPECT_TRUE(absl::StrContains(s, "/usr/sbin/policy-rc.d"));
  // The recipe travels inside the script, byte for byte.
  EXPECT_TRUE(absl::StrContains(s, absl::Base64Escape(RecipeFile("ami-layer.sh")).substr(0, 76)));
  const size_t record = s.find("@@step record"), packages = s.find("@@step packages"),
               layer = s.find("@@step ami-layer");
  EXPECT_LT(record, packages);
  EXPECT_LT(packages, layer);
}

TEST(SshScripts, TheBaseScriptInstallsSshfsForTheDefaultFsxWhenMissing) {
  BaseInputs in;
  in.packages = {"slurmd", "munge"};
  const std::string s = RenderBaseScript(in);
  EXPECT_EQ(BashSyntaxError(s), "");
  EXPECT_TRUE(absl::StrContains(s, "want=( 'slurmd' 'munge' 'sshfs' )"));
  in.packages = {"sshfs", "munge"};  // named once
  EXPECT_TRUE(absl::StrContains(RenderBaseScript(in), "want=( 'sshfs' 'munge' )"));
  in.packages = {"slurmd", "munge"};
  // The packages step run for real, with dpkg-query and apt-get as shell functions (they
  // win over PATH) and the policy-rc.d and state paths moved to a temporary directory.
  const size_t from = s.find("echo '@@step packages'"), to = s.find("echo '@@step fuse'");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const fs::path tmp = fs::temp_directory_path() /
                       ("ssh_scripts_pkgs_" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const std::string step = absl::StrReplaceAll(
      s.substr(from, to - from), {{"/usr/sbin/policy-rc.d", (tmp / "policy-rc.d").string()}});
  auto [out, ok] = Bash(absl::StrCat(
      "set -euo pipefail\nS=", tmp.string(), "\n",
      "dpkg-query() { [ \"${@: -1}\" = munge ] && echo 'install ok installed'; return 0; }\n",
      "apt-get() { echo \"apt-get $*\"; }\n", step));
  fs::remove_all(tmp);
  ASSERT_TRUE(ok) << out;
  EXPECT_TRUE(absl::StrContains(out, "apt-get install -y -q --no-install-recommends slurmd sshfs\n"))
      << out;
  // /dev/fuse: loaded or made when missing, a warning (not a failure) when it cannot be.
  EXPECT_TRUE(absl::StrContains(s, "modprobe fuse"));
  EXPECT_TRUE(absl::StrContains(s, "mknod -m 666 /dev/fuse c 10 229"));
  EXPECT_LT(s.find("@@step fuse"), s.find("@@step ami-layer"));
}

TEST(SshScripts, TheAmiLayerHasAMachineModeThatKeepsTheMachinesIdentity) {
  const std::string layer = RecipeFile("ami-layer.sh");
  EXPECT_EQ(BashSyntaxError(layer), "");
  EXPECT_TRUE(absl::StrContains(layer, "[ \"$R\" = / ] && MACHINE=1"));
  // In machine mode it leaves before the image-only identity wipe.
  const size_t leave = layer.find("exit 0");
  ASSERT_NE(leave, std::string::npos);
  EXPECT_LT(leave, layer.find(": > \"$R/etc/machine-id\""));
  EXPECT_LT(leave, layer.find("printf 'localhost\\n' > \"$R/etc/hostname\""));
}

TEST(SshScripts, TheBinaryInstallChecksTheSumBeforeReplacing) {
  const std::string s = RenderBinaryInstallScript("abc123");
  EXPECT_EQ(BashSyntaxError(s), "");
  EXPECT_TRUE(absl::StrContains(s, "if [ \"$sum\" != 'abc123' ]"));
  EXPECT_LT(s.find("sha256sum"), s.find("mv -f"));
}

TEST(SshScripts, HostsBlockIsSortedByAddress) {
  EXPECT_EQ(RenderHostsBlock({{"10.250.0.12", "ip-10-250-0-12"}, {"10.250.0.9", "ip-10-250-0-9"}},
                             "us-west-2"),
            "10.250.0.9 ip-10-250-0-9.us-west-2.compute.internal ip-10-250-0-9\n"
            "10.250.0.12 ip-10-250-0-12.us-west-2.compute.internal ip-10-250-0-12\n");
}

TEST(SshScripts, HostsUpdateReplacesOnlyTheMarkedBlock) {
  const fs::path hosts =
      fs::temp_directory_path() / ("ssh_scripts_hosts_" + std::to_string(getpid()));
  ASSERT_TRUE(WriteFileAtomically(hosts.string(), "127.0.0.1 localhost\n192.168.1.5 nas\n").ok());
  auto run = [&](const std::string& block) {
    const std::string script =
        absl::StrReplaceAll(RenderHostsUpdate(block), {{"/etc/hosts", hosts.string()}});
    auto [out, ok] = Bash("set -eu\n" + script);
    EXPECT_TRUE(ok) << out;
    return *ReadFile(hosts.string());
  };
  EXPECT_EQ(run("10.0.0.1 a\n"), "127.0.0.1 localhost\n192.168.1.5 nas\n" + std::string(kHostsBegin) +
                                     "\n10.0.0.1 a\n" + kHostsEnd + "\n");
  EXPECT_EQ(run("10.0.0.2 b\n"), "127.0.0.1 localhost\n192.168.1.5 nas\n" + std::string(kHostsBegin) +
                                     "\n10.0.0.2 b\n" + kHostsEnd + "\n");
  EXPECT_EQ(run(""), "127.0.0.1 localhost\n192.168.1.5 nas\n");
  fs::remove(hosts);
}

TEST(SshScripts, IdentityWritesTheNodesFilesAndStartsTheAgent) {
  IdentityInputs in;
  in.instance_id = "i-0123456789abcdef0";
  in.cluster_id = "abc";
  in.hostname = "ip-10-250-0-11";
  in.agent_env = "HF_AGENT_URL=https://10.250.0.1:9443\nHF_AGENT_CERT_SHA256=ff\n";
  in.munge_key = std::string("\x00\x01key", 5);
  in.hosts_block = "10.250.0.11 ip-10-250-0-11\n";
  in.bundle_dir = "/tmp/bucket/lcs/";
  in.ami_facts = AmiFactsFiles{"Package: libnvidia-compute-595\n", "deb [trusted=yes] file:/x ./\n",
                               "6.1.0-test", "\x7f" "ELF"};
  const std::string s = RenderIdentityScript(in);
  EXPECT_EQ(BashSyntaxError(s), "");
  EXPECT_TRUE(absl::StrContains(s, absl::Base64Escape(in.agent_env).substr(0, 76)));  // wrapped at 76
  EXPECT_TRUE(absl::StrContains(s, "chmod 600 '/etc/hyperfleet/agent.env.hf-new'"));
  EXPECT_TRUE(absl::StrContains(s, "chmod 400 '/etc/munge/munge.key.hf-new'"));
  EXPECT_TRUE(absl::StrContains(s, absl::Base64Escape(in.munge_key)));
  EXPECT_TRUE(absl::StrContains(s, "hostname 'ip-10-250-0-11'"));
  EXPECT_TRUE(absl::StrContains(s, "/lib/modules/6.1.0-test/kernel/drivers/video"));
  EXPECT_TRUE(absl::StrContains(s, "depmod '6.1.0-test'"));
  EXPECT_TRUE(absl::StrContains(s, absl::Base64Escape("instance_id=i-0123456789abcdef0\ncluster_id=abc\n"
                                                      "bundle_dir=/tmp/bucket/lcs/\n").substr(0, 76)));
  // The agent starts last, after its env file and the munge key are in place.
  EXPECT_LT(s.find("agent.env"), s.find("systemctl enable hyperfleet-agent.service"));
  EXPECT_LT(s.find("systemctl restart munge.service"), s.find("systemctl restart hyperfleet-agent"));
  in.ami_facts.reset();
  EXPECT_FALSE(absl::StrContains(RenderIdentityScript(in), "depmod"));
}

TEST(SshScripts, CleanupRemovesWhatProvisioningAddedAndRestoresTheRest) {
  const std::string s = RenderCleanupScript();
  EXPECT_EQ(BashSyntaxError(s), "");
  for (const char* needle :
       {"systemctl disable --now $units", "rm -rf /opt/ml/config /etc/hyperfleet /opt/hyperfleet",
        "hyperfleet-agent.service slurmd.service slurmctld.service slurmdbd.service",
        "cat \"$S/hostname\" > /etc/hostname", "cp -p \"$S/munge.key\" /etc/munge/munge.key",
        "head -c 1024 /dev/urandom > /etc/munge/munge.key", "@@clean"}) {
    EXPECT_TRUE(absl::StrContains(s, needle)) << needle;
  }
  // The IMDS address a killed agent left on lo goes (only from lo, and only when nothing
  // answers there any more).
  EXPECT_TRUE(absl::StrContains(s, "ip addr del 169.254.169.254/32 dev lo 2>/dev/null || true"));
  EXPECT_TRUE(absl::StrContains(s, "! timeout 2 bash -c ': </dev/tcp/169.254.169.254/80'"));
  EXPECT_LT(s.find("systemctl disable --now $units"), s.find("ip addr del 169.254.169.254"));
  // The bundle directory is removed only when it lies below /tmp.
  EXPECT_TRUE(absl::StrContains(s, "case \"$bundle_dir\" in /tmp/?*/*) rm -rf -- \"$bundle_dir\""));
}

TEST(SshScripts, TheProbeReadsThisHostsFacts) {
  auto [out, ok] = Bash(RenderProbeScript());
  ASSERT_TRUE(ok) << out;
  auto facts = ParseMachineFacts(out);
  ASSERT_TRUE(facts.ok()) << facts.status();
  auto boot_id = ReadFile("/proc/sys/kernel/random/boot_id");
  ASSERT_TRUE(boot_id.ok());
  EXPECT_EQ(facts->boot_id + "\n", *boot_id);
  EXPECT_GT(facts->btime, 1000000000);
  EXPECT_GE(facts->init_start, facts->btime);  // PID 1 starts after the kernel boots
  EXPECT_FALSE(facts->kernel_release.empty());
  EXPECT_GT(facts->disk_free_kib, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseMachineFacts("btime=1\n").status()));
}

TEST(SshScripts, LastStepNamesWhereAScriptStopped) {
  EXPECT_EQ(LastStep("@@step record\nx\n@@step packages\nE: Unable to locate package\n"),
            "packages");
  EXPECT_EQ(LastStep("nothing"), "");
}

}  // namespace
}  // namespace hf::provider::ssh_scripts
