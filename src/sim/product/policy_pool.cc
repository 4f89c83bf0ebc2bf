#include "hyperfleet/sim/product/policy_pool.h"

#include <cstdio>
#include <stdexcept>

namespace hf::sim::product {

using pool::MachineState;
using pool::Report;

namespace {
std::string IdOf(int m) {
  char b[16];
  std::snprintf(b, sizeof b, "m-%06d", m);  // fixed width: Allocate's id order is numeric
  return b;
}
}  // namespace

void PolicyMachinePool::apply(int m, Report r, const std::string& why) {
  auto t = pool::Apply(machines_.at(static_cast<size_t>(m)), r, policy_, clock_.now(), why);
  // A report that does not fit the state is the engine's bug, not the simulated world's.
  if (!t.ok()) throw std::logic_error(std::string(t.status().message()));
  machines_[static_cast<size_t>(m)] = std::move(t->machine);
}

void PolicyMachinePool::add(int first, int count, const std::string& instance_type) {
  if (first != static_cast<int>(machines_.size())) {
    throw std::invalid_argument("machines are registered in order");
  }
  for (int m = first; m < first + count; ++m) {
    pool::Machine x;
    x.id = IdOf(m);
    x.instance_type = instance_type;
    x.since = clock_.now();
    machines_.push_back(std::move(x));
  }
}

std::optional<int> PolicyMachinePool::acquire(const std::string& node,
                                              const std::string& instance_type) {
  pool::LaunchRequest req{"sim", instance_type, {node}, false};
  pool::Allocation a = pool::Allocate(machines_, req, policy_, clock_.now());
  if (a.grants.empty()) return std::nullopt;
  const int m = std::stoi(a.grants[0].machine.id.substr(2));
  machines_[static_cast<size_t>(m)] = std::move(a.grants[0].machine);
  return m;
}

void PolicyMachinePool::release(int m) {
  switch (machine(m).state) {
    case MachineState::kInUse: apply(m, Report::kReleased); break;
    case MachineState::kRepairing: apply(m, Report::kRepaired); break;
    case MachineState::kRebooting: apply(m, Report::kRebooted); break;
    case MachineState::kQuarantined: apply(m, Report::kOperatorReturn); break;
    default: break;
  }
  if (machine(m).state == MachineState::kChecking) apply(m, Report::kCheckPassed);
}

bool PolicyMachinePool::idle(int m) const {
  if (m < 0 || m >= static_cast<int>(machines_.size())) return false;
  const MachineState s = machine(m).state;
  return s == MachineState::kFree || s == MachineState::kSpareReady;
}

PolicyMachinePool::Fault PolicyMachinePool::fault(int m, const std::string& why, bool reboot) {
  apply(m, reboot ? Report::kFaultReboot : Report::kFaultRepair, why);
  return machine(m).state == MachineState::kQuarantined ? Fault::kQuarantine : Fault::kRepair;
}

size_t PolicyMachinePool::free_count(const std::string& instance_type) const {
  size_t n = 0;
  for (const auto& x : machines_) {
    n += x.instance_type == instance_type &&
         (x.state == MachineState::kFree || x.state == MachineState::kSpareReady);
  }
  return n;
}

}  // namespace hf::sim::product
