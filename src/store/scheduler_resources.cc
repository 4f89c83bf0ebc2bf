// Task-governance objects (ClusterSchedulerConfig, ComputeQuota) and their versions in the
// SQLite store: the row codec, reads, and the writes of a batch.
#include "absl/strings/str_cat.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {
namespace {

using nlohmann::json;

constexpr const char* kSchedulerCols =
    "id, kind, cluster_id, arn, name, team, status, version, creation_time, "
    "last_modified_time, revision, body";

/// A JSON object from column text; {} when it is not one.
json ObjectBody(const std::string& text) {
  json body = json::parse(text, nullptr, false);
  return body.is_object() ? body : json::object();
}

model::SchedulerResource ReadSchedulerResource(const sqlite::Statement& s) {
  model::SchedulerResource r;
  ReadTexts(s, 0, r.id, r.kind, r.cluster_id, r.arn, r.name, r.team, r.status);
  r.version = static_cast<int>(s.int64(7));
  r.creation_time = FromEpochSeconds(s.real(8));
  r.last_modified_time = FromEpochSeconds(s.real(9));
  r.revision = s.int64(10);
  r.body = ObjectBody(s.text(11));
  return r;
}

}  // namespace

StatusOr<model::SchedulerResource> SqliteStore::schedulerResource(const std::string& kind,
                                                                  const std::string& id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<model::SchedulerResource> {
    auto s = db.cached(absl::StrCat("SELECT ", kSchedulerCols,
                                    " FROM scheduler_resources WHERE kind = ?1 AND id = ?2"));
    s.bind(1, kind).bind(2, id);
    return ReadOne<model::SchedulerResource>(
        db, s, "read scheduler resource", ReadSchedulerResource,
        [&] { return absl::NotFoundError(absl::StrCat(kind, " ", id, " not found")); });
  });
}

StatusOr<model::SchedulerResource> SqliteStore::schedulerResourceVersion(const std::string& kind,
                                                                         const std::string& id,
                                                                         int version) {
  HF_ASSIGN_OR_RETURN(auto current, schedulerResource(kind, id));
  if (version == current.version) return current;
  return withReader([&](sqlite::Database& db) -> StatusOr<model::SchedulerResource> {
    auto s = db.cached(
        "SELECT status, last_modified_time, body FROM scheduler_resource_versions "
        "WHERE id = ?1 AND version = ?2");
    s.bind(1, id).bind(2, version);
    return ReadOne<model::SchedulerResource>(
        db, s, "read scheduler resource version",
        [&](const sqlite::Statement& row) {
          model::SchedulerResource r = current;
          r.version = version;
          r.status = row.text(0);
          r.last_modified_time = FromEpochSeconds(row.real(1));
          r.body = ObjectBody(row.text(2));
          return r;
        },
        [&] {
          return absl::NotFoundError(absl::StrCat(kind, " ", id, " has no version ", version,
                                                  " (current version ", current.version, ")"));
        });
  });
}

StatusOr<std::vector<model::SchedulerResource>> SqliteStore::schedulerResources(
    const std::string& kind, const std::string& cluster_id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<model::SchedulerResource>> {
    auto s = db.cached(absl::StrCat("SELECT ", kSchedulerCols,
                                    " FROM scheduler_resources WHERE kind = ?1 AND "
                                    "(?2 = '' OR cluster_id = ?2) ORDER BY id"));
    s.bind(1, kind).bind(2, cluster_id);
    return ReadAll<model::SchedulerResource>(db, s, "list scheduler resources",
                                             ReadSchedulerResource);
  });
}

Status WriteSchedulerResource(sqlite::Database& db, const SchedulerResourceWrite& w,
                              int64_t rev) {
  const auto& r = w.resource;
  HF_RETURN_IF_ERROR(CheckRevision(db, "scheduler_resources", "id", r.id, w.expected_revision,
                                   r.kind.c_str()));
  if (w.erase) {
    for (const char* sql : {"DELETE FROM tags WHERE resource_arn = ?2",
                            "DELETE FROM scheduler_resource_versions WHERE id = ?1",
                            "DELETE FROM scheduler_resources WHERE id = ?1"}) {
      auto s = db.cached(sql);
      s.bind(1, r.id).bind(2, r.arn);
      HF_RETURN_IF_ERROR(RunWrite(db, s, "delete scheduler resource"));
    }
    return absl::OkStatus();
  }
  // Governance objects belong to a live cluster (the foreign key would say so less clearly).
  HF_ASSIGN_OR_RETURN(int64_t cluster_rev, RowRevision(db, "clusters", "id", r.cluster_id));
  if (cluster_rev == kMustNotExist) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cluster ", r.cluster_id, " no longer exists"));
  }
  auto s = db.cached(
      "INSERT INTO scheduler_resources (id, kind, cluster_id, arn, name, team, status, "
      "version, creation_time, last_modified_time, revision, body) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(id) DO UPDATE SET "
      "name = excluded.name, team = excluded.team, status = excluded.status, "
      "version = excluded.version, last_modified_time = excluded.last_modified_time, "
      "revision = excluded.revision, body = excluded.body");
  const std::string body = r.body.dump();
  s.bindAll(r.id, r.kind, r.cluster_id, r.arn, r.name, r.team, r.status, r.version,
            ToEpochSeconds(r.creation_time), ToEpochSeconds(r.last_modified_time), rev, body);
  HF_RETURN_IF_ERROR(RunWrite(db, s, "write scheduler resource"));
  auto v = db.cached(
      "INSERT INTO scheduler_resource_versions (id, version, status, last_modified_time, "
      "body) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(id, version) DO UPDATE SET "
      "status = excluded.status, last_modified_time = excluded.last_modified_time, "
      "body = excluded.body");
  v.bindAll(r.id, r.version, r.status, ToEpochSeconds(r.last_modified_time), body);
  return RunWrite(db, v, "write scheduler resource version");
}

}  // namespace hf::store
