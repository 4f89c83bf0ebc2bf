#pragma once
// When the product engine may skip the controller's passes (ClusterController::runOnce).
//
// The rule. PlanCluster is a pure function of (snapshot, now). Suppose a pass at time t
// changed nothing: it committed no write, and its provider calls and Slurm marks changed no
// simulated state. Until the next simulator event the snapshot stays what it was at t, except
// for `now` itself and, for nodes whose agent heartbeats, a last heartbeat equal to `now`
// (heartbeats are state in the simulator: a healthy node is heard at every instant). So every
// later pass decides exactly what the pass at t decided (nothing) unless some comparison of
// the plan with `now` changes its outcome in between. Those comparisons, read from
// src/control/plan/ (each one listed in NextDecisionTime below), are all of the form
// "now - x > d" or "now >= x" with x and d taken from the snapshot. The controller's passes
// fall on a lattice (the last pass + k * its requeue interval: 100 ms in flight, 1 s while
// watching agents); the first pass that can decide anything new is therefore the first lattice
// point at or after min(next simulator event, NextDecisionTime). The passes before it are
// skipped: they would commit nothing and call nothing that changes anything.
//
// What the rule needs from the driver: (1) a simulator event ends the quiet stretch (the pass
// after it runs), (2) the controller's resync is off (resync_interval beyond the horizon): the
// resync adds a pass off the lattice every 10 s, and the liveness pass every second already
// revisits the only cluster. product_engine_test checks the rule against a driver that runs
// every pass: same decisions (events, records), same times.
#include <optional>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/control/cluster_plan.h"

namespace hf::sim::product {

/// How long after its start a reboot that did not happen is repeated as a power cycle:
/// FollowReboot's 30 s (src/control/plan/recovery.cc).
inline constexpr Duration kRebootRetryAfter = std::chrono::seconds(30);

/// The earliest instant at or after `now` at which a time comparison in PlanCluster over
/// `snapshot` may change its outcome; nullopt when none can (only an event changes the plan
/// then). Conservative: it may name instants at which nothing changes (an extra pass), never
/// one later than a change. The comparisons (src/control/plan/):
///  - health.cc FindFault, MassSilence: silence, now - LastHeard > unresponsive_after, where
///    LastHeard is the latest of launch, recovery, listening_since, boot and last heartbeat;
///    a node heard at `now` is heartbeating and has no such instant;
///  - observe.cc ObserveRunning: now - AgentStartCountedFrom (the boot) >
///    agent_start_timeout (no script started);
///  - recovery.cc FollowReboot: now - asked_at > 30 s (power cycle), now - started_at >
///    reboot_timeout (failed);
///  - health.cc RetryFailedReplacement: now >= fault.retry_at.
std::optional<SystemTime> NextDecisionTime(const control::ClusterSnapshot& snapshot,
                                           SystemTime now);

/// NextDecisionTime's rule for one node record `n`: `observed` is the provider's report of
/// its instance (nullptr: not reported; only boot_time is read), `heard` its agent's last
/// heartbeat (nullptr: none). Lowers `next` to the node's earliest such instant at or after
/// `now`; reads only the snapshot's policies. The product engine calls it over the records it
/// holds, without building a snapshot.
void ConsiderNode(const model::Node& n, const provider::InstanceObservation* observed,
                  const model::NodeLiveness* heard, const control::ClusterSnapshot& snapshot,
                  SystemTime now, std::optional<SystemTime>& next);

/// The first point of the lattice `last + k * interval` (k >= 1) that is at or after `at`.
/// Precondition: interval > 0.
SystemTime FirstPassAtOrAfter(SystemTime last, Duration interval, SystemTime at);

}  // namespace hf::sim::product
