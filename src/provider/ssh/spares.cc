// SshProvider, the loop (ssh_provider_impl.h): hot spares kept by hf_pool's PlanSpares
// (provisioned up to before the lifecycle scripts, checked at intervals, retired above the
// target), return checks of machines an operator returned, and the clusters' /etc/hosts
// blocks kept current as nodes come and go.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "provider/ssh/ssh_provider_impl.h"

namespace hf::provider {
namespace sc = ssh_scripts;
using Phase = SshProvider::Impl::Phase;
using pool::MachineState;

void SshProvider::Impl::loop() {
  auto next_pass = std::chrono::steady_clock::now();
  std::unique_lock lock(loop_mu_);
  while (!loop_stop_) {
    loop_cv_.wait_until(lock, next_pass, [&] { return loop_stop_ || !hosts_dirty_.empty(); });
    if (loop_stop_) break;
    std::set<std::string> dirty;
    dirty.swap(hosts_dirty_);
    lock.unlock();
    for (const auto& cluster : dirty) rewriteHosts(cluster);
    if (std::chrono::steady_clock::now() >= next_pass) {
      sparePass();
      next_pass = std::chrono::steady_clock::now() + options_.spare_interval;
    }
    lock.lock();
  }
}

Status SshProvider::Impl::checkMachine(const hf::ssh::SshTarget& target) {
  HF_ASSIGN_OR_RETURN(auto facts, probe(target));
  if (facts.binary_sha256 != binary_sha_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node binary on ", target.address, " has SHA-256 '", facts.binary_sha256,
        "', not ", binary_sha_));
  }
  if (facts.disk_free_kib >= 0 && facts.disk_free_kib < options_.min_disk_free_kib) {
    return absl::FailedPreconditionError(absl::StrCat(
        target.address, " has ", facts.disk_free_kib, " KiB free on /, less than ",
        options_.min_disk_free_kib));
  }
  return absl::OkStatus();
}

void SshProvider::Impl::sparePass() {
  std::vector<std::pair<pool::SpareStep, PoolMachine>> started;
  std::vector<PoolMachine> returning;
  {
    std::lock_guard pool_lock(pool_mu_);
    auto machines = options_.inventory->machines();
    if (!machines.ok()) {
      spdlog::warn("ssh provider: machines: {}", std::string(machines.status().message()));
      return;
    }
    std::vector<pool::Machine> snapshot;
    for (const auto& pm : *machines) {
      if (!pm.drained) snapshot.push_back(pm.machine);
    }
    pool::PoolPolicy policy = policyNow();
    // A type whose target was removed keeps none: its spares retire (PlanSpares plans the
    // types it is given).
    for (const auto& m : snapshot) policy.spare_target.try_emplace(m.instance_type, 0);
    for (const auto& step : pool::PlanSpares(snapshot, policy, now())) {
      for (auto pm : *machines) {
        if (pm.machine.id != step.machine.id) continue;
        pm.machine = step.machine;
        Status st = options_.inventory->update(std::span<const PoolMachine>(&pm, 1));
        if (st.ok()) {
          started.emplace_back(step, pm);
        } else {
          spdlog::info("ssh provider: spare step on {}: {}", pm.machine.id, std::string(st.message()));
        }
      }
    }
    // Work a restart cut short, and machines an operator returned (their check).
    std::lock_guard lock(mu_);
    for (const auto& pm : *machines) {
      if (busy_machines_.count(pm.machine.id)) continue;
      bool planned = false;
      for (const auto& [step, p] : started) planned |= p.machine.id == pm.machine.id;
      if (planned) continue;
      if (pm.machine.state == MachineState::kSpareProvisioning) {
        started.emplace_back(pool::SpareStep{pool::SpareStep::Kind::kProvision, pm.machine}, pm);
      } else if (pm.machine.state == MachineState::kSpareChecking) {
        started.emplace_back(pool::SpareStep{pool::SpareStep::Kind::kCheck, pm.machine}, pm);
      } else if (pm.machine.state == MachineState::kChecking && pm.machine.node.empty()) {
        returning.push_back(pm);
      }
    }
    for (const auto& [step, pm] : started) busy_machines_.insert(pm.machine.id);
    for (const auto& pm : returning) busy_machines_.insert(pm.machine.id);
  }
  for (auto& [step, pm] : started) {
    spawn([this, step = step, pm = pm] { spareStep(step, pm); });
  }
  for (auto& pm : returning) {
    spawn([this, pm = pm] { returnCheck(pm); });
  }
}

