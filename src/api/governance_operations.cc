// The governance operations' machinery, shared by both kinds: dispatch, the cluster and
// object lookups, create, describe, the compare-and-swap update, delete, settle and list.
// The operations themselves are in scheduler_configs.cc and compute_quotas.cc.
#include "hyperfleet/api/governance_operations.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "governance_common.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/api/tag_operations.h"
#include "hyperfleet/store/page_token.h"
#include "request_time.h"

namespace hf::api {

using namespace governance_ops;  // NOLINT: this file's helpers
namespace kind = model::governance_kind;
namespace st = model::scheduler_status;

// ---- dispatch -----------------------------------------------------------------------------

namespace {
using Handler = StatusOr<Json> (GovernanceOperations::*)(const Json&);
const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const std::map<std::string, Handler, std::less<>> kHandlers = {
      {"CreateClusterSchedulerConfig", &GovernanceOperations::createClusterSchedulerConfig},
      {"DescribeClusterSchedulerConfig", &GovernanceOperations::describeClusterSchedulerConfig},
      {"UpdateClusterSchedulerConfig", &GovernanceOperations::updateClusterSchedulerConfig},
      {"DeleteClusterSchedulerConfig", &GovernanceOperations::deleteClusterSchedulerConfig},
      {"ListClusterSchedulerConfigs", &GovernanceOperations::listClusterSchedulerConfigs},
      {"CreateComputeQuota", &GovernanceOperations::createComputeQuota},
      {"DescribeComputeQuota", &GovernanceOperations::describeComputeQuota},
      {"UpdateComputeQuota", &GovernanceOperations::updateComputeQuota},
      {"DeleteComputeQuota", &GovernanceOperations::deleteComputeQuota},
      {"ListComputeQuotas", &GovernanceOperations::listComputeQuotas},
  };
  return kHandlers;
}
}  // namespace

GovernanceOperations::GovernanceOperations(store::Store& store, const Clock& clock,
                                           IdSource& ids, ApiConfig config,
                                           GovernanceOptions options)
    : store_(store), clock_(clock), ids_(ids), config_(std::move(config)),
      options_(options) {}

bool GovernanceOperations::implements(std::string_view op) const {
  return Handlers().count(op) > 0;
}

StatusOr<Json> GovernanceOperations::call(std::string_view op, const Json& in) {
  auto it = Handlers().find(op);
  if (it == Handlers().end()) {
    return absl::UnimplementedError(absl::StrCat("Unknown operation ", std::string(op)));
  }
  return (this->*(it->second))(in);
}

std::string GovernanceOperations::arnOf(const std::string& k, const std::string& id) const {
  return absl::StrCat("arn:aws:sagemaker:", config_.region, ":", config_.account_id, ":",
                      k == kind::kSchedulerConfig ? "cluster-scheduler-config/" : "compute-quota/",
                      id);
}

model::Event GovernanceOperations::event(const std::string& cluster_id, std::string level,
                                         std::string text, SystemTime now) {
  return model::MakeEvent(ids_.eventId(), cluster_id, now,
                          {"Cluster", std::move(level), std::move(text), "", "", nullptr});
}

StatusOr<model::Cluster> GovernanceOperations::liveCluster(const std::string& arn) {
  auto c = store_.cluster(arn);
  if (!c.ok() || c->arn != arn) {
    if (c.ok() || absl::IsNotFound(c.status())) {
      return absl::NotFoundError(absl::StrCat("Cluster ", arn, " not found."));
    }
    return c.status();
  }
  if (c->status == model::cluster_status::kDeleting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cluster ", c->name, " is being deleted; its governance objects cannot change."));
  }
  return c;
}

StatusOr<model::SchedulerResource> GovernanceOperations::find(const std::string& k,
                                                              const std::string& id) {
  auto r = store_.schedulerResource(k, id);
  if (!r.ok() && absl::IsNotFound(r.status())) {
    return absl::NotFoundError(absl::StrCat(k, " ", id, " not found."));
  }
  return r;
}

