// SshProvider, one node's work over ssh (ssh_provider_impl.h): a machine granted through
// hf_pool, the base layer and binary (skipped for a ready hot spare), the node's identity,
// reboot with a new boot id, and cleanup and release (or quarantine) at the end.
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/random.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/ami_facts.h"
#include "provider/ssh/ssh_provider_impl.h"

namespace hf::provider {
namespace fs = std::filesystem;
namespace sc = ssh_scripts;
using Phase = SshProvider::Impl::Phase;

namespace {

/// The last `n` bytes of `s`, for messages.
std::string Tail(std::string_view s, size_t n = 400) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s.size() > n ? s.substr(s.size() - n) : s);
}

/// When the machine booted: its init's start, else the kernel's boot time.
SystemTime BootTime(const sc::MachineFacts& f) {
  return SystemTime(std::chrono::seconds(f.init_start > 0 ? f.init_start : f.btime));
}

/// EM_* of a `uname -m` machine (elf.h): the stand-in module's header.
int ElfMachineOf(std::string_view machine) {
  if (machine == "x86_64") return 62;    // EM_X86_64
  if (machine == "aarch64") return 183;  // EM_AARCH64
  return 0;
}

}  // namespace

hf::ssh::SshTarget SshProvider::Impl::targetOf(const MachineAccess& a) const {
  hf::ssh::SshTarget t;
  t.address = a.address;
  t.port = a.port;
  t.user = a.user;
  t.identity_file = a.identity_file;
  t.known_hosts_file = a.known_hosts_file;
  return t;
}

pool::PoolPolicy SshProvider::Impl::policyNow() {
  pool::PoolPolicy p = options_.policy;
  if (auto targets = options_.inventory->spareTargets(); targets.ok()) p.spare_target = *targets;
  return p;
}

void SshProvider::Impl::emit(SshProviderEvent event) {
  spdlog::info("ssh provider: {}", event.message);
  if (options_.on_event) options_.on_event(event);
}

StatusOr<hf::ssh::SshResult> SshProvider::Impl::runStep(const hf::ssh::SshTarget& target,
                                                    const std::string& step,
                                                    const std::string& command,
                                                    std::string_view input) {
  Status last;
  for (int attempt = 1; attempt <= std::max(1, options_.step_attempts); ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(options_.retry_delay);  // back-off, not sync
    auto r = options_.ssh_run(target, command, input, options_.step_timeout);
    if (!r.ok()) {
      last = r.status();
      if (absl::IsUnavailable(last) || absl::IsDeadlineExceeded(last)) {
        spdlog::info("ssh provider: {} on {}: attempt {} failed: {}", step, target.address,
                     attempt, std::string(last.message()));
        continue;  // the connection dropped: the scripts are idempotent, run it again
      }
      return last;
    }
    if (r->exit_code != 0) {
      std::string reached = sc::LastStep(r->out);
      return absl::InternalError(absl::StrCat(
          "step ", reached.empty() ? std::string(step) : reached, " on ", target.address,
          " failed (exit ", r->exit_code, "): ", Tail(r->err.empty() ? r->out : r->err)));
    }
    return r;
  }
  return absl::UnavailableError(absl::StrCat("step ", step, " on ", target.address, ": ssh failed ",
                                             options_.step_attempts, " times: ", last.message()));
}

StatusOr<sc::MachineFacts> SshProvider::Impl::probe(const hf::ssh::SshTarget& target) {
  HF_ASSIGN_OR_RETURN(auto r, runStep(target, "probe", sc::RootShell(target.user),
                                      sc::RenderProbeScript()));
  return sc::ParseMachineFacts(r.out);
}

Status SshProvider::Impl::provisionBase(const hf::ssh::SshTarget& target, const std::string& user) {
  HF_RETURN_IF_ERROR(runStep(target, "base", sc::RootShell(user), base_script_).status());
  HF_ASSIGN_OR_RETURN(auto facts, probe(target));
  if (facts.binary_sha256 == binary_sha_) return absl::OkStatus();
  return runStep(target, "binary",
                 sc::RootCommand(user, sc::RenderBinaryInstallScript(binary_sha_)), binary_)
      .status();
}

