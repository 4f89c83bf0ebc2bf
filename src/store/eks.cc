// EKS clusters and access entries in the SQLite store: the enum names, the row codec (JSON
// only inside the row's body), reads, and the writes of a batch.
#include "absl/strings/str_cat.h"
#include "hyperfleet/store/eks_record.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {

namespace {

using nlohmann::json;

constexpr std::pair<EksClusterStatus, std::string_view> kStatusNames[] = {
    {EksClusterStatus::kCreating, "CREATING"},
    {EksClusterStatus::kActive, "ACTIVE"},
    {EksClusterStatus::kDeleting, "DELETING"},
    {EksClusterStatus::kFailed, "FAILED"},
};
constexpr std::pair<EksAuthMode, std::string_view> kModeNames[] = {
    {EksAuthMode::kConfigMap, "CONFIG_MAP"},
    {EksAuthMode::kApi, "API"},
    {EksAuthMode::kApiAndConfigMap, "API_AND_CONFIG_MAP"},
};

constexpr const char* kClusterCols = "name, arn, revision, body";
constexpr const char* kEntryCols = "key, cluster, arn, revision, body";

json TimeJson(SystemTime t) { return ToEpochSeconds(t); }
SystemTime TimeOf(const json& j) {
  return j.is_number() ? FromEpochSeconds(j.get<double>()) : SystemTime{};
}

std::vector<std::string> Strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> StringMap(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string ClusterBody(const EksCluster& c) {
  const EksVpcConfig& v = c.vpc;
  json j = {{"version", c.version},
            {"role_arn", c.role_arn},
            {"vpc",
             {{"subnet_ids", v.subnet_ids},
              {"security_group_ids", v.security_group_ids},
              {"endpoint_public_access", v.endpoint_public_access},
              {"endpoint_private_access", v.endpoint_private_access},
              {"public_access_cidrs", v.public_access_cidrs},
              {"vpc_id", v.vpc_id},
              {"cluster_security_group_id", v.cluster_security_group_id}}},
            {"service_cidr", c.service_cidr},
            {"auth_mode", std::string(EksAuthModeName(c.auth_mode))},
            {"bootstrap_admin", c.bootstrap_admin},
            {"status", std::string(EksClusterStatusName(c.status))},
            {"created_at", TimeJson(c.created_at)},
            {"tags", c.tags},
            {"endpoint", c.endpoint},
            {"ca_pem", c.ca_pem},
            {"served_version", c.served_version},
            {"message", c.message}};
  return j.dump();
}

EksCluster ReadCluster(const sqlite::Statement& s) {
  EksCluster c;
  ReadTexts(s, 0, c.name, c.arn);
  c.revision = s.int64(2);
  json j = json::parse(s.text(3), nullptr, false);
  if (!j.is_object()) j = json::object();
  c.version = j.value("version", "");
  c.role_arn = j.value("role_arn", "");
  const json v = j.value("vpc", json::object());
  c.vpc.subnet_ids = Strings(v.value("subnet_ids", json()));
  c.vpc.security_group_ids = Strings(v.value("security_group_ids", json()));
  c.vpc.endpoint_public_access = v.value("endpoint_public_access", true);
  c.vpc.endpoint_private_access = v.value("endpoint_private_access", false);
  c.vpc.public_access_cidrs = Strings(v.value("public_access_cidrs", json()));
  c.vpc.vpc_id = v.value("vpc_id", "");
  c.vpc.cluster_security_group_id = v.value("cluster_security_group_id", "");
  c.service_cidr = j.value("service_cidr", "");
  c.auth_mode = ParseEksAuthMode(j.value("auth_mode", "")).value_or(EksAuthMode::kConfigMap);
  c.bootstrap_admin = j.value("bootstrap_admin", true);
  c.status = ParseEksClusterStatus(j.value("status", "")).value_or(EksClusterStatus::kFailed);
  c.created_at = TimeOf(j.value("created_at", json()));
  c.tags = StringMap(j.value("tags", json()));
  c.endpoint = j.value("endpoint", "");
  c.ca_pem = j.value("ca_pem", "");
  c.served_version = j.value("served_version", "");
  c.message = j.value("message", "");
  return c;
}

std::string EntryBody(const EksAccessEntry& e) {
  json policies = json::array();
  for (const EksPolicyAssociation& p : e.policies) {
    policies.push_back({{"policy_arn", p.policy_arn},
                        {"scope_type", p.scope_type},
                        {"namespaces", p.namespaces},
                        {"associated_at", TimeJson(p.associated_at)},
                        {"modified_at", TimeJson(p.modified_at)}});
  }
  json j = {{"principal_arn", e.principal_arn},
            {"kubernetes_groups", e.kubernetes_groups},
            {"username", e.username},
            {"type", e.type},
            {"created_at", TimeJson(e.created_at)},
            {"modified_at", TimeJson(e.modified_at)},
            {"tags", e.tags},
            {"policies", policies}};
  return j.dump();
}

EksAccessEntry ReadEntry(const sqlite::Statement& s) {
  EksAccessEntry e;
  std::string key;
  ReadTexts(s, 0, key, e.cluster, e.arn);
  e.revision = s.int64(3);
  json j = json::parse(s.text(4), nullptr, false);
  if (!j.is_object()) j = json::object();
  e.principal_arn = j.value("principal_arn", "");
  e.kubernetes_groups = Strings(j.value("kubernetes_groups", json()));
  e.username = j.value("username", "");
  e.type = j.value("type", "STANDARD");
  e.created_at = TimeOf(j.value("created_at", json()));
  e.modified_at = TimeOf(j.value("modified_at", json()));
  e.tags = StringMap(j.value("tags", json()));
  for (const json& p : j.value("policies", json::array())) {
    if (!p.is_object()) continue;
    EksPolicyAssociation a;
    a.policy_arn = p.value("policy_arn", "");
    a.scope_type = p.value("scope_type", "cluster");
    a.namespaces = Strings(p.value("namespaces", json()));
    a.associated_at = TimeOf(p.value("associated_at", json()));
    a.modified_at = TimeOf(p.value("modified_at", json()));
    e.policies.push_back(std::move(a));
  }
  return e;
}

std::string EntryKey(const std::string& cluster, const std::string& principal) {
  return absl::StrCat(cluster, "/", principal);
}

}  // namespace

std::string_view EksClusterStatusName(EksClusterStatus s) {
  for (const auto& [v, name] : kStatusNames) {
    if (v == s) return name;
  }
  return "FAILED";
}

std::optional<EksClusterStatus> ParseEksClusterStatus(std::string_view name) {
  for (const auto& [v, n] : kStatusNames) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string_view EksAuthModeName(EksAuthMode m) {
  for (const auto& [v, name] : kModeNames) {
    if (v == m) return name;
  }
  return "CONFIG_MAP";
}

std::optional<EksAuthMode> ParseEksAuthMode(std::string_view name) {
  for (const auto& [v, n] : kModeNames) {
    if (n == name) return v;
  }
  return std::nullopt;
}

StatusOr<EksCluster> SqliteStore::eksCluster(const std::string& name_or_arn) {
  return withReader([&](sqlite::Database& db) -> StatusOr<EksCluster> {
    auto s = db.cached(
        absl::StrCat("SELECT ", kClusterCols, " FROM eks_clusters WHERE name = ?1 OR arn = ?1"));
    s.bind(1, name_or_arn);
    return ReadOne<EksCluster>(db, s, "read EKS cluster", ReadCluster, [&] {
      return absl::NotFoundError(absl::StrCat("No cluster found for name: ", name_or_arn, "."));
    });
  });
}

StatusOr<std::vector<EksCluster>> SqliteStore::eksClusters() {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<EksCluster>> {
    auto s = db.cached(absl::StrCat("SELECT ", kClusterCols, " FROM eks_clusters ORDER BY name"));
    return ReadAll<EksCluster>(db, s, "list EKS clusters", ReadCluster);
  });
}

StatusOr<EksAccessEntry> SqliteStore::eksAccessEntry(const std::string& cluster,
                                                     const std::string& principal_arn) {
  return withReader([&](sqlite::Database& db) -> StatusOr<EksAccessEntry> {
    auto s = db.cached(
        absl::StrCat("SELECT ", kEntryCols, " FROM eks_access_entries WHERE key = ?1"));
    s.bind(1, EntryKey(cluster, principal_arn));
    return ReadOne<EksAccessEntry>(db, s, "read access entry", ReadEntry, [&] {
      return absl::NotFoundError(absl::StrCat("The specified principalArn could not be found: ",
                                              principal_arn, "."));
    });
  });
}

StatusOr<EksAccessEntry> SqliteStore::eksAccessEntryByArn(const std::string& arn) {
  return withReader([&](sqlite::Database& db) -> StatusOr<EksAccessEntry> {
    auto s = db.cached(
        absl::StrCat("SELECT ", kEntryCols, " FROM eks_access_entries WHERE arn = ?1"));
    s.bind(1, arn);
    return ReadOne<EksAccessEntry>(db, s, "read access entry", ReadEntry, [&] {
      return absl::NotFoundError(absl::StrCat("No access entry has ARN ", arn, "."));
    });
  });
}

StatusOr<std::vector<EksAccessEntry>> SqliteStore::eksAccessEntries(const std::string& cluster) {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<EksAccessEntry>> {
    auto s = db.cached(absl::StrCat("SELECT ", kEntryCols,
                                    " FROM eks_access_entries WHERE cluster = ?1 ORDER BY key"));
    s.bind(1, cluster);
    return ReadAll<EksAccessEntry>(db, s, "list access entries", ReadEntry);
  });
}