// ---- create ---------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::create(model::SchedulerResource r, const model::Cluster& c,
                                            const Json& tags) {
  const SystemTime now = clock_.now();
  r.id = ids_.clusterId();
  r.arn = arnOf(r.kind, r.id);
  r.cluster_id = c.id;
  r.status = st::kCreating;
  r.version = 1;
  r.creation_time = r.last_modified_time = now;
  r.body["ClusterArn"] = c.arn;
  const std::string id_member = absl::StrCat(r.kind, "Id");

  // OK when no object holds the target (this cluster's policy, or this team's quota).
  auto conflict = [&]() -> Status {
    HF_ASSIGN_OR_RETURN(auto existing, store_.schedulerResources(r.kind, c.id));
    for (const auto& e : existing) {
      if (e.team != r.team) continue;
      if (r.kind == kind::kSchedulerConfig) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Cluster ", c.name, " already has ", Named(e),
            "; a cluster has only one cluster policy. Update it or delete it first."));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "Team ", r.team, " already has ", Named(e), " on cluster ", c.name,
          "; a team has only one compute quota per cluster. Update it or delete it first."));
    }
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(conflict());

  store::WriteBatch batch;
  std::vector<model::SchedulerResource> quotas;
  if (r.kind == kind::kComputeQuota) {
    HF_ASSIGN_OR_RETURN(quotas, store_.schedulerResources(kind::kComputeQuota, c.id));
    if (static_cast<int>(quotas.size()) >= options_.max_compute_quotas_per_cluster) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Cluster ", c.name, " has ", quotas.size(), " compute quotas; the limit is ",
          options_.max_compute_quotas_per_cluster, " per cluster."));
    }
    quotas.push_back(r);
  }
  batch.scheduler_resources.push_back({r, store::kMustNotExist, false});
  batch.events.push_back(event(c.id, "Info",
                               absl::StrCat(Noun(r.kind), " ", r.name, " (", r.kind, " ", r.id,
                                            r.team.empty() ? "" : absl::StrCat(", team ", r.team),
                                            ") creation started, version 1"),
                               now));
  if (auto excess = excessEvent(c, quotas, now)) batch.events.push_back(std::move(*excess));
  const std::vector<model::Tag> tag_list = TagsFrom(tags);
  if (!tag_list.empty()) batch.tags.push_back({r.arn, tag_list, {}});
  auto committed = store_.commit(batch);
  if (!committed.ok()) {
    // Lost a race to a concurrent create for the same target: name the winner.
    if (absl::IsAlreadyExists(committed.status())) HF_RETURN_IF_ERROR(conflict());
    if (absl::IsFailedPrecondition(committed.status())) {
      return absl::NotFoundError(absl::StrCat("Cluster ", c.arn, " not found."));
    }
    return committed.status();
  }
  if (options_.auto_settle) HF_RETURN_IF_ERROR(settle(c.id));
  return Json{{absl::StrCat(r.kind, "Arn"), r.arn}, {id_member, r.id}};
}

StatusOr<Json> GovernanceOperations::describe(const std::string& k, const Json& in,
                                               const char* id_member,
                                               const char* version_member) {
  const std::string id = Str(in, id_member);
  if (in.contains(version_member)) {
    auto r = store_.schedulerResourceVersion(k, id, in[version_member].get<int>());
    if (!r.ok()) return r.status();
    return DescribeOf(*r);
  }
  HF_ASSIGN_OR_RETURN(auto r, find(k, id));
  return DescribeOf(r);
}

// ---- update ---------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::mutate(
    const std::string& k, const std::string& id,
    const std::function<Status(model::SchedulerResource&, const model::Cluster&,
                               store::WriteBatch&)>& fn,
    const std::function<Json(const model::SchedulerResource&)>& out) {
  for (int attempt = 0;; ++attempt) {
    HF_ASSIGN_OR_RETURN(auto r, find(k, id));
    const int64_t read_revision = r.revision;
    HF_ASSIGN_OR_RETURN(auto c, store_.clusterById(r.cluster_id));
    store::WriteBatch batch;
    HF_RETURN_IF_ERROR(fn(r, c, batch));
    if (batch.empty()) return out(r);
    for (auto& w : batch.scheduler_resources) {
      if (w.resource.id == r.id) w.expected_revision = read_revision;
    }
    auto committed = store_.commit(batch);
    if (committed.ok()) {
      if (options_.auto_settle) HF_RETURN_IF_ERROR(settle(r.cluster_id));
      return out(r);
    }
    // A concurrent writer won; re-reading re-checks TargetVersion against its result.
    if (!absl::IsFailedPrecondition(committed.status()) || attempt >= 20) {
      return committed.status();
    }
  }
}

// ---- delete ---------------------------------------------------------------------------------

void GovernanceOperations::startUpdate(model::SchedulerResource& r, store::WriteBatch& batch) {
  r.body.erase("FailureReason");
  r.version += 1;
  r.status = st::kUpdating;
  r.last_modified_time = clock_.now();
  batch.scheduler_resources.push_back({r, r.revision, false});
  batch.events.push_back(
      event(r.cluster_id, "Info", absl::StrCat(Named(r), " update started, version ", r.version),
            r.last_modified_time));
}

