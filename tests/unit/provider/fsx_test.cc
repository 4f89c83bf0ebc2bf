// The ssh provider's default /fsx (src/provider/ssh/fsx_mount.h, fsx_plan.h).
//
// PlanFsx is pure and table-tested. FsxMount runs for real: the sandboxed sftp-server, sshfs
// in passive mode and FUSE mounts on this host (root, sshfs, bwrap and /dev/fuse; skipped
// otherwise). Here the "machine" is this host, its command run by sh instead of ssh: what
// ssh adds is covered by FsxMachines, which runs when tests/e2e/it_fsx.py hands it real
// test machines (HF_FSX_MACHINES, a JSON file) and is skipped otherwise.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <mutex>
#include <string>
#include <vector>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/ssh/ssh_client.h"
#include "provider/ssh/fsx_mount.h"
#include "provider/ssh/fsx_plan.h"
#include "provider/ssh/scripts.h"

namespace hf::provider::ssh {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// ---- PlanFsx (pure) -------------------------------------------------------------------------

TEST(PlanFsx, ChoosesWhoProvidesFsx) {
  struct Case {
    std::string params, mount_line;
    FsxSource want;
  } cases[] = {
      {"", "", FsxSource::kDefault},
      {R"({"workload_manager":"slurm"})", "", FsxSource::kDefault},
      // Ours, from an earlier connection: mounted again.
      {"{}", "hyperfleet-fsx fuse.sshfs", FsxSource::kDefault},
      // HyperPod's keys: the lifecycle scripts mount FSx for Lustre.
      {R"({"fsx_dns_name":"fs-1.fsx.us-west-2.amazonaws.com","fsx_mountname":"abc"})", "",
       FsxSource::kLifecycleScripts},
      {R"({"fsx_dns_name":"fs-1","fsx_mountname":"abc"})", "10.0.0.5:/srv/fsx nfs4",
       FsxSource::kLifecycleScripts},
      // The operator's own mount on the machine stays.
      {"{}", "10.0.0.5:/srv/fsx nfs4", FsxSource::kMachine},
      {"", "fs-1@tcp:/abc lustre", FsxSource::kMachine},
  };
  for (const Case& c : cases) {
    auto plan = PlanFsx(c.params, c.mount_line);
    ASSERT_TRUE(plan.ok()) << c.params << " | " << plan.status();
    EXPECT_EQ(plan->source, c.want) << c.params << " | " << c.mount_line;
    EXPECT_FALSE(plan->reason.empty());
  }
}

TEST(PlanFsx, RefusesBadParameters) {
  for (const char* params : {"[1]", "not json", R"({"fsx_dns_name":"fs-1"})",
                             R"({"fsx_mountname":"abc"})",
                             R"({"fsx_dns_name":"","fsx_mountname":"abc"})",
                             R"({"fsx_dns_name":7,"fsx_mountname":"abc"})"}) {
    auto plan = PlanFsx(params, "");
    ASSERT_FALSE(plan.ok()) << params;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << params;
  }
}

TEST(FsxCommands, RunSshfsInPassiveModeInTheForeground) {
  EXPECT_NE(FsxRemoteCommand("/fsx").find("exec sshfs -f -o passive,"), std::string::npos);
}

TEST(FsxMount, RefusesBadOptions) {
  FsxMountOptions o;
  o.export_dir = "/tmp/x";
  o.sandbox_dir = "/tmp/y";
  o.start_remote = [](std::string_view, Stdio, Stdio, Stdio) -> StatusOr<Subprocess> {
    return absl::InternalError("unused");
  };
  for (const char* mp : {"fsx", "/", "/fsx/", "/a b", "/a'b", "/a/../b", "/a;b"}) {
    o.mount_point = mp;
    auto m = FsxMount::Start(o);
    ASSERT_FALSE(m.ok()) << mp;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << mp;
  }
}

// ---- FsxMount on this host ------------------------------------------------------------------

bool CanMount() {
  return geteuid() == 0 && access("/dev/fuse", R_OK | W_OK) == 0 &&
         access("/usr/bin/sshfs", X_OK) == 0 && access("/usr/bin/bwrap", X_OK) == 0 &&
         access("/usr/lib/openssh/sftp-server", X_OK) == 0;
}

std::string Slurp(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : "<" + std::string(text.status().message()) + ">";
}

/// Runs `script` with sh here; true when it exits 0.
bool Sh(const std::string& script, std::string* out = nullptr) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  auto r = RunProcess(spec, RunOptions{.timeout = 30s});
  if (out != nullptr && r.ok()) *out = r->out;
  return r.ok() && r->ok();
}

