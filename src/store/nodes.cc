// Nodes in the SQLite store: the row codec, reads, group counts and the writes of a batch.
// The JSON body's codec is node_json.cc.
#include <set>

#include "absl/strings/str_cat.h"
#include "store/keyset.h"
#include "store/node_json.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {
namespace {

using nlohmann::json;

constexpr const char* kNodeCols =
    "cluster_id, instance_id, logical_id, group_name, instance_type, status, message, "
    "launch_time, private_ip, hostname, revision, body";

// The columns of a node summary: all but the JSON body, which list pages never need.
constexpr const char* kNodeSummaryCols =
    "cluster_id, instance_id, logical_id, group_name, instance_type, status, message, "
    "launch_time, private_ip, hostname, revision";

/// A node from the columns kNodeSummaryCols, and the body after them when `body_column`.
model::Node ReadNode(const sqlite::Statement& s, bool body_column) {
  model::Node n;
  ReadTexts(s, 0, n.cluster_id, n.instance_id, n.logical_id, n.group, n.instance_type);
  // A status this binary does not know cannot come from it: read it as failed.
  n.status = model::ParseInstanceStatus(s.text(5)).value_or(model::InstanceStatus::kFailure);
  n.message = s.text(6);
  n.launch_time = FromEpochSeconds(s.real(7));
  ReadTexts(s, 8, n.private_ip, n.hostname);
  n.revision = s.int64(10);
  if (body_column) ReadNodeBody(json::parse(s.text(11), nullptr, false), n);
  return n;
}

model::Node ReadFullNode(const sqlite::Statement& s) { return ReadNode(s, true); }
model::Node ReadNodeSummary(const sqlite::Statement& s) { return ReadNode(s, false); }

/// Adds `n` instances of status `status` to `g`.
void Count(GroupCounts& g, const std::string& status, int n) {
  const auto parsed = model::ParseInstanceStatus(status);
  if (parsed == model::instance_status::kRunning) {
    g.running += n;
  } else if (parsed == model::instance_status::kPending) {
    g.pending += n;
  } else if (parsed == model::instance_status::kFailure) {
    g.failed += n;
  } else if (parsed == model::instance_status::kShuttingDown) {
    g.shutting_down += n;
  } else {
    g.other += n;
  }
}

StatusOr<std::map<std::string, GroupCounts>> CountNodes(sqlite::Database& db,
                                                        const std::string& cluster_id) {
  auto s = db.cached(
      "SELECT group_name, status, COUNT(*) FROM nodes WHERE cluster_id = ?1 "
      "GROUP BY group_name, status");
  s.bind(1, cluster_id);
  std::map<std::string, GroupCounts> out;
  HF_RETURN_IF_ERROR(ForEachRow(db, s, "count nodes", [&](const sqlite::Statement& row) {
    Count(out[row.text(0)], row.text(1), static_cast<int>(row.int64(2)));
  }));
  return out;
}

}  // namespace

StatusOr<std::vector<model::Node>> SqliteStore::nodes(const std::string& cluster_id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<model::Node>> {
    auto s = db.cached(absl::StrCat("SELECT ", kNodeCols,
                                    " FROM nodes WHERE cluster_id = ?1 ORDER BY launch_time, "
                                    "instance_id"));
    s.bind(1, cluster_id);
    return ReadAll<model::Node>(db, s, "list nodes", ReadFullNode);
  });
}

StatusOr<NodeChanges> SqliteStore::nodesChangedSince(const std::string& cluster_id,
                                                     int64_t since) {
  return withReader([&](sqlite::Database& db) -> StatusOr<NodeChanges> {
    // Ids and records from one snapshot: a write in between would otherwise go unseen.
    HF_RETURN_IF_ERROR(db.exec("BEGIN"));
    auto result = [&]() -> StatusOr<NodeChanges> {
      NodeChanges out;
      // The order of nodes(), from the index nodes_by_time alone.
      auto ids = db.cached(
          "SELECT instance_id FROM nodes WHERE cluster_id = ?1 ORDER BY launch_time, "
          "instance_id");
      ids.bind(1, cluster_id);
      HF_RETURN_IF_ERROR(ForEachRow(db, ids, "list node ids", [&](const sqlite::Statement& row) {
        out.ids.push_back(row.text(0));
      }));
      auto s = db.cached(absl::StrCat("SELECT ", kNodeCols,
                                      " FROM nodes WHERE cluster_id = ?1 AND revision > ?2"));
      s.bind(1, cluster_id).bind(2, since);
      HF_ASSIGN_OR_RETURN(out.changed, ReadAll<model::Node>(db, s, "list changed nodes",
                                                            ReadFullNode));
      return out;
    }();
    (void)db.exec("COMMIT");
    return result;
  });
}

