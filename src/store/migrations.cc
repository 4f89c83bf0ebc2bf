#include "store/migrations.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hf::store {
namespace {

// Migration N brings the schema from version N-1 to N. Append only; never edit one that has
// shipped.
const std::vector<const char*>& Migrations() {
  static const std::vector<const char*> kMigrations = {
      // 1: clusters, nodes, events, tags and the revision counter.
      R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta (key, value) VALUES ('revision', 0);
CREATE TABLE clusters (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  arn TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL,
  failure_message TEXT NOT NULL DEFAULT '',
  creation_time REAL NOT NULL,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX clusters_by_time ON clusters (creation_time, id);
CREATE TABLE nodes (
  instance_id TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL REFERENCES clusters (id),
  logical_id TEXT NOT NULL,
  group_name TEXT NOT NULL,
  instance_type TEXT NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT '',
  launch_time REAL NOT NULL,
  private_ip TEXT NOT NULL DEFAULT '',
  hostname TEXT NOT NULL DEFAULT '',
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX nodes_by_time ON nodes (cluster_id, launch_time, instance_id);
CREATE INDEX nodes_by_group ON nodes (cluster_id, group_name, instance_id);
CREATE INDEX nodes_by_status ON nodes (cluster_id, group_name, status);
CREATE INDEX nodes_by_logical_id ON nodes (cluster_id, logical_id);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  cluster_id TEXT NOT NULL,
  group_name TEXT NOT NULL DEFAULT '',
  instance_id TEXT NOT NULL DEFAULT '',
  resource_type TEXT NOT NULL,
  level TEXT NOT NULL,
  time REAL NOT NULL,
  description TEXT NOT NULL,
  metadata TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (cluster_id, time, seq);
CREATE TABLE tags (
  resource_arn TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (resource_arn, key)
);
)sql",
      // 2: task-governance objects (ClusterSchedulerConfig, ComputeQuota) and their versions.
      // The unique index makes "one cluster policy per cluster, one quota per team per
      // cluster" hold under concurrent creates (team is '' for a scheduler config).
      R"sql(
CREATE TABLE scheduler_resources (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  cluster_id TEXT NOT NULL REFERENCES clusters (id),
  arn TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  team TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  version INTEGER NOT NULL,
  creation_time REAL NOT NULL,
  last_modified_time REAL NOT NULL,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE UNIQUE INDEX scheduler_resources_per_target ON scheduler_resources (cluster_id, kind, team);
CREATE TABLE scheduler_resource_versions (
  id TEXT NOT NULL,
  version INTEGER NOT NULL,
  status TEXT NOT NULL,
  last_modified_time REAL NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (id, version)
);
)sql",
      // 3: typed node state (src/store/node_json.cc). The planner's marks leave "extras"
      // (which keeps only ClusterNodeDetails members) for "marks"; a started reboot's start
      // time, which the planner used to write over RequestedAt, becomes StartedAt.
      R"sql(
UPDATE nodes SET body = json_remove(
    json_patch(body, json_object('marks', json_object(
        'RetryOf', body -> '$.extras.RetryOf',
        'ReplacementOf', body -> '$.extras.ReplacementOf',
        'PrivateIp', body -> '$.extras.PrivateIp',
        'ReplaceAttempt', body -> '$.extras.ReplaceAttempt',
        'SlurmDownPending', body -> '$.extras.SlurmDownPending',
        'SlurmDownReasons', body -> '$.extras.SlurmDownReasons'))),
    '$.extras.RetryOf', '$.extras.ReplacementOf', '$.extras.PrivateIp',
    '$.extras.ReplaceAttempt', '$.extras.SlurmDownPending', '$.extras.SlurmDownReasons')
WHERE json_valid(body) AND json_type(body, '$.extras') = 'object' AND (
  json_type(body, '$.extras.RetryOf') IS NOT NULL OR
  json_type(body, '$.extras.ReplacementOf') IS NOT NULL OR
  json_type(body, '$.extras.PrivateIp') IS NOT NULL OR
  json_type(body, '$.extras.ReplaceAttempt') IS NOT NULL OR
  json_type(body, '$.extras.SlurmDownPending') IS NOT NULL OR
  json_type(body, '$.extras.SlurmDownReasons') IS NOT NULL);
UPDATE nodes SET body = json_set(body, '$.recovery.StartedAt', body -> '$.recovery.RequestedAt')
WHERE json_valid(body) AND json_type(body, '$.recovery.Started') = 'true'
  AND json_type(body, '$.recovery.RequestedAt') IN ('integer', 'real')
  AND json_type(body, '$.recovery.StartedAt') IS NULL;
)sql",
      // 4: registered machines (`hyperfleet machines`, issue 18) and hot-spare targets per
      // instance type. One machine per (address, port). IF NOT EXISTS: a test rewinds
      // user_version to replay earlier migrations on a current file.
      R"sql(
CREATE TABLE IF NOT EXISTS machines (
  id TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  port INTEGER NOT NULL,
  instance_type TEXT NOT NULL,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS machines_by_address ON machines (address, port);
CREATE TABLE IF NOT EXISTS spare_targets (
  instance_type TEXT PRIMARY KEY,
  count INTEGER NOT NULL
);
)sql",
      // 5: EKS clusters and their access entries (issue 17). An access entry's key is
      // "<cluster>/<principal ARN>" (a cluster name has no '/'); it goes with its cluster.
      R"sql(
CREATE TABLE IF NOT EXISTS eks_clusters (
  name TEXT PRIMARY KEY,
  arn TEXT NOT NULL UNIQUE,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS eks_access_entries (
  key TEXT PRIMARY KEY,
  cluster TEXT NOT NULL,
  arn TEXT NOT NULL UNIQUE,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS eks_access_entries_by_cluster ON eks_access_entries (cluster, key);
)sql",
  };
  return kMigrations;
}

Status Exec(sqlite::Database& db, const std::string& sql) {
  Status s = db.exec(sql);
  if (s.ok()) return s;
  return absl::InternalError(absl::StrCat("schema migration failed: ", s.message()));
}

/// PRAGMA user_version, or -1 when it cannot be read.
int UserVersion(sqlite::Database& db) {
  auto s = db.prepare("PRAGMA user_version");
  if (!s.ok()) return -1;
  const StatusOr<bool> row = s->step();
  return row.ok() && *row ? static_cast<int>(s->int64(0)) : -1;
}

}  // namespace

Status Migrate(sqlite::Database& db) {
  int version = UserVersion(db);
  if (version < 0) return absl::InternalError("cannot read the schema version");
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the state database has schema version ", version, "; this binary knows up to ",
        kSchemaVersion, ". Use a newer hyperfleet."));
  }
  const auto& migrations = Migrations();
  static_assert(kSchemaVersion >= 1);
  for (int v = version; v < kSchemaVersion; ++v) {
    HF_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
    Status s = Exec(db, migrations[v]);
    if (s.ok()) s = Exec(db, absl::StrCat("PRAGMA user_version = ", v + 1));
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return s;
    }
    HF_RETURN_IF_ERROR(Exec(db, "COMMIT"));
  }
  return absl::OkStatus();
}

}  // namespace hf::store
