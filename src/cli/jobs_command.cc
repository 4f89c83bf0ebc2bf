#include "hyperfleet/cli/jobs_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/cli/client_config.h"
#include "hyperfleet/cli/command_error.h"

namespace hf::cli {
namespace {

/// Hyperfleet's own operations on the API endpoint, signed like SageMaker's.
const ClientService& HyperfleetService() {
  static const ClientService service{"sagemaker", "Hyperfleet", "AWS_ENDPOINT_URL_SAGEMAKER"};
  return service;
}

struct WhyFlags {
  std::string job;
  std::string cluster;
  std::string output = "text";
  ClientFlags client;
};

/// The cluster to ask: --cluster-name, else the only one ListClusters returns.
StatusOr<std::string> PickCluster(const WhyFlags& f) {
  if (!f.cluster.empty()) return f.cluster;
  HF_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(f.client, SageMakerService()));
  AwsJsonClient client(std::move(config), SageMakerService());
  auto listed = client.Call("ListClusters", nlohmann::json{{"MaxResults", 100}});
  if (!listed.ok()) {
    return absl::Status(listed.status().code(), DescribeCallError(listed.status(), "ListClusters"));
  }
  std::vector<std::string> names;
  for (const auto& c : listed->value("ClusterSummaries", nlohmann::json::array())) {
    names.push_back(c.value("ClusterName", ""));
  }
  if (names.size() == 1) return names.front();
  return absl::InvalidArgumentError(
      names.empty() ? std::string("there is no cluster")
                    : absl::StrCat("several clusters (", absl::StrJoin(names, ", "),
                                   "): say which with --cluster-name"));
}

Status RunWhy(const WhyFlags& f) {
  HF_ASSIGN_OR_RETURN(std::string cluster, PickCluster(f));
  HF_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(f.client, HyperfleetService()));
  AwsJsonClient client(std::move(config), HyperfleetService());
  auto resp = client.Call("DescribeJobAdmission",
                          nlohmann::json{{"ClusterName", cluster}, {"JobId", f.job}});
  if (!resp.ok()) {
    return absl::Status(resp.status().code(),
                        DescribeCallError(resp.status(), "DescribeJobAdmission"));
  }
  if (f.output == "json") {
    std::printf("%s\n", resp->dump(2).c_str());
  } else {
    std::printf("%s", resp->value("Text", "").c_str());
  }
  return absl::OkStatus();
}

}  // namespace

void AddJobsCommand(CLI::App& app) {
  auto* jobs = app.add_subcommand("jobs", "Slurm jobs under task governance");
  jobs->require_subcommand(1);
  auto flags = std::make_shared<WhyFlags>();
  auto* why = jobs->add_subcommand(
      "why", "Why a governed Slurm job is pending or running: quota arithmetic, jobs ahead");
  why->add_option("job", flags->job, "Slurm job id")->required();
  why->add_option("--cluster-name", flags->cluster, "Cluster name or ARN (default: the only one)");
  why->add_option("--output", flags->output, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  AddClientFlags(*why, flags->client);
  why->callback([flags] {
    if (Status s = RunWhy(*flags); !s.ok()) ExitWithError("jobs why", s);
  });
}

}  // namespace hf::cli
