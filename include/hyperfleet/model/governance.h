#pragma once
// Task-governance objects of a cluster: the cluster policy (ClusterSchedulerConfig) and the
// per-team compute allocations (ComputeQuota). Both share one record: the API keeps their
// configuration as the model's JSON members and the typed columns the store indexes.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::model {

namespace governance_kind {
inline constexpr const char* kSchedulerConfig = "ClusterSchedulerConfig";
inline constexpr const char* kComputeQuota = "ComputeQuota";
}  // namespace governance_kind

/// SchedulerResourceStatus values used by Hyperfleet (the model's enum spelling).
namespace scheduler_status {
inline constexpr const char* kCreating = "Creating";
inline constexpr const char* kCreated = "Created";
inline constexpr const char* kCreateFailed = "CreateFailed";
inline constexpr const char* kUpdating = "Updating";
inline constexpr const char* kUpdated = "Updated";
inline constexpr const char* kUpdateFailed = "UpdateFailed";
inline constexpr const char* kDeleting = "Deleting";
}  // namespace scheduler_status

/// One ClusterSchedulerConfig or ComputeQuota.
struct SchedulerResource {
  std::string id;          ///< 12 [a-z0-9] (ClusterSchedulerConfigId / ComputeQuotaId)
  std::string kind;        ///< governance_kind::*
  std::string cluster_id;  ///< owning cluster (its governance objects go with it)
  std::string arn;
  std::string name;        ///< EntityName
  std::string team;        ///< ComputeQuotaTarget.TeamName; empty for a scheduler config
  std::string status;      ///< SchedulerResourceStatus
  int version = 1;         ///< ClusterSchedulerConfigVersion / ComputeQuotaVersion, from 1
  SystemTime creation_time{};
  SystemTime last_modified_time{};
  /// The configuration members as accepted (SchedulerConfig, Description, ClusterArn,
  /// ComputeQuotaConfig, ComputeQuotaTarget, ActivationState) and FailureReason when failed.
  nlohmann::json body = nlohmann::json::object();
  int64_t revision = 0;    ///< store revision (compare-and-swap)
};

}  // namespace hf::model
