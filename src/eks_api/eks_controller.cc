#include "hyperfleet/eks/eks_controller.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace hf::eks {

using store::EksCluster;
using store::EksClusterStatus;

EksDecision PlanEksCluster(const EksCluster& c, const ControlPlaneStatus& observed,
                           SystemTime now) {
  EksDecision d;
  const ControlPlanePhase phase = observed.phase;
  auto ready_record = [&] {
    EksCluster next = c;
    next.status = EksClusterStatus::kActive;
    next.endpoint = observed.endpoint;
    next.ca_pem = observed.ca_pem;
    next.served_version = observed.served_version;
    next.message.clear();
    return next;
  };
  switch (c.status) {
    case EksClusterStatus::kCreating:
      if (phase == ControlPlanePhase::kAbsent) {
        d.ensure = true;
      } else if (phase == ControlPlanePhase::kReady) {
        d.write = ready_record();
      } else if (phase == ControlPlanePhase::kFailed) {
        if (now - c.created_at >= kCreateDeadline) {
          EksCluster failed = c;
          failed.status = EksClusterStatus::kFailed;
          failed.message = observed.message;
          d.write = std::move(failed);
        } else {
          d.ensure = true;
        }
      }
      return d;
    case EksClusterStatus::kActive:
      if (phase == ControlPlanePhase::kAbsent || phase == ControlPlanePhase::kFailed) {
        d.ensure = true;
      } else if (phase == ControlPlanePhase::kReady) {
        EksCluster next = ready_record();
        if (next != c) d.write = std::move(next);
      }
      return d;
    case EksClusterStatus::kDeleting:
      if (phase == ControlPlanePhase::kAbsent) {
        d.erase = true;
      } else {
        d.remove = true;
      }
      return d;
    case EksClusterStatus::kFailed:
      return d;
  }
  return d;
}

EksController::EksController(store::Store& store, ControlPlanes& planes, const Clock& clock,
                             Options options)
    : store_(store), planes_(planes), clock_(clock), options_(std::move(options)) {}

EksController::~EksController() { stop(); }

void EksController::start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      woken_ = false;
      lock.unlock();
      if (Status s = runOnce(); !s.ok()) spdlog::warn("EKS controller: {}", s.ToString());
      lock.lock();
      cv_.wait_for(lock, options_.interval, [this] { return stop_ || woken_; });
    }
  });
}

void EksController::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EksController::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

Status EksController::runOnce() {
  HF_ASSIGN_OR_RETURN(std::vector<EksCluster> clusters, store_.eksClusters());
  std::map<std::string, std::string> errors;  // only clusters that still exist
  for (const EksCluster& c : clusters) {
    Status s = reconcile(c);
    if (s.ok()) continue;
    // Said once per new failure: a missing binary would otherwise be logged every pass.
    std::string said = s.ToString();
    std::lock_guard lock(mu_);
    if (last_error_[c.name] != said) spdlog::warn("EKS cluster {}: {}", c.name, said);
    errors[c.name] = std::move(said);
  }
  std::lock_guard lock(mu_);
  last_error_ = std::move(errors);
  return absl::OkStatus();
}

Status EksController::reconcile(const EksCluster& c) {
  const EksDecision d = PlanEksCluster(c, planes_.status(c.name), clock_.now());
  if (d.ensure) {
    ControlPlaneSpec spec;
    spec.name = c.name;
    spec.version = c.version;
    spec.service_cidr = c.service_cidr;
    if (!options_.token_webhook_prefix.empty()) {
      spec.token_webhook_url = options_.token_webhook_prefix + c.name;
    }
    HF_RETURN_IF_ERROR(planes_.ensure(spec));
  }
  if (d.remove) HF_RETURN_IF_ERROR(planes_.remove(c.name));
  if (!d.write && !d.erase) return absl::OkStatus();
  store::WriteBatch batch;
  batch.eks_clusters.push_back({d.write ? *d.write : c, c.revision, d.erase});
  // A lost compare-and-swap (an API write meanwhile) is retried on the next pass.
  return store_.commit(batch).status();
}

}  // namespace hf::eks