StatusOr<std::string> SshProvider::Impl::mungeKey(const std::string& cluster_id) {
  std::lock_guard lock(cluster_mu_);
  const std::string dir = absl::StrCat(root_, "/clusters/", cluster_id);
  const std::string path = dir + "/munge.key";
  if (!fs::exists(path)) {
    HF_RETURN_IF_ERROR(MakeDirs(dir));
    // One key per cluster, as HyperPod gives every node of a cluster the same key.
    HF_RETURN_IF_ERROR(WriteFileAtomically(path, RandomHex(512), 0400));
  }
  return ReadFile(path);
}

void SshProvider::Impl::forgetCluster(const std::string& cluster_id) {
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, rec] : nodes_) {
      if (rec->spec.cluster_id == cluster_id) return;
    }
  }
  std::lock_guard lock(cluster_mu_);
  std::error_code ec;
  fs::remove_all(absl::StrCat(root_, "/clusters/", cluster_id), ec);
}

Status SshProvider::Impl::writeIdentity(const NodeRec& rec, const hf::ssh::SshTarget& target) {
  HF_ASSIGN_OR_RETURN(auto facts, probe(target));
  sc::IdentityInputs in;
  in.instance_id = rec.spec.instance_id;
  in.cluster_id = rec.spec.cluster_id;
  in.hostname = rec.hostname;
  in.agent_env = absl::StrCat(
      "HF_AGENT_URL=", options_.agent_url, "\nHF_INSTANCE_ID=", rec.spec.instance_id,
      "\nHF_AGENT_TOKEN=", options_.agent_token ? options_.agent_token(rec.spec.instance_id) : "",
      "\n", options_.agent_cert_sha256.empty()
                ? std::string()
                : absl::StrCat("HF_AGENT_CERT_SHA256=", options_.agent_cert_sha256, "\n"),
      // The agent answers HyperPod's IMDS paths unless the machine has a metadata service
      // of its own (then it leaves it alone: src/agent/imds_server.cc).
      "HF_IMDS=serve\nHF_IMDS_INSTANCE_TYPE=", rec.spec.instance_type,
      "\nHF_IMDS_LOCAL_IPV4=", rec.ip, "\nHF_IMDS_HOSTNAME=", rec.hostname,
      "\nHF_IMDS_REGION=", options_.region, "\n");
  HF_ASSIGN_OR_RETURN(in.munge_key, mungeKey(rec.spec.cluster_id));
  {
    std::vector<sc::HostsEntry> hosts;
    std::lock_guard lock(mu_);
    for (const auto& [id, other] : nodes_) {
      if (other->spec.cluster_id == rec.spec.cluster_id && !other->ip.empty() &&
          other->phase != Phase::kTerminating && other->phase != Phase::kFailed) {
        hosts.push_back({other->ip, other->hostname});
      }
    }
    in.hosts_block = sc::RenderHostsBlock(std::move(hosts), options_.region);
  }
  if (rec.spec.lifecycle.is_object() && rec.spec.lifecycle.contains("SourceS3Uri") &&
      rec.spec.lifecycle["SourceS3Uri"].is_string()) {
    if (auto loc = bundle::ParseS3Uri(rec.spec.lifecycle["SourceS3Uri"].get<std::string>());
        loc.ok()) {
      in.bundle_dir = absl::StrCat("/tmp/", loc->bucket, "/", loc->prefix);
    }
  }
  const std::string arch = local::DpkgArchitecture(facts.machine);
  if (!arch.empty()) {
    sc::AmiFactsFiles f;
    const std::string version = facts.nvidia_version.empty()
                                    ? std::string(local::kStandInDriverVersion)
                                    : facts.nvidia_version;
    f.packages = local::RenderAptPackages(version, arch);
    f.source = local::RenderAptSource();
    f.kernel_release = facts.kernel_release;
    if (facts.nvidia_version.empty() && ElfMachineOf(facts.machine) != 0) {
      f.module = local::RenderStandInModule(version, facts.kernel_release,
                                            ElfMachineOf(facts.machine));
    }
    in.ami_facts = std::move(f);
  }
  return runStep(target, "identity", sc::RootShell(target.user), sc::RenderIdentityScript(in))
      .status();
}

