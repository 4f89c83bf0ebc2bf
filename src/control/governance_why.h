#pragma once
// `hyperfleet jobs why`'s answer (GovernanceLoop::why), rendered from a Governor.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"
#include "hyperfleet/governance/slurm/governor.h"

namespace hf::control {

/// Why job `id` of `governor`'s cluster is (not) running, in GovernanceLoop::why's shape.
/// NotFound when `governor` is null (the cluster has no state) or holds no such job.
StatusOr<nlohmann::json> RenderWhy(const governance::slurm::Governor* governor, uint64_t id);

}  // namespace hf::control