StatusOr<Json> GovernanceOperations::remove(const std::string& k, const std::string& id) {
  return mutate(
      k, id,
      [&](model::SchedulerResource& r, const model::Cluster& c,
          store::WriteBatch& batch) -> Status {
        if (r.status == st::kDeleting) return absl::OkStatus();  // already under way
        r.status = st::kDeleting;
        r.last_modified_time = clock_.now();
        batch.scheduler_resources.push_back({r, r.revision, false});
        batch.events.push_back(event(c.id, "Info", absl::StrCat(Named(r), " deletion started"),
                                     r.last_modified_time));
        return absl::OkStatus();
      },
      [](const model::SchedulerResource&) { return Json::object(); });
}

// ---- settle ---------------------------------------------------------------------------------

Status GovernanceOperations::settle(const std::string& cluster_id) {
  for (const char* k : {kind::kSchedulerConfig, kind::kComputeQuota}) {
    HF_ASSIGN_OR_RETURN(auto all, store_.schedulerResources(k, cluster_id));
    for (auto r : all) {
      std::string done;
      store::WriteBatch batch;
      const SystemTime now = clock_.now();
      const int64_t revision = r.revision;
      if (r.status == st::kCreating) {
        r.status = st::kCreated;
        done = absl::StrCat(Named(r), " created, version ", r.version);
      } else if (r.status == st::kUpdating) {
        r.status = st::kUpdated;
        done = absl::StrCat(Named(r), " updated to version ", r.version);
      } else if (r.status == st::kDeleting) {
        done = absl::StrCat(Named(r), " deleted");
      } else {
        continue;
      }
      batch.scheduler_resources.push_back({r, revision, r.status == st::kDeleting});
      batch.events.push_back(event(r.cluster_id, "Info", done, now));
      auto committed = store_.commit(batch);
      // Changed meanwhile (its own settle follows) or its cluster went: nothing to do.
      if (!committed.ok() && !absl::IsFailedPrecondition(committed.status())) {
        return committed.status();
      }
    }
  }
  return absl::OkStatus();
}

// ---- list -----------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::list(const std::string& k, const Json& in) {
  const std::string cluster_arn = Str(in, "ClusterArn");
  std::string cluster_id;
  if (!cluster_arn.empty()) {
    auto c = store_.cluster(cluster_arn);
    if (!c.ok() || c->arn != cluster_arn) {
      if (!c.ok() && !absl::IsNotFound(c.status())) return c.status();
      return Json{{absl::StrCat(k, "Summaries"), Json::array()}};
    }
    cluster_id = c->id;
  }
  HF_ASSIGN_OR_RETURN(auto all, store_.schedulerResources(k, cluster_id));
  const auto after = RequestTimestamp(in, "CreatedAfter");
  const auto before = RequestTimestamp(in, "CreatedBefore");
  const std::string name_contains = Str(in, "NameContains"), status = Str(in, "Status");
  const std::string sort_by = in.value("SortBy", "CreationTime");
  const bool descending = in.value("SortOrder", "Descending") == "Descending";
  const int limit = in.value("MaxResults", 10);

  auto key_of = [&](const model::SchedulerResource& r) -> Json {
    if (sort_by == "Name") return r.name;
    if (sort_by == "Status") return r.status;
    if (sort_by == "ClusterArn") return r.body.value("ClusterArn", "");
    return ToEpochSeconds(r.creation_time);
  };
  // Strict weak order of (key, id) in the requested direction.
  auto before_in_order = [&](const Json& ka, const std::string& ia, const Json& kb,
                             const std::string& ib) {
    if (ka != kb) return descending ? kb < ka : ka < kb;
    return descending ? ib < ia : ia < ib;
  };

  std::optional<store::PageToken> start;
  if (const std::string token = Str(in, "NextToken"); !token.empty()) {
    HF_ASSIGN_OR_RETURN(start, store::DecodePageToken(token, sort_by == "CreationTime"));
  }
  std::vector<model::SchedulerResource> rows;
  for (auto& r : all) {
    if (after && r.creation_time <= *after) continue;
    if (before && r.creation_time >= *before) continue;
    if (!name_contains.empty() && !absl::StrContains(r.name, name_contains)) continue;
    if (!status.empty() && r.status != status) continue;
    if (start && !before_in_order(start->key, start->tie, key_of(r), r.id)) continue;
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return before_in_order(key_of(a), a.id, key_of(b), b.id);
  });
  Json summaries = Json::array();
  std::string next;
  for (const auto& r : rows) {
    if (static_cast<int>(summaries.size()) == limit) {
      const auto& last = rows[limit - 1];
      next = store::EncodePageToken(key_of(last), last.id);
      break;
    }
    Json s = Common(r);
    if (k == kind::kComputeQuota) {
      for (const char* key : {"ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState"}) {
        if (r.body.contains(key)) s[key] = r.body[key];
      }
    }
    summaries.push_back(std::move(s));
  }
  Json out = {{absl::StrCat(k, "Summaries"), std::move(summaries)}};
  if (!next.empty()) out["NextToken"] = next;
  return out;
}

}  // namespace hf::api