Status SshProvider::Impl::cleanMachine(const hf::ssh::SshTarget& target) {
  // /fsx's mounts first (sshfs's and the read-only bind under it; never an operator's).
  (void)options_.ssh_run(target, sc::RootCommand(target.user, ssh::FsxCleanupCommand("/fsx")),
                         "", std::chrono::seconds(60));
  HF_ASSIGN_OR_RETURN(auto r, runStep(target, "cleanup", sc::RootShell(target.user),
                                      sc::RenderCleanupScript()));
  if (r.out.find("@@clean") == std::string::npos) {
    return absl::InternalError(absl::StrCat("cleanup on ", target.address, " did not finish: ",
                                            Tail(r.out)));
  }
  return absl::OkStatus();
}

Status SshProvider::Impl::grant(NodeRec& rec, bool allocate) {
  std::lock_guard pool_lock(pool_mu_);
  for (int attempt = 0; attempt < 8; ++attempt) {
    HF_ASSIGN_OR_RETURN(auto machines, options_.inventory->machines());
    const pool::PoolPolicy policy = policyNow();
    std::vector<pool::Machine> snapshot;
    for (const auto& pm : machines) {
      if (pm.machine.node == rec.spec.instance_id &&
          (pm.machine.state == pool::MachineState::kInUse ||
           pm.machine.state == pool::MachineState::kRebooting)) {
        rec.machine_id = pm.machine.id;  // granted before a restart
        rec.access = pm.access;
        return absl::OkStatus();
      }
      if (!pm.drained) snapshot.push_back(pm.machine);
    }
    if (!allocate) {
      return absl::NotFoundError(absl::StrCat("no machine serves ", rec.spec.instance_id));
    }
    pool::LaunchRequest request{rec.spec.cluster_id, rec.spec.instance_type,
                                {rec.spec.instance_id}, /*all_or_nothing=*/false};
    const pool::Allocation a = pool::Allocate(snapshot, request, policy, now());
    if (a.grants.empty()) {
      return absl::ResourceExhaustedError(
          a.shortfall ? a.shortfall->message
                      : absl::StrCat("Insufficient capacity for ", rec.spec.instance_type));
    }
    const pool::Grant& g = a.grants.front();
    for (auto pm : machines) {
      if (pm.machine.id != g.machine.id) continue;
      pm.machine = g.machine;
      Status st = options_.inventory->update(std::span<const PoolMachine>(&pm, 1));
      if (absl::IsAborted(st)) break;  // changed meanwhile: decide again
      HF_RETURN_IF_ERROR(st);
      rec.machine_id = pm.machine.id;
      rec.access = pm.access;
      rec.from_spare = g.from_spare;
      return absl::OkStatus();
    }
  }
  return absl::AbortedError("the machine registry kept changing; try again");
}

StatusOr<pool::Transition> SshProvider::Impl::report(const std::string& machine_id,
                                                     pool::Report what, std::string_view reason) {
  std::lock_guard pool_lock(pool_mu_);
  for (int attempt = 0; attempt < 8; ++attempt) {
    HF_ASSIGN_OR_RETURN(auto machines, options_.inventory->machines());
    for (auto pm : machines) {
      if (pm.machine.id != machine_id) continue;
      HF_ASSIGN_OR_RETURN(pool::Transition t,
                          pool::Apply(pm.machine, what, policyNow(), now(), reason));
      pm.machine = t.machine;
      Status st = options_.inventory->update(std::span<const PoolMachine>(&pm, 1));
      if (absl::IsAborted(st)) goto again;
      HF_RETURN_IF_ERROR(st);
      return t;
    }
    return absl::NotFoundError(absl::StrCat("machine ", machine_id, " is not registered"));
  again:;
  }
  return absl::AbortedError("the machine registry kept changing; try again");
}

