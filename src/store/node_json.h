#pragma once
// The JSON body of a node row (nodes.body): everything of model::Node that has no column of
// its own. The only place where a node's typed state meets JSON; the keys are those the
// store has always written (migration 3 moved the planner's marks out of "extras").
#include <nlohmann/json.hpp>

#include "hyperfleet/model/cluster.h"

namespace hf::store {

/// The body of node `n`: {"lifecycle", "extras", "marks", "recovery", "fault", "lcs_state",
/// "lcs_message", "recovered_at"}; members at their defaults are left out.
nlohmann::json NodeBody(const model::Node& n);

/// Fills the body members of `n` from `body` (a NodeBody). Lenient: a member of the wrong
/// type, or a recovery or fault of an unknown kind, reads as absent.
void ReadNodeBody(const nlohmann::json& body, model::Node& n);

}  // namespace hf::store