/// The export, the sandbox and a mount point per "machine" under one temporary directory;
/// everything unmounted and removed at the end.
class HostFsx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanMount()) GTEST_SKIP() << "needs root, /dev/fuse, sshfs, bwrap and sftp-server";
    char tmpl[] = "/tmp/hf-fsx-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  }
  void TearDown() override {
    mounts_.clear();  // stops them
    if (dir_.empty()) return;
    for (const std::string& mp : mount_points_) Sh(FsxCleanupCommand(mp));
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// A started mount at <dir>/<name> ("a machine"); `pids` collects what the fake ssh started.
  FsxMount& Mount(const std::string& name, std::chrono::milliseconds retry_min = 200ms) {
    FsxMountOptions o;
    o.export_dir = dir_ + "/export";
    o.sandbox_dir = dir_ + "/sandbox";
    o.mount_point = dir_ + "/" + name;
    o.retry_min = retry_min;
    o.log_name = name;
    o.start_remote = [this](std::string_view command, Stdio in, Stdio out,
                            Stdio err) -> StatusOr<Subprocess> {
      ProcessSpec spec;
      spec.argv = {"/bin/sh", "-c", std::string(command)};
      spec.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
      spec.in = in;
      spec.out = out;
      spec.err = err;
      spec.group = ProcessGroup::kNewGroup;
      auto p = Subprocess::Spawn(spec);
      if (p.ok()) {
        std::lock_guard lock(mu_);
        remote_pids_.push_back(p->pid());
      }
      return p;
    };
    mount_points_.push_back(o.mount_point);
    auto m = FsxMount::Start(o);
    EXPECT_TRUE(m.ok()) << m.status();
    mounts_.push_back(std::move(*m));
    return *mounts_.back();
  }

  pid_t LastRemotePid() {
    std::lock_guard lock(mu_);
    return remote_pids_.empty() ? -1 : remote_pids_.back();
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<pid_t> remote_pids_;
  std::vector<std::string> mount_points_;
  std::vector<std::unique_ptr<FsxMount>> mounts_;
};

TEST_F(HostFsx, TwoMachinesShareTheExport) {
  FsxMount& a = Mount("a");
  FsxMount& b = Mount("b");
  ASSERT_TRUE(a.WaitMounted(20s)) << a.state().last_error;
  ASSERT_TRUE(b.WaitMounted(20s)) << b.state().last_error;
  std::string mounts;
  ASSERT_TRUE(Sh("grep ' " + dir_ + "/a fuse.sshfs ' /proc/mounts", &mounts));
  EXPECT_EQ(mounts.rfind(std::string(kFsxFsname) + " ", 0), 0u) << mounts;

  ASSERT_TRUE(WriteFileAtomically(dir_ + "/a/from-a", "written on a\n").ok());
  EXPECT_EQ(Slurp(dir_ + "/b/from-a"), "written on a\n");
  EXPECT_EQ(Slurp(dir_ + "/export/from-a"), "written on a\n");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/export/from-host", "host\n").ok());
  EXPECT_EQ(Slurp(dir_ + "/a/from-host"), "host\n");
  // Ownership passes through: the lifecycle scripts chown /fsx/ubuntu.
  ASSERT_TRUE(Sh("mkdir " + dir_ + "/a/ubuntu && chown 1000:1000 " + dir_ + "/a/ubuntu"));
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/export/ubuntu").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
}

TEST_F(HostFsx, MountsAgainWhenTheConnectionDies) {
  FsxMount& a = Mount("a");
  ASSERT_TRUE(a.WaitMounted(20s)) << a.state().last_error;
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/a/kept", "kept\n").ok());

  // The sshfs side killed outright (its mount left stale), as when a machine's process dies.
  ASSERT_EQ(kill(-LastRemotePid(), SIGKILL), 0);
  ASSERT_TRUE(a.WaitRemounted(1, 20s)) << a.state().last_error;
  EXPECT_EQ(Slurp(dir_ + "/a/kept"), "kept\n");

  // The sftp-server's side gone, as when the control plane's ssh connection drops.
  std::string pids;
  ASSERT_TRUE(Sh("pgrep -f '^bwrap .*--bind " + dir_ + "/export /fsx'", &pids));
  ASSERT_TRUE(Sh("kill -9 " + pids.substr(0, pids.find('\n'))));
  ASSERT_TRUE(a.WaitRemounted(2, 20s)) << a.state().last_error;
  EXPECT_EQ(Slurp(dir_ + "/a/kept"), "kept\n");
  EXPECT_EQ(a.state().mounts, 3);
}

TEST_F(HostFsx, WritesFailWhileUnmountedAndCleanupLeavesAPlainDirectory) {
  FsxMount& a = Mount("a");
  ASSERT_TRUE(a.WaitMounted(20s)) << a.state().last_error;
  a.Stop();
  // sshfs goes once it has seen its connection end (after Stop() returns, as on a machine);
  // the read-only bind under it keeps writes off the machine's disk.
  std::string mounts;
  const auto t0 = std::chrono::steady_clock::now();
  do {  // bounded poll: nothing tells this process when the machine's sshfs has unmounted
    ASSERT_TRUE(Sh("grep ' " + dir_ + "/a ' /proc/mounts || true", &mounts));
  } while (mounts.find("fuse.sshfs") != std::string::npos &&
           std::chrono::steady_clock::now() - t0 < 10s &&
           (std::this_thread::sleep_for(20ms), true));
  EXPECT_EQ(mounts.find("fuse.sshfs"), std::string::npos) << mounts;
  const int fd = open((dir_ + "/a/lost").c_str(), O_CREAT | O_WRONLY, 0644);
  EXPECT_LT(fd, 0);
  EXPECT_EQ(errno, EROFS);
  if (fd >= 0) close(fd);

  ASSERT_TRUE(Sh(FsxCleanupCommand(dir_ + "/a")));
  ASSERT_TRUE(Sh("grep ' " + dir_ + "/a ' /proc/mounts || true", &mounts));
  EXPECT_EQ(mounts, "");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/a/local", "x").ok());
  // The probe sees nothing there now, so the plan is the default again.
  std::string line;
  ASSERT_TRUE(Sh(FsxMountProbeCommand(dir_ + "/a"), &line));
  EXPECT_EQ(line, "");
}

TEST_F(HostFsx, ProbeTellsOursFromTheOperatorsMount) {
  FsxMount& a = Mount("a");
  ASSERT_TRUE(a.WaitMounted(20s)) << a.state().last_error;
  std::string line;
  ASSERT_TRUE(Sh(FsxMountProbeCommand(dir_ + "/a"), &line));
  EXPECT_EQ(line, std::string(kFsxFsname) + " fuse.sshfs\n");
  EXPECT_EQ(PlanFsx("", line)->source, FsxSource::kDefault);
  // An operator's own mount (a tmpfs standing in for NFS) is kept.
  ASSERT_TRUE(Sh("mkdir -p " + dir_ + "/own && mount -t tmpfs operator-fs " + dir_ + "/own"));
  mount_points_.push_back(dir_ + "/own");
  ASSERT_TRUE(Sh(FsxMountProbeCommand(dir_ + "/own"), &line));
  EXPECT_EQ(line, "operator-fs tmpfs\n");
  EXPECT_EQ(PlanFsx("", line)->source, FsxSource::kMachine);
  // Cleanup never removes the operator's mount.
  ASSERT_TRUE(Sh(FsxCleanupCommand(dir_ + "/own")));
  ASSERT_TRUE(Sh("grep -q ' " + dir_ + "/own tmpfs ' /proc/mounts"));
  ASSERT_TRUE(Sh("umount " + dir_ + "/own"));
}

/// The lifecycle scripts mount their own FSx over ours (as HyperPod's mount_fsx.sh would): a
/// re-mount or a cleanup never takes theirs away.
TEST_F(HostFsx, AFileSystemMountedOverOursIsLeftAlone) {
  FsxMount& a = Mount("a");
  ASSERT_TRUE(a.WaitMounted(20s)) << a.state().last_error;
  const std::string mp = dir_ + "/a";
  mount_points_.push_back(mp);  // TearDown's cleanup must leave theirs too: it is unmounted here
  ASSERT_TRUE(Sh("mount -t tmpfs their-fsx " + mp + " && echo theirs > " + mp + "/t"));
  ASSERT_EQ(kill(-LastRemotePid(), SIGKILL), 0);  // our sshfs (under theirs) dies
  const auto t0 = std::chrono::steady_clock::now();
  while (a.state().last_error.find("another file system on top") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < 20s) {
    std::this_thread::sleep_for(50ms);  // bounded poll of the supervisor's state
  }
  EXPECT_NE(a.state().last_error.find("(other their-fsx tmpfs)"), std::string::npos)
      << a.state().last_error;
  EXPECT_EQ(Slurp(mp + "/t"), "theirs\n");
  ASSERT_TRUE(Sh(FsxCleanupCommand(mp)));
  EXPECT_EQ(Slurp(mp + "/t"), "theirs\n");
  a.Stop();
  ASSERT_TRUE(Sh("umount " + mp));
  // Now ours are on top again (the stale sshfs, the bind): the cleanup takes them.
  ASSERT_TRUE(Sh(FsxCleanupCommand(mp)));
  std::string left;
  ASSERT_TRUE(Sh("grep ' " + mp + " ' /proc/mounts || true", &left));
  EXPECT_EQ(left, "");
}

/// The sandbox as root on a node could reach it by speaking SFTP itself (OpenSSH's sftp
/// client, its "ssh" replaced by the sandbox): only the export, /usr, /dev and two files.
TEST_F(HostFsx, TheSandboxSeesOnlyTheExport) {
  ASSERT_TRUE(MakeDirs(dir_ + "/export", 0755).ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/sandbox", 0700).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/sandbox/passwd", "root:x:0:0:root:/fsx:/bin/false\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/sandbox/group", "root:x:0:\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/export/shared", "shared\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/host-secret", "secret\n").ok());
  std::string wrapper = "#!/bin/sh\nexec";
  for (const std::string& arg : FsxSandboxArgv(dir_ + "/export", dir_ + "/sandbox")) {
    wrapper += " '" + arg + "'";
  }
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/fake-ssh", wrapper + "\n", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(
                  dir_ + "/batch",
                  "ls -1a /\nls -1 /etc\nget /fsx/shared " + dir_ + "/got-shared\n-get " + dir_ +
                      "/host-secret " + dir_ + "/got-secret\n-get /etc/shadow " + dir_ +
                      "/got-shadow\n-get /proc/1/environ " + dir_ + "/got-environ\n")
                  .ok());
  std::string out;
  ASSERT_TRUE(Sh("sftp -q -S " + dir_ + "/fake-ssh -b " + dir_ + "/batch sandbox", &out)) << out;
  EXPECT_EQ(Slurp(dir_ + "/got-shared"), "shared\n");
  EXPECT_FALSE(fs::exists(dir_ + "/got-secret")) << out;
  EXPECT_FALSE(fs::exists(dir_ + "/got-shadow")) << out;
  EXPECT_FALSE(fs::exists(dir_ + "/got-environ")) << out;
  // The root listing: nothing of the host's but /usr.
  for (const char* absent : {"/root", "/home", "/var", "/tmp", "/proc", "/run", "/srv"}) {
    EXPECT_EQ(out.find(std::string("\n") + absent + "\n"), std::string::npos) << absent << out;
  }
  EXPECT_NE(out.find("/fsx\n"), std::string::npos) << out;
  // /etc holds the sandbox's two files only.
  EXPECT_NE(out.find("/etc/group\n/etc/passwd\n"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

// ---- FsxMount on real test machines (tests/e2e/it_fsx.py) -----------------------------------

struct TestMachine {
  hf::ssh::SshTarget target;
  std::string name;
};

std::vector<TestMachine> MachinesFromEnv(std::string* export_dir) {
  std::vector<TestMachine> machines;
  const char* path = std::getenv("HF_FSX_MACHINES");
  if (path == nullptr) return machines;
  auto text = ReadFile(path);
  if (!text.ok()) return machines;
  const auto json = nlohmann::json::parse(*text);
  *export_dir = json.at("export_dir").get<std::string>();
  for (const auto& m : json.at("machines")) {
    TestMachine t;
    t.name = m.at("name").get<std::string>();
    t.target.address = m.at("address").get<std::string>();
    t.target.identity_file = m.at("identity_file").get<std::string>();
    t.target.known_hosts_file = m.at("known_hosts_file").get<std::string>();
    t.target.user = m.value("user", "root");  // another user mounts through sudo -n
    t.target.connect_timeout_seconds = 5;
    machines.push_back(std::move(t));
  }
  return machines;
}

/// Runs `command` as root on the machine (through sudo -n for another ssh user).
StatusOr<std::string> OnMachine(const TestMachine& m, const std::string& command) {
  HF_ASSIGN_OR_RETURN(auto r, hf::ssh::Run(m.target,
                                           ssh_scripts::RootCommand(m.target.user, command),
                                           "", 60s));
  if (r.exit_code != 0) {
    return absl::InternalError(m.name + ": " + command + " exited " +
                               std::to_string(r.exit_code) + ": " + r.err);
  }
  return r.out;
}

TEST(FsxMachines, TwoMachinesMountTheExportOverSsh) {
  std::string export_dir;
  const std::vector<TestMachine> machines = MachinesFromEnv(&export_dir);
  if (machines.size() < 2) GTEST_SKIP() << "run by tests/e2e/it_fsx.py (HF_FSX_MACHINES)";
  std::vector<std::unique_ptr<FsxMount>> mounts;
  std::vector<std::chrono::milliseconds> took;
  for (const TestMachine& m : machines) {
    FsxMountOptions o;
    o.export_dir = export_dir;
    o.sandbox_dir = export_dir + "-sandbox";
    o.log_name = m.name;
    o.user = m.target.user;
    o.start_remote = [target = m.target](std::string_view command, Stdio in, Stdio out,
                                         Stdio err) {
      return hf::ssh::Start(target, command, in, out, err);
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto mount = FsxMount::Start(o);
    ASSERT_TRUE(mount.ok()) << mount.status();
    ASSERT_TRUE((*mount)->WaitMounted(30s)) << m.name << ": " << (*mount)->state().last_error;
    took.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - t0));
    mounts.push_back(std::move(*mount));
  }
  std::printf("FSX-FIGURE mount %lld ms (%s), %lld ms (%s)\n",
              static_cast<long long>(took[0].count()), machines[0].name.c_str(),
              static_cast<long long>(took[1].count()), machines[1].name.c_str());
  const TestMachine& a = machines[0];
  const TestMachine& b = machines[1];
  // Written on one, read on the other and on the host.
  ASSERT_TRUE(OnMachine(a, "echo from-" + a.name + " > /fsx/a.txt").ok());
  auto read = OnMachine(b, "cat /fsx/a.txt");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "from-" + a.name + "\n");
  EXPECT_EQ(Slurp(export_dir + "/a.txt"), "from-" + a.name + "\n");
  // Root on the node reaches nothing of the host's outside the export through the mount:
  // paths resolve on the node, and the server sees only the export.
  auto outside = OnMachine(a, "ls -a /fsx/.. | grep -c . ; cat /fsx/../../etc/hostname");
  ASSERT_TRUE(outside.ok()) << outside.status();
  EXPECT_NE(outside->find(a.name), std::string::npos) << *outside;  // its own /etc/hostname
  // Throughput: 64 MiB written and read back through the mount.
  auto dd = OnMachine(a, "dd if=/dev/zero of=/fsx/dd.bin bs=1M count=64 conv=fsync 2>&1 | "
                         "tail -1; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; "
                         "dd if=/fsx/dd.bin of=/dev/null bs=1M 2>&1 | tail -1; rm /fsx/dd.bin");
  ASSERT_TRUE(dd.ok()) << dd.status();
  std::printf("FSX-FIGURE dd 64 MiB write, read:\n%s", dd->c_str());

  // The connection killed (sshfs on the machine killed outright): mounted again.
  const int before = mounts[0]->state().mounts;
  ASSERT_TRUE(OnMachine(a, "pkill -KILL -x sshfs").ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(mounts[0]->WaitRemounted(before, 30s)) << mounts[0]->state().last_error;
  std::printf("FSX-FIGURE re-mount after sshfs was killed: %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - t0)
                                         .count()));
  read = OnMachine(a, "cat /fsx/a.txt");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "from-" + a.name + "\n");

  // The control plane's ssh connection killed here (as when the control plane dies): sshfs
  // on the machine sees it end, unmounts, and the supervisor mounts again.
  const int before_ssh = mounts[0]->state().mounts;
  std::string pids;
  ASSERT_TRUE(Sh("pgrep -f '^ssh .*root@" + a.target.address + " .*sshfs -f -o passive'", &pids));
  ASSERT_TRUE(Sh("kill -9 " + pids.substr(0, pids.find('\n'))));
  ASSERT_TRUE(mounts[0]->WaitRemounted(before_ssh, 30s)) << mounts[0]->state().last_error;
  read = OnMachine(a, "cat /fsx/a.txt");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "from-" + a.name + "\n");

  // A reboot of the other machine: its /fsx comes back once it answers ssh again.
  const int before_reboot = mounts[1]->state().mounts;
  (void)OnMachine(b, "systemctl reboot");  // its connection may just end
  const auto rebooted = std::chrono::steady_clock::now();
  ASSERT_TRUE(mounts[1]->WaitRemounted(before_reboot, 90s)) << mounts[1]->state().last_error;
  std::printf("FSX-FIGURE re-mount after a reboot: %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - rebooted)
                                         .count()));
  read = OnMachine(b, "cat /fsx/a.txt");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "from-" + a.name + "\n");

  // A dead network (it_fsx.py takes the machine's link down when asked on stdout and says
  // so on stdin): ssh notices (ServerAliveInterval 5 s x 3), and once the link is back the
  // supervisor mounts again; the machine's old sshfs, still hanging, is unmounted under it.
  if (std::getenv("HF_FSX_LINK_CONTROL") != nullptr) {
    const int before_link = mounts[0]->state().mounts;
    std::printf("FSX-LINK-DOWN %s\n", a.name.c_str());
    std::fflush(stdout);
    std::string answer;
    ASSERT_TRUE(std::getline(std::cin, answer) && answer == "down") << answer;
    const auto down = std::chrono::steady_clock::now();
    // Bounded poll of the supervisor's state: it has no "unmounted" wait of its own.
    while (mounts[0]->state().mounted &&
           std::chrono::steady_clock::now() - down < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(mounts[0]->state().mounted) << "ssh never noticed the dead link";
    const auto lost = std::chrono::steady_clock::now();
    std::printf("FSX-FIGURE dead link noticed after %lld ms\nFSX-LINK-UP %s\n",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(lost - down).count()),
                a.name.c_str());
    std::fflush(stdout);
    ASSERT_TRUE(std::getline(std::cin, answer) && answer == "up") << answer;
    const auto up = std::chrono::steady_clock::now();
    ASSERT_TRUE(mounts[0]->WaitRemounted(before_link, 60s)) << mounts[0]->state().last_error;
    std::printf("FSX-FIGURE re-mount after the link came back: %lld ms\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - up)
                                           .count()));
    read = OnMachine(a, "cat /fsx/a.txt");
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, "from-" + a.name + "\n");
  }

  // Stopped and cleaned: nothing of Hyperfleet's mounted on the machine.
  for (size_t i = 0; i < machines.size(); ++i) {
    mounts[i]->Stop();
    ASSERT_TRUE(OnMachine(machines[i], FsxCleanupCommand("/fsx")).ok());
    auto left = OnMachine(machines[i], "grep ' /fsx ' /proc/mounts || true");
    ASSERT_TRUE(left.ok());
    EXPECT_EQ(*left, "") << machines[i].name;
  }
}

}  // namespace
}  // namespace hf::provider::ssh