void SshProvider::Impl::spareStep(const pool::SpareStep& step, const PoolMachine& pm) {
  const hf::ssh::SshTarget target = targetOf(pm.access);
  const std::string& id = pm.machine.id;
  Status st;
  pool::Report pass = pool::Report::kCheckPassed;
  switch (step.kind) {
    case pool::SpareStep::Kind::kProvision:
      // Up to before the lifecycle scripts: packages, AMI layer, binary; no identity, no agent.
      st = provisionBase(target, target.user);
      if (st.ok()) st = checkMachine(target);
      pass = pool::Report::kProvisioned;
      break;
    case pool::SpareStep::Kind::kCheck:
      st = checkMachine(target);
      break;
    case pool::SpareStep::Kind::kRetire:
      // Back to free with the base layer on it (packages, AMI layer, binary; no agent runs).
      break;
  }
  if (step.kind != pool::SpareStep::Kind::kRetire) {
    auto t = st.ok() ? report(id, pass, "")
                     : report(id, pool::Report::kCheckFailed,
                              absl::StrCat(step.kind == pool::SpareStep::Kind::kProvision
                                               ? "spare provisioning failed: "
                                               : "spare check failed: ",
                                           st.message()));
    if (!t.ok()) {
      spdlog::warn("ssh provider: spare {}: {}", id, std::string(t.status().message()));
    } else if (!st.ok()) {
      spdlog::warn("ssh provider: spare {} ({}) failed: {}", id, pm.access.address, std::string(st.message()));
    } else {
      spdlog::info("ssh provider: spare {} ({}) ready", id, pm.access.address);
    }
  }
  std::lock_guard lock(mu_);
  busy_machines_.erase(id);
}

// A machine back from quarantine or repair: whatever its last node left is cleaned (its
// node may have died without a cleanup), then it must answer to be free again.
void SshProvider::Impl::returnCheck(const PoolMachine& pm) {
  Status st = cleanMachine(targetOf(pm.access));
  auto t = st.ok() ? report(pm.machine.id, pool::Report::kCheckPassed, "")
                   : report(pm.machine.id, pool::Report::kCheckFailed,
                            absl::StrCat("return check failed: ", st.message()));
  if (!t.ok()) spdlog::warn("ssh provider: machine {}: {}", pm.machine.id, std::string(t.status().message()));
  std::lock_guard lock(mu_);
  busy_machines_.erase(pm.machine.id);
}

void SshProvider::Impl::scheduleHosts(const std::string& cluster_id) {
  {
    std::lock_guard lock(loop_mu_);
    hosts_dirty_.insert(cluster_id);
  }
  loop_cv_.notify_all();
}

// Writes the cluster's hosts block into every running node of the cluster.
void SshProvider::Impl::rewriteHosts(const std::string& cluster_id) {
  std::vector<sc::HostsEntry> entries;
  std::vector<MachineAccess> targets;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, rec] : nodes_) {
      if (rec->spec.cluster_id != cluster_id || rec->ip.empty() ||
          rec->phase == Phase::kTerminating || rec->phase == Phase::kFailed) {
        continue;
      }
      entries.push_back({rec->ip, rec->hostname});
      if (rec->phase == Phase::kRunning) targets.push_back(rec->access);
    }
  }
  const std::string script = absl::StrCat(
      "set -eu\numask 022\necho '@@step hosts'\n",
      sc::RenderHostsUpdate(sc::RenderHostsBlock(std::move(entries), options_.region)));
  for (const auto& access : targets) {
    const hf::ssh::SshTarget target = targetOf(access);
    auto r = options_.ssh_run(target, sc::RootShell(target.user), script, std::chrono::seconds(60));
    if (!r.ok() || r->exit_code != 0) {
      spdlog::warn("ssh provider: /etc/hosts on {}: {}", access.address,
                   r.ok() ? r->err : std::string(r.status().message()));
    }
  }
}

}  // namespace hf::provider
