#pragma once
// The cluster events a node's health reports make (docs/nodes.md "Health checks"). Pure.
#include <vector>

#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/node_health.h"

namespace hf::agentapi {

/// The events of `node`'s report `after`, its previous one being `before` (a default report
/// when none): a Warn for each service the agent restarted that `before` did not show ("Instance
/// <id>: <finding>", once per restart), and when the verdict enters a fault (soft_fault,
/// hard_fault), changes fault kind or leaves faults: an Error naming the failing checks
/// ("Instance <id> failed its health checks (soft fault, reboot): <check>: <message>; ...")
/// or an Info ("Instance <id> passes its health checks again"), last.
std::vector<model::EventText> HealthEvents(const model::Node& node,
                                           const model::HealthReport& before,
                                           const model::HealthReport& after);

}  // namespace hf::agentapi