Status WriteEksCluster(sqlite::Database& db, const EksClusterWrite& w, int64_t rev) {
  const EksCluster& c = w.cluster;
  HF_RETURN_IF_ERROR(
      CheckRevision(db, "eks_clusters", "name", c.name, w.expected_revision, "EKS cluster"));
  if (w.erase) {
    auto entries = db.cached("DELETE FROM eks_access_entries WHERE cluster = ?1");
    entries.bind(1, c.name);
    HF_RETURN_IF_ERROR(RunWrite(db, entries, "delete access entries"));
    auto s = db.cached("DELETE FROM eks_clusters WHERE name = ?1");
    s.bind(1, c.name);
    return RunWrite(db, s, "delete EKS cluster");
  }
  auto s = db.cached(absl::StrCat(
      "INSERT INTO eks_clusters (", kClusterCols,
      ") VALUES (?1, ?2, ?3, ?4) ON CONFLICT(name) DO UPDATE SET arn = excluded.arn, "
      "revision = excluded.revision, body = excluded.body"));
  s.bindAll(c.name, c.arn, rev, ClusterBody(c));
  return RunWrite(db, s, "write EKS cluster");
}

Status WriteEksAccessEntry(sqlite::Database& db, const EksAccessEntryWrite& w, int64_t rev) {
  const EksAccessEntry& e = w.entry;
  const std::string key = EntryKey(e.cluster, e.principal_arn);
  HF_RETURN_IF_ERROR(CheckRevision(db, "eks_access_entries", "key", key, w.expected_revision,
                                   "Access entry"));
  if (w.erase) {
    auto s = db.cached("DELETE FROM eks_access_entries WHERE key = ?1");
    s.bind(1, key);
    return RunWrite(db, s, "delete access entry");
  }
  HF_ASSIGN_OR_RETURN(int64_t cluster_rev, RowRevision(db, "eks_clusters", "name", e.cluster));
  if (cluster_rev == kMustNotExist) {
    return absl::FailedPreconditionError(
        absl::StrCat("EKS cluster ", e.cluster, " no longer exists"));
  }
  auto s = db.cached(absl::StrCat(
      "INSERT INTO eks_access_entries (", kEntryCols,
      ") VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(key) DO UPDATE SET arn = excluded.arn, "
      "revision = excluded.revision, body = excluded.body"));
  s.bindAll(key, e.cluster, e.arn, rev, EntryBody(e));
  return RunWrite(db, s, "write access entry");
}

}  // namespace hf::store
