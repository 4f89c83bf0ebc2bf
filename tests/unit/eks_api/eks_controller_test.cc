// PlanEksCluster's table (every status against every observed phase), and EksController's
// pass on a real SQLite store with recording ControlPlanes: CREATING -> ACTIVE, re-ensure
// after a restart, DELETING -> removed -> erased with its access entries.
#include "hyperfleet/eks/eks_controller.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace hf::eks {
namespace {

using store::EksCluster;
using store::EksClusterStatus;
using P = ControlPlanePhase;
using S = EksClusterStatus;

const SystemTime kCreated = FromEpochSeconds(1'700'000'000);

EksCluster Record(S status) {
  EksCluster c;
  c.name = "c1";
  c.arn = "arn:aws:eks:us-west-2:123456789012:cluster/c1";
  c.version = "1.31";
  c.status = status;
  c.created_at = kCreated;
  c.revision = 7;
  return c;
}

ControlPlaneStatus Observed(P phase) {
  ControlPlaneStatus s;
  s.phase = phase;
  if (phase == P::kReady || phase == P::kStarting) s.endpoint = "https://10.0.0.1:7443";
  if (phase == P::kReady) {
    s.ca_pem = "PEM";
    s.served_version = "v1.20.2";
  }
  if (phase == P::kFailed) s.message = "etcd will not start";
  return s;
}

EksCluster Active() {
  EksCluster c = Record(S::kActive);
  c.endpoint = "https://10.0.0.1:7443";
  c.ca_pem = "PEM";
  c.served_version = "v1.20.2";
  return c;
}

TEST(PlanEksClusterTest, Table) {
  const SystemTime soon = kCreated + std::chrono::minutes(1);
  const SystemTime late = kCreated + kCreateDeadline;
  EksCluster failed = Record(S::kFailed);
  EksCluster timed_out = Record(S::kFailed);
  timed_out.message = "etcd will not start";
  EksCluster stale = Active();
  stale.endpoint = "https://10.0.0.1:1";
  struct Case {
    EksCluster record;
    P phase;
    SystemTime now;
    EksDecision want;
  };
  const std::vector<Case> cases = {
      {Record(S::kCreating), P::kAbsent, soon, {.ensure = true}},
      {Record(S::kCreating), P::kStarting, soon, {}},
      {Record(S::kCreating), P::kReady, soon, {.write = Active()}},
      {Record(S::kCreating), P::kFailed, soon, {.ensure = true}},
      {Record(S::kCreating), P::kFailed, late, {.write = timed_out}},
      {Active(), P::kAbsent, soon, {.ensure = true}},  // after a restart: re-adopt
      {Active(), P::kFailed, soon, {.ensure = true}},
      {Active(), P::kStarting, soon, {}},
      {Active(), P::kReady, soon, {}},
      {stale, P::kReady, soon, {.write = Active()}},
      {Record(S::kDeleting), P::kReady, soon, {.remove = true}},
      {Record(S::kDeleting), P::kStarting, soon, {.remove = true}},
      {Record(S::kDeleting), P::kFailed, soon, {.remove = true}},
      {Record(S::kDeleting), P::kAbsent, soon, {.erase = true}},
      {failed, P::kAbsent, late, {}},
      {failed, P::kReady, late, {}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(PlanEksCluster(c.record, Observed(c.phase), c.now), c.want) << "case " << i;
  }
}

/// ControlPlanes that record calls and report the phases the test sets.
class RecordingPlanes : public ControlPlanes {
 public:
  Status ensure(const ControlPlaneSpec& spec) override {
    ensured.push_back(spec);
    if (phase.find(spec.name) == phase.end()) phase[spec.name] = P::kStarting;
    return absl::OkStatus();
  }
  ControlPlaneStatus status(std::string_view name) override {
    auto it = phase.find(std::string(name));
    return Observed(it == phase.end() ? P::kAbsent : it->second);
  }
  Status remove(std::string_view name) override {
    removed.emplace_back(name);
    phase.erase(std::string(name));
    return absl::OkStatus();
  }
  std::vector<std::string> list() override {
    std::vector<std::string> out;
    for (const auto& [n, p] : phase) out.push_back(n);
    return out;
  }
  // The EKS controller never touches Nodes.
  StatusOr<NodeJoin> nodeJoin(std::string_view, std::string_view) override {
    return absl::UnimplementedError("not used by the EKS controller");
  }
  StatusOr<std::vector<KubeNode>> nodes(std::string_view) override {
    return absl::UnimplementedError("not used by the EKS controller");
  }
  Status updateNode(std::string_view, std::string_view, const NodeUpdate&) override {
    return absl::UnimplementedError("not used by the EKS controller");
  }
  Status removeNode(std::string_view, std::string_view) override {
    return absl::UnimplementedError("not used by the EKS controller");
  }
  std::map<std::string, P> phase;
  std::vector<ControlPlaneSpec> ensured;
  std::vector<std::string> removed;
};

class FixedClock : public Clock {
 public:
  SystemTime now() const override { return kCreated + std::chrono::seconds(5); }
};

TEST(EksControllerTest, CreatesActivatesReadoptsAndDeletes) {
  auto store = std::move(store::OpenSqliteStore(":memory:").value());
  store::WriteBatch b;
  EksCluster c = Record(S::kCreating);
  c.service_cidr = "10.100.0.0/16";
  b.eks_clusters.push_back({c, store::kMustNotExist, false});
  store::EksAccessEntry e;
  e.cluster = "c1";
  e.principal_arn = "arn:aws:iam::123456789012:user/A";
  e.arn = "arn:aws:eks:us-west-2:123456789012:access-entry/c1/user/x";
  b.eks_access_entries.push_back({e, store::kMustNotExist, false});
  ASSERT_TRUE(store->commit(b).ok());

  RecordingPlanes planes;
  FixedClock clock;
  EksController controller(*store, planes, clock,
                           {.token_webhook_prefix = "http://127.0.0.1:8080/eks/v1/authenticate/"});
  ASSERT_TRUE(controller.runOnce().ok());
  ASSERT_EQ(planes.ensured.size(), 1u);
  EXPECT_EQ(planes.ensured[0].name, "c1");
  EXPECT_EQ(planes.ensured[0].version, "1.31");
  EXPECT_EQ(planes.ensured[0].service_cidr, "10.100.0.0/16");
  EXPECT_EQ(planes.ensured[0].token_webhook_url,
            "http://127.0.0.1:8080/eks/v1/authenticate/c1");
  EXPECT_EQ(store->eksCluster("c1")->status, S::kCreating);

  planes.phase["c1"] = P::kReady;
  ASSERT_TRUE(controller.runOnce().ok());
  EksCluster active = store->eksCluster("c1").value();
  EXPECT_EQ(active.status, S::kActive);
  EXPECT_EQ(active.endpoint, "https://10.0.0.1:7443");
  EXPECT_EQ(active.served_version, "v1.20.2");

  // A restart: the control plane is not known to a fresh ControlPlanes; ensure again.
  planes.phase.clear();
  ASSERT_TRUE(controller.runOnce().ok());
  EXPECT_EQ(planes.ensured.size(), 2u);
  EXPECT_EQ(store->eksCluster("c1")->status, S::kActive);

  active = store->eksCluster("c1").value();
  active.status = S::kDeleting;
  store::WriteBatch del;
  del.eks_clusters.push_back({active, active.revision, false});
  ASSERT_TRUE(store->commit(del).ok());
  ASSERT_TRUE(controller.runOnce().ok());
  EXPECT_EQ(planes.removed, std::vector<std::string>{"c1"});
  EXPECT_TRUE(store->eksCluster("c1").ok());  // the row goes once removal is observed
  ASSERT_TRUE(controller.runOnce().ok());
  EXPECT_EQ(store->eksCluster("c1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->eksAccessEntries("c1").value().empty());
}

}  // namespace
}  // namespace hf::eks