void SshProvider::Impl::setUp(std::shared_ptr<NodeRec> rec) {
  std::lock_guard op(*rec->op_mu);
  {
    std::lock_guard lock(mu_);
    if (rec->phase == Phase::kTerminating || shutting_down_) return;
    // No kubelet or containerd here. The API refuses such groups; a machine registered
    // after the cluster was made can still route a launch here: fail it, take no machine.
    if (rec->spec.image_variant == NodeImageVariant::kEks) {
      rec->phase = Phase::kFailed;
      rec->message = absl::StrCat(
          "The ssh provider does not run EKS nodes: instance type ", rec->spec.instance_type,
          " has registered ssh machines, and cluster ", rec->spec.cluster_name,
          " is orchestrated by EKS (Orchestrator.Eks).");
      spdlog::warn("ssh provider: launch of {} failed: {}", rec->spec.instance_id, rec->message);
      (void)persist(*rec);
      return;
    }
  }
  std::string step = "allocate";
  Status st = [&]() -> Status {
    HF_RETURN_IF_ERROR(grant(*rec));
    {
      std::lock_guard lock(mu_);
      rec->ip = rec->access.address;
      rec->hostname = sc::KeptHostname(rec->spec.hostname, rec->ip);
      if (rec->phase == Phase::kTerminating) return absl::OkStatus();
      rec->phase = Phase::kProvisioning;
      HF_RETURN_IF_ERROR(persist(*rec));
    }
    if (rec->from_spare) {
      emit({SshProviderEvent::Kind::kSpareTaken, rec->spec.cluster_id, rec->spec.group,
            rec->spec.instance_id,
            rec->machine_id,
            absl::StrCat("Hot spare ", rec->machine_id, " (", rec->ip, ") took node ",
                         rec->spec.instance_id, " of cluster ", rec->spec.cluster_name)});
    }
    const hf::ssh::SshTarget target = targetOf(rec->access);
    step = "provision";
    if (!rec->from_spare) {
      HF_RETURN_IF_ERROR(provisionBase(target, target.user));
    } else {
      HF_ASSIGN_OR_RETURN(auto facts, probe(target));
      if (facts.binary_sha256 != binary_sha_) {  // a spare of an older server build
        HF_RETURN_IF_ERROR(runStep(target, "binary",
                                   sc::RootCommand(target.user,
                                                   sc::RenderBinaryInstallScript(binary_sha_)),
                                   binary_)
                               .status());
      }
    }
    HF_RETURN_IF_ERROR(startFsx(*rec, target));  // before the agent and its scripts
    HF_RETURN_IF_ERROR(writeIdentity(*rec, target));
    HF_ASSIGN_OR_RETURN(auto facts, probe(target));
    std::lock_guard lock(mu_);
    rec->boot_id = facts.boot_id;
    rec->boot_time = BootTime(facts);
    return absl::OkStatus();
  }();
  {
    std::lock_guard lock(mu_);
    if (rec->phase == Phase::kTerminating) return;
    if (st.ok()) {
      rec->phase = Phase::kRunning;
      rec->message.clear();
    } else {
      rec->phase = Phase::kFailed;
      rec->message = absl::IsResourceExhausted(st)
                         ? std::string(st.message())
                         : absl::StrCat("Provisioning machine ", rec->machine_id, " (",
                                        rec->access.address, ") failed: ", st.message());
      spdlog::warn("ssh provider: launch of {} failed: {}", rec->spec.instance_id, rec->message);
    }
    (void)persist(*rec);
  }
  scheduleHosts(rec->spec.cluster_id);
}

