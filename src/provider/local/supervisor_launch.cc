// LocalProvider, the node supervisor (local_provider_impl.h): started detached, in a session
// of its own, so that the node outlives the server (a killed server leaves its nodes
// running; the next one adopts them); found again through its pid file; its node's init.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/local_provider_impl.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::optional<int> LocalProvider::Impl::supervisorPid(std::string_view id) const {
  const std::string dir = nodeDir(id);
  auto pid = local::ReadPidFile(dir + "/supervisor.pid");
  if (pid && local::ProcessMatches(*pid, {"node-supervisor", dir})) return pid;
  return std::nullopt;
}

Status LocalProvider::Impl::confirmSupervisorGone(std::string_view id) const {
  const std::string dir = nodeDir(id);
  const std::string pid_file = dir + "/supervisor.pid";
  auto unknown = [&](const Status& why) {
    return absl::UnavailableError(absl::StrCat("cannot tell whether node ", std::string(id),
                                               " runs: ", why.message()));
  };
  auto text = ReadFile(pid_file);
  if (absl::IsNotFound(text.status())) return absl::OkStatus();
  if (!text.ok()) return unknown(text.status());
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 0) {
    return absl::OkStatus();  // a torn pid file: never written by a running supervisor
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) return absl::OkStatus();
  auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (absl::IsNotFound(cmdline.status())) return absl::OkStatus();
  if (!cmdline.ok()) return unknown(cmdline.status());
  if (cmdline->empty()) return absl::OkStatus();  // a zombie
  if (cmdline->find("node-supervisor") == std::string::npos ||
      cmdline->find(dir) == std::string::npos) {
    return absl::OkStatus();  // the pid was reused
  }
  return unknown(absl::InternalError("its supervisor runs but was not found a moment ago"));
}

StatusOr<int> LocalProvider::Impl::initPid(std::string_view id) const {
  auto sup = supervisorPid(id);
  if (!sup) return absl::NotFoundError("node " + std::string(id) + " is not running");
  for (int nspawn : local::ChildPids(*sup)) {
    for (int init : local::ChildPids(nspawn)) {
      auto comm = ReadFile(absl::StrCat("/proc/", init, "/comm"));
      if (comm.ok() && absl::StripAsciiWhitespace(*comm) == "systemd") return init;
    }
  }
  return absl::NotFoundError("node " + std::string(id) + " has no running systemd");
}

// Starts `<supervisor> <node-dir>` in a new session (no terminal, no process group of the
// server's), in "/", stdin /dev/null, output appended to console.log. It is this server's
// child until the server exits: reapSupervisors() collects it when it ends, and the
// destructor releases it, so that it runs on.
Status LocalProvider::Impl::startSupervisor(const std::string& dir) {
  unlink((dir + "/supervisor.pid").c_str());
  ProcessSpec spec;
  spec.argv = options_.supervisor_command;
  if (spec.argv.empty()) spec.argv = {options_.hyperfleet_binary, "node-supervisor"};
  spec.argv.push_back(dir);
  spec.cwd = "/";
  spec.group = ProcessGroup::kNewSession;
  const std::string console = dir + "/console.log";
  const int out = open(console.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", console, ": ", std::strerror(errno)));
  }
  spec.out = Stdio::Fd(out);
  spec.err = Stdio::Stdout();
  auto supervisor = Subprocess::Spawn(spec);
  close(out);
  HF_RETURN_IF_ERROR(supervisor.status());
  const std::string id = fs::path(dir).filename().string();
  reapSupervisors();
  {
    std::lock_guard lock(supervisors_mu_);
    auto it = supervisors_.find(id);
    if (it != supervisors_.end()) {
      // An earlier supervisor of this node that has not ended yet (it was killed): left to
      // init rather than waited for here.
      if (!it->second.TryWait()) (void)it->second.Release();
      supervisors_.erase(it);
    }
    supervisors_.emplace(id, *std::move(supervisor));
  }
  if (!local::WaitFor([&] { return supervisorPid(id).has_value(); }, 10s)) {
    return absl::InternalError(
        absl::StrCat("the node supervisor did not start (see ", console, ")"));
  }
  return absl::OkStatus();
}

void LocalProvider::Impl::reapSupervisors() {
  std::lock_guard lock(supervisors_mu_);
  for (auto it = supervisors_.begin(); it != supervisors_.end();) {
    it = it->second.TryWait() ? supervisors_.erase(it) : std::next(it);
  }
}

}  // namespace hf::provider
