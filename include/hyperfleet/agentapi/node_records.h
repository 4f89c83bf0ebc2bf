#pragma once
// The agent service's writes to a node's stored record, as free functions so that a
// simulator's agents record lifecycle results exactly as the real agent service does
// (AgentService::lifecycle calls RecordLifecycleResult; hf_sim_product's agents too).
#include <functional>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/store/store.h"

namespace hf::agentapi {

/// Changes one node record in place; returns false when there is nothing to write. May add
/// events, committed with the record.
using NodeChange = std::function<bool(model::Node&, std::vector<model::EventText>&)>;

/// Applies `change` to node `instance_id` of cluster `cluster_id` by compare-and-swap,
/// re-read and retried (8 times) when the controller wrote it in between; events get ids from
/// `ids` and the time of `clock`. Returns whether it wrote. Errors: the store's (NotFound for
/// an unknown node); Unavailable when the record kept changing.
StatusOr<bool> UpdateNodeRecord(store::Store& store, const Clock& clock, IdSource& ids,
                                const std::string& cluster_id, const std::string& instance_id,
                                const NodeChange& change);

/// Records the lifecycle scripts' `state` (kStarted, kSucceeded or kFailed of protocol.h) on
/// node `instance_id` of `cluster`, with its cluster event ("Instance lifecycle script
/// execution for EC2InstanceId ... has <state>"); on kFailed the node's lifecycle message is
/// HyperPod's wording with `reason` ("timeout" or other) and `detail`. Results are final: a
/// repeated report, or one after Succeeded/Failed, writes nothing (returns false).
/// Errors: those of UpdateNodeRecord.
StatusOr<bool> RecordLifecycleResult(store::Store& store, const Clock& clock, IdSource& ids,
                                     const model::Cluster& cluster,
                                     const std::string& instance_id, const std::string& state,
                                     const std::string& reason, const std::string& detail);

}  // namespace hf::agentapi
