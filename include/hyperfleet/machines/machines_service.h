#pragma once
// The machine registry on the API endpoint: an AWS JSON 1.1 service with target prefix
// "HyperfleetMachines", signed for "sagemaker" like the rest (`hyperfleet machines` calls
// it). Operations: RegisterMachine, UpdateMachine, DescribeMachine, ListMachines,
// DeregisterMachine, DrainMachine, UndrainMachine, ReturnMachine, PutSpareTarget,
// ListSpareTargets. Errors: ValidationException naming the field, ResourceNotFound,
// ResourceInUse (removing a machine in use), ConflictException (an address and port taken,
// returning a machine that is not quarantined). No response carries a private key: the
// output shapes have no member for one. docs/machines.md.
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/json_service.h"
#include "hyperfleet/machines/registry.h"
#include "hyperfleet/model/service_model.h"

namespace hf::machines {

class MachinesService final : public api::JsonService {
 public:
  explicit MachinesService(MachineRegistry& registry);
  std::string_view targetPrefix() const override { return "HyperfleetMachines"; }
  std::string_view signingName() const override { return "sagemaker"; }
  const model::ServiceModel& model() const override { return *model_; }
  std::string_view validationErrorType() const override { return "ValidationException"; }
  StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) override;

  /// A machine as the API shows it (MachineDescription): never its key.
  static nlohmann::json Describe(const store::MachineRecord& record);

 private:
  MachineRegistry& registry_;
  std::shared_ptr<const model::ServiceModel> model_;
};

}  // namespace hf::machines