StatusOr<Page<model::Node>> SqliteStore::listNodes(const std::string& cluster_id,
                                                   const NodeQuery& q) {
  const bool by_time = q.sort_by == SortBy::kCreationTime;
  // NAME orders nodes by instance group name, then instance id.
  Keyset keys{by_time ? "launch_time" : "group_name", "instance_id", by_time, q.descending, {}};
  HF_RETURN_IF_ERROR(keys.start(q.page_token));
  const CreatedFilter filter{"launch_time", "group_name", 2, q.created_after, q.created_before,
                             q.group_contains};
  const std::string sql = absl::StrCat("SELECT ", kNodeSummaryCols,
                                       " FROM nodes WHERE cluster_id = ?1", filter.sql(),
                                       keys.sql(5, 7));
  return withReader([&](sqlite::Database& db) -> StatusOr<Page<model::Node>> {
    auto s = db.cached(sql);
    s.bind(1, cluster_id);
    filter.bind(s);
    keys.bind(s, 5, 7, q.limit);
    return keys.collect<model::Node>(db, s, q.limit, ReadNodeSummary, [&](const model::Node& last) {
      return std::pair(by_time ? json(ToEpochSeconds(last.launch_time)) : json(last.group),
                       last.instance_id);
    });
  });
}

StatusOr<std::map<std::string, GroupCounts>> SqliteStore::groupCounts(
    const std::string& cluster_id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::map<std::string, GroupCounts>> {
    // A cluster's revision changes with every write to it or to any of its nodes, so
    // counts computed at a revision stay right until the revision moves. Revision and
    // counts are read in one snapshot.
    HF_RETURN_IF_ERROR(db.exec("BEGIN"));
    auto result = countsAtCurrentRevision(db, cluster_id);
    (void)db.exec("COMMIT");
    return result;
  });
}

StatusOr<std::map<std::string, GroupCounts>> SqliteStore::countsAtCurrentRevision(
    sqlite::Database& db, const std::string& cluster_id) {
  HF_ASSIGN_OR_RETURN(int64_t revision, RowRevision(db, "clusters", "id", cluster_id));
  {
    std::lock_guard lock(counts_mu_);
    auto it = counts_cache_.find(cluster_id);
    if (it != counts_cache_.end() && it->second.first == revision) return it->second.second;
  }
  HF_ASSIGN_OR_RETURN(auto counts, CountNodes(db, cluster_id));
  std::lock_guard lock(counts_mu_);
  counts_cache_[cluster_id] = {revision, counts};
  return counts;
}

StatusOr<model::Node> SqliteStore::node(const std::string& cluster_id, const std::string& id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<model::Node> {
    // Two indexed lookups: with "instance_id = ?2 OR logical_id = ?2" SQLite walks every
    // node of the cluster (a heartbeat's read was linear in the cluster's size).
    auto s = db.cached(absl::StrCat(
        "SELECT ", kNodeCols, " FROM nodes WHERE cluster_id = ?1 AND instance_id = ?2 ",
        "UNION ALL SELECT ", kNodeCols,
        " FROM nodes WHERE cluster_id = ?1 AND logical_id = ?2 AND instance_id <> ?2"));
    s.bind(1, cluster_id).bind(2, id);
    return ReadOne<model::Node>(db, s, "read node", ReadFullNode, [&] {
      return absl::NotFoundError(absl::StrCat("Node ", id, " not found in the cluster"));
    });
  });
}

Status WriteNode(sqlite::Database& db, const NodeWrite& w, int64_t rev) {
  const auto& n = w.node;
  HF_RETURN_IF_ERROR(
      CheckRevision(db, "nodes", "instance_id", n.instance_id, w.expected_revision, "Node"));
  if (w.erase) {
    auto s = db.cached("DELETE FROM nodes WHERE instance_id = ?1");
    s.bind(1, n.instance_id);
    return RunWrite(db, s, "delete node");
  }
  auto s = db.cached(
      "INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, "
      "status, message, launch_time, private_ip, hostname, revision, body) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(instance_id) DO "
      "UPDATE SET cluster_id = excluded.cluster_id, logical_id = excluded.logical_id, "
      "group_name = excluded.group_name, instance_type = excluded.instance_type, "
      "status = excluded.status, message = excluded.message, "
      "launch_time = excluded.launch_time, private_ip = excluded.private_ip, "
      "hostname = excluded.hostname, revision = excluded.revision, body = excluded.body");
  s.bindAll(n.cluster_id, n.instance_id, n.logical_id, n.group, n.instance_type,
            model::ToString(n.status), n.message, ToEpochSeconds(n.launch_time), n.private_ip,
            n.hostname, rev, NodeBody(n).dump());
  return RunWrite(db, s, "write node");
}

Status TouchClustersOf(sqlite::Database& db, const std::vector<NodeWrite>& nodes, int64_t rev) {
  std::set<std::string> touched;
  for (const auto& w : nodes) touched.insert(w.node.cluster_id);
  for (const auto& id : touched) {
    auto s = db.cached("UPDATE clusters SET revision = ?2 WHERE id = ?1");
    s.bind(1, id).bind(2, rev);
    HF_RETURN_IF_ERROR(RunWrite(db, s, "bump cluster revision"));
  }
  return absl::OkStatus();
}

}  // namespace hf::store