void SshProvider::Impl::doReboot(std::shared_ptr<NodeRec> rec) {
  std::lock_guard op(*rec->op_mu);
  if (rec->access.address.empty()) (void)grant(*rec, /*allocate=*/false).ok();  // adopted
  const hf::ssh::SshTarget target = targetOf(rec->access);
  Status st = [&]() -> Status {
    std::string old_boot = rec->boot_id;
    if (old_boot.empty()) {
      HF_ASSIGN_OR_RETURN(auto facts, probe(target));
      old_boot = facts.boot_id;
    }
    // The connection may drop as the machine goes down: that is no error here.
    // -i: logind refuses a reboot while other sessions are open (ours for /fsx, an
    // operator's), and this reboot is asked for.
    // Our /fsx (sshfs on our ssh connection, which the reboot cuts) is detached first: a
    // FUSE mount whose server went away can hold up the machine's shutdown. FsxMount
    // mounts it again once the machine answers.
    auto r = options_.ssh_run(
        target,
        sc::RootCommand(target.user, absl::StrCat("( ", ssh::FsxCleanupCommand("/fsx"),
                                                  "\n) >/dev/null 2>&1 || true\n",
                                                  "systemctl reboot -i")),
        "", std::chrono::seconds(30));
    if (r.ok() && r->exit_code != 0) {
      return absl::InternalError(absl::StrCat("systemctl reboot failed: ", Tail(r->err)));
    }
    const auto deadline = std::chrono::steady_clock::now() + options_.reboot_timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (rec->phase == Phase::kTerminating || shutting_down_) return absl::OkStatus();
      }
      auto q = options_.ssh_run(target, sc::RootShell(target.user), sc::RenderProbeScript(),
                                std::chrono::seconds(15));
      if (q.ok() && q->exit_code == 0) {
        if (auto facts = sc::ParseMachineFacts(q->out); facts.ok() && facts->boot_id != old_boot) {
          std::lock_guard lock(mu_);
          rec->boot_id = facts->boot_id;
          rec->boot_time = BootTime(*facts);
          return absl::OkStatus();
        }
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));  // polling a rebooting machine
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "machine ", rec->machine_id, " (", rec->access.address, ") did not come back within ",
        std::chrono::duration_cast<std::chrono::seconds>(options_.reboot_timeout).count(),
        " s of its reboot"));
  }();
  std::lock_guard lock(mu_);
  if (rec->phase == Phase::kTerminating) return;
  rec->phase = st.ok() ? Phase::kRunning : Phase::kFailed;
  rec->message = st.ok() ? "" : std::string(st.message());
  (void)persist(*rec);
}

void SshProvider::Impl::tearDown(std::shared_ptr<NodeRec> rec) {
  std::lock_guard op(*rec->op_mu);  // after any launch work of this node
  const std::string id = rec->spec.instance_id;
  // Only finds the machine serving it (a record adopted after a restart has no access yet).
  if (rec->access.address.empty()) (void)grant(*rec, /*allocate=*/false).ok();
  stopFsx(id);
  if (!rec->machine_id.empty()) {
    std::string reason;
    if (rec->stop_now) {
      reason = absl::StrCat("node ", id, " was terminated without a clean shutdown (machine dead "
                            "or hung); clean it and return it with `hyperfleet machines return`");
    } else if (Status st = cleanMachine(targetOf(rec->access)); !st.ok()) {
      reason = absl::StrCat("cleanup after node ", id, " failed: ", st.message());
    }
    auto t = reason.empty() ? report(rec->machine_id, pool::Report::kReleased, "")
                            : report(rec->machine_id, pool::Report::kFaultRepair, reason);
    if (!t.ok()) {
      spdlog::warn("ssh provider: machine {} after node {}: {}", rec->machine_id, id,
                   std::string(t.status().message()));
    } else if (!reason.empty()) {
      emit({SshProviderEvent::Kind::kMachineQuarantined, rec->spec.cluster_id, rec->spec.group, id,
            rec->machine_id,
            absl::StrCat("Machine ", rec->machine_id, " (", rec->access.address, ") ",
                         t->quarantined ? "quarantined" : "out for repair", ": ", reason)});
    }
  }
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second == rec) nodes_.erase(it);
    std::error_code ec;
    fs::remove(nodeFile(id), ec);
  }
  scheduleHosts(rec->spec.cluster_id);
  forgetCluster(rec->spec.cluster_id);
}

}  // namespace hf::provider
