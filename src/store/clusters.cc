// Clusters in the SQLite store: the row codec, reads, and the writes of a batch.
#include "absl/strings/str_cat.h"
#include "store/keyset.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {
namespace {

using nlohmann::json;

std::string ClusterBody(const model::Cluster& c) {
  json groups = json::array();
  for (const auto& g : c.groups) {
    // The typed count wins over the spec's copy, so the two can never disagree on disk.
    json spec = g.spec;
    spec["InstanceCount"] = g.target_count;
    groups.push_back(std::move(spec));
  }
  return json{{"spec", c.spec}, {"groups", groups}, {"groups_deleting", c.groups_deleting}}
      .dump();
}

constexpr const char* kClusterCols =
    "id, name, arn, status, failure_message, creation_time, revision, body";

model::Cluster ReadCluster(const sqlite::Statement& s) {
  model::Cluster c;
  ReadTexts(s, 0, c.id, c.name, c.arn, c.status, c.failure_message);
  c.creation_time = FromEpochSeconds(s.real(5));
  c.revision = s.int64(6);
  json body = json::parse(s.text(7), nullptr, false);
  if (body.is_object()) {
    c.spec = body.value("spec", json::object());
    for (const auto& g : body.value("groups", json::array())) {
      model::InstanceGroup ig;
      ig.spec = g;
      ig.name = g.value("InstanceGroupName", "");
      ig.instance_type = g.value("InstanceType", "");
      ig.target_count = g.value("InstanceCount", 0);
      c.groups.push_back(std::move(ig));
    }
    c.groups_deleting = body.value("groups_deleting", std::vector<std::string>{});
  }
  return c;
}

}  // namespace

StatusOr<model::Cluster> SqliteStore::cluster(const std::string& name_or_arn) {
  return readCluster("name = ?1 OR arn = ?1", name_or_arn);
}

StatusOr<model::Cluster> SqliteStore::clusterById(const std::string& id) {
  return readCluster("id = ?1", id);
}

StatusOr<model::Cluster> SqliteStore::readCluster(const char* condition, const std::string& key) {
  return withReader([&](sqlite::Database& db) -> StatusOr<model::Cluster> {
    auto s = db.cached(absl::StrCat("SELECT ", kClusterCols, " FROM clusters WHERE ", condition));
    s.bind(1, key);
    return ReadOne<model::Cluster>(db, s, "read cluster", ReadCluster, [&] {
      return absl::NotFoundError(absl::StrCat("Cluster ", key, " not found"));
    });
  });
}

StatusOr<std::vector<model::Cluster>> SqliteStore::allClusters() {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<model::Cluster>> {
    auto s = db.cached(absl::StrCat("SELECT ", kClusterCols, " FROM clusters ORDER BY id"));
    return ReadAll<model::Cluster>(db, s, "list clusters", ReadCluster);
  });
}

StatusOr<Page<model::Cluster>> SqliteStore::listClusters(const ClusterQuery& q) {
  const bool by_time = q.sort_by == SortBy::kCreationTime;
  Keyset keys{by_time ? "creation_time" : "name", "id", by_time, q.descending, {}};
  HF_RETURN_IF_ERROR(keys.start(q.page_token));
  const CreatedFilter filter{"creation_time", "name", 1, q.created_after, q.created_before,
                             q.name_contains};
  const std::string sql = absl::StrCat("SELECT ", kClusterCols, " FROM clusters WHERE 1",
                                       filter.sql(), keys.sql(4, 6));
  return withReader([&](sqlite::Database& db) -> StatusOr<Page<model::Cluster>> {
    auto s = db.cached(sql);
    filter.bind(s);
    keys.bind(s, 4, 6, q.limit);
    return keys.collect<model::Cluster>(
        db, s, q.limit, ReadCluster, [&](const model::Cluster& last) {
          return std::pair(by_time ? json(ToEpochSeconds(last.creation_time)) : json(last.name),
                           last.id);
        });
  });
}

Status WriteCluster(sqlite::Database& db, const ClusterWrite& w, int64_t rev) {
  const auto& cl = w.cluster;
  HF_RETURN_IF_ERROR(CheckRevision(db, "clusters", "id", cl.id, w.expected_revision, "Cluster"));
  if (w.expected_revision == kMustNotExist) {
    // Name uniqueness is checked here so the error names the cluster (ResourceInUse).
    auto q = db.cached("SELECT 1 FROM clusters WHERE name = ?1");
    q.bind(1, cl.name);
    HF_ASSIGN_OR_RETURN(const bool taken, q.step());
    if (taken) {
      return absl::AlreadyExistsError(
          absl::StrCat("Cluster with name ", cl.name, " already exists"));
    }
  }
  auto s = db.cached(
      "INSERT INTO clusters (id, name, arn, status, failure_message, creation_time, "
      "revision, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO UPDATE SET "
      "name = excluded.name, arn = excluded.arn, status = excluded.status, "
      "failure_message = excluded.failure_message, creation_time = excluded.creation_time, "
      "revision = excluded.revision, body = excluded.body");
  s.bindAll(cl.id, cl.name, cl.arn, cl.status, cl.failure_message,
            ToEpochSeconds(cl.creation_time), rev, ClusterBody(cl));
  return RunWrite(db, s, "write cluster");
}

Status EraseCluster(sqlite::Database& db, const ClusterWrite& w) {
  const auto& cl = w.cluster;
  HF_RETURN_IF_ERROR(CheckRevision(db, "clusters", "id", cl.id, w.expected_revision, "Cluster"));
  for (const char* sql :
       {"DELETE FROM tags WHERE resource_arn IN "
        "(SELECT arn FROM scheduler_resources WHERE cluster_id = ?1)",
        "DELETE FROM scheduler_resource_versions WHERE id IN "
        "(SELECT id FROM scheduler_resources WHERE cluster_id = ?1)",
        "DELETE FROM scheduler_resources WHERE cluster_id = ?1",
        "DELETE FROM nodes WHERE cluster_id = ?1", "DELETE FROM events WHERE cluster_id = ?1",
        "DELETE FROM clusters WHERE id = ?1"}) {
    auto s = db.cached(sql);
    s.bind(1, cl.id);
    HF_RETURN_IF_ERROR(RunWrite(db, s, "delete cluster"));
  }
  auto s = db.cached("DELETE FROM tags WHERE resource_arn = ?1");
  s.bind(1, cl.arn);
  return RunWrite(db, s, "delete tags");
}

}  // namespace hf::store
