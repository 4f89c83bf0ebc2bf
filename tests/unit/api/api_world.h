#pragma once
// The control plane's SageMaker API on an in-memory store, for unit tests: requests go
// through ApiHandler::dispatch (routing, model validation, input and output pruning; no
// SigV4) to ClusterOperations and GovernanceOperations, as in the server.
#include <atomic>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/api/governance_operations.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/store/store.h"

namespace hf::api::testing {

/// Each reading is one second after the previous one, so creation times differ.
class StepClock : public Clock {
 public:
  SystemTime now() const override {
    return SystemTime(std::chrono::seconds(1'700'000'000 + ++ticks_));
  }
  mutable std::atomic<int> ticks_{0};
};

struct ApiWorld {
  using Json = nlohmann::json;

  StepClock clock;
  SequentialIdSource ids{7};
  std::unique_ptr<store::Store> store = std::move(store::OpenSqliteStore(":memory:").value());
  std::shared_ptr<const model::ServiceModel> model = model::ServiceModel::Embedded();
  ApiConfig config;  ///< the cluster operations' (before them: they copy it)
  ClusterOperations clusters{*store, *model, clock, ids, config, [](const std::string&) {}};
  GovernanceOperations governance{*store, clock, ids, ApiConfig{}};
  ApiHandler handler{[](std::string_view) { return std::nullopt; }, clock, ids, ApiConfig{}};

  explicit ApiWorld(ApiConfig cluster_config = {}) : config(std::move(cluster_config)) {
    handler.addService(clusters);
    handler.addService(governance);
  }

  /// One request as the server handles it after authentication: `target` is
  /// "<prefix>.<Operation>", e.g. "SageMaker.ListTags".
  StatusOr<Json> Call(const std::string& target, const Json& in) {
    http::HttpRequest req;
    req.method = "POST";
    req.target = "/";
    req.headers = {{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", target}};
    req.body = in.dump();
    return handler.dispatch(req);
  }
  /// A SageMaker operation.
  StatusOr<Json> Sm(const std::string& op, const Json& in) { return Call("SageMaker." + op, in); }

  /// The AWS error type of a failed call ("OK" when it succeeded), its message in `message`.
  static std::string ErrorOf(const StatusOr<Json>& r, std::string* message = nullptr) {
    if (r.ok()) return "OK";
    if (message) *message = std::string(r.status().message());
    return AwsErrorType(r.status());
  }

  /// A CreateCluster request for cluster `name` with one group of `count` ml.c5.xlarge.
  static Json ClusterSpec(const std::string& name, int count = 2) {
    return {{"ClusterName", name},
            {"InstanceGroups",
             {{{"InstanceGroupName", "workers"},
               {"InstanceType", "ml.c5.xlarge"},
               {"InstanceCount", count},
               {"ExecutionRole", "arn:aws:iam::123456789012:role/HyperPod"},
               {"LifeCycleConfig",
                {{"SourceS3Uri", "s3://bucket/lifecycle/"}, {"OnCreate", "on_create.sh"}}}}}}};
  }

  /// Sets cluster `name`'s status as the controller would (InService once its nodes run).
  void SetClusterStatus(const std::string& name, const std::string& status) {
    auto c = store->cluster(name).value();
    c.status = status;
    store::WriteBatch b;
    b.clusters.push_back({c, c.revision, false});
    (void)store->commit(b).value();
  }

  /// Erases cluster `name` as the controller does once its nodes are gone.
  void EraseCluster(const std::string& name) {
    auto c = store->cluster(name).value();
    store::WriteBatch b;
    b.clusters.push_back({c, c.revision, true});
    (void)store->commit(b).value();
  }
};

}  // namespace hf::api::testing
