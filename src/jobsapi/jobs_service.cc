#include "hyperfleet/jobsapi/jobs_service.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hf::jobsapi {

using nlohmann::json;

namespace {

// The response is Hyperfleet's free-form report: a "document" the API handler keeps whole.
constexpr std::string_view kJobsModel = R"({
  "version": "2.0",
  "metadata": {"apiVersion": "2026-11-30", "protocol": "json", "jsonVersion": "1.1",
               "targetPrefix": "Hyperfleet", "signingName": "sagemaker"},
  "operations": {
    "DescribeJobAdmission": {"name": "DescribeJobAdmission",
                             "input": {"shape": "DescribeJobAdmissionRequest"},
                             "output": {"shape": "DescribeJobAdmissionResponse"}}
  },
  "shapes": {
    "DescribeJobAdmissionRequest": {"type": "structure", "required": ["ClusterName", "JobId"],
      "members": {"ClusterName": {"shape": "ClusterNameOrArn"}, "JobId": {"shape": "JobId"}}},
    "DescribeJobAdmissionResponse": {"type": "structure", "document": true, "members": {}},
    "ClusterNameOrArn": {"type": "string", "min": 1, "max": 256},
    "JobId": {"type": "string", "min": 1, "max": 20, "pattern": "[0-9]+"}
  }
})";

}  // namespace

JobsService::JobsService(store::Store& store, const control::GovernanceLoop& loop)
    : store_(store), loop_(loop) {
  auto parsed = model::ServiceModel::FromJson(kJobsModel);
  if (!parsed.ok()) std::abort();  // a constant, covered by the unit tests
  model_ = *parsed;
}

StatusOr<json> JobsService::call(std::string_view op, const json& input) {
  if (op != "DescribeJobAdmission") {
    return absl::UnimplementedError(absl::StrCat("Hyperfleet.", std::string(op), " is not implemented"));
  }
  uint64_t id = 0;
  if (!absl::SimpleAtoi(input.value("JobId", ""), &id)) {
    return absl::InvalidArgumentError("JobId must be a Slurm job id (digits)");
  }
  HF_ASSIGN_OR_RETURN(model::Cluster cluster, store_.cluster(input.value("ClusterName", "")));
  HF_ASSIGN_OR_RETURN(json out, loop_.why(cluster.id, id));
  out["ClusterName"] = cluster.name;
  return out;
}

}  // namespace hf::jobsapi
