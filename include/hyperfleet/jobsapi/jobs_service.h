#pragma once
// `hyperfleet jobs why` on the API endpoint: the control plane's Slurm governance loop
// (control::GovernanceLoop) served as a small AWS JSON 1.1 service. A library of its own so
// that hf_control never links the API layer (docs/architecture.md "Library dependencies").
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/json_service.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/control/governance_loop.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/store/store.h"

namespace hf::jobsapi {

/// Target prefix "Hyperfleet" (X-Amz-Target: Hyperfleet.DescribeJobAdmission), signed for
/// "sagemaker". DescribeJobAdmission {"ClusterName" (name or ARN), "JobId" (Slurm job id, a
/// string of digits)} returns GovernanceLoop::why plus "ClusterName". Errors:
/// ResourceNotFound for an unknown cluster or job, ValidationException for a JobId that is
/// not a number. Thread-safe (the store and the loop are).
class JobsService final : public api::JsonService {
 public:
  JobsService(store::Store& store, const control::GovernanceLoop& loop);
  std::string_view targetPrefix() const override { return "Hyperfleet"; }
  std::string_view signingName() const override { return "sagemaker"; }
  const model::ServiceModel& model() const override { return *model_; }
  std::string_view validationErrorType() const override { return "ValidationException"; }
  StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) override;

 private:
  store::Store& store_;
  const control::GovernanceLoop& loop_;
  std::shared_ptr<const model::ServiceModel> model_;
};

}  // namespace hf::jobsapi
