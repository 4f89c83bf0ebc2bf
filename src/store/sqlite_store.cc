// SQLite implementation of hf::store::Store.
//
// One write connection (serialised by a mutex) and a pool of read connections; WAL mode lets
// readers run while a write commits. synchronous=FULL so that an acknowledged commit survives
// a kill -9 or power loss. Row revisions come from one monotonically increasing counter kept
// in the `meta` table and bumped by every commit.
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hyperfleet/store/store.h"
#include "store/migrations.h"
#include "store/node_json.h"

namespace hf::store {
namespace {

using nlohmann::json;

Status SqliteError(sqlite3* db, std::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite: ", std::string(what), ": ",
                                          db ? sqlite3_errmsg(db) : "out of memory"));
}

/// A prepared statement, reset on release. Not thread-safe (owned by one connection user).
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(s_); }
  std::string text(int col) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, sqlite3_column_bytes(s_, col)) : std::string();
  }
  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }

 private:
  sqlite3_stmt* s_;
};

/// One SQLite connection with a statement cache.
class Connection {
 public:
  static StatusOr<std::unique_ptr<Connection>> Open(const std::string& path, bool readonly) {
    sqlite3* db = nullptr;
    int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
      Status s = SqliteError(db, "open " + path);
      sqlite3_close(db);
      return s;
    }
    auto conn = std::unique_ptr<Connection>(new Connection(db));
    sqlite3_busy_timeout(db, 10000);
    // A small page cache per connection: the OS page cache already holds the file, and the
    // server keeps several connections open.
    HF_RETURN_IF_ERROR(conn->exec(readonly ? "PRAGMA cache_size=-1024" : "PRAGMA cache_size=-4096"));
    HF_RETURN_IF_ERROR(conn->exec("PRAGMA foreign_keys=ON"));
    return conn;
  }
  ~Connection() {
    for (auto& [sql, s] : cache_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  sqlite3* db() const { return db_; }

  Status exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      Status s = absl::InternalError(absl::StrCat("sqlite: ", sql.substr(0, 60), ": ",
                                                  err ? err : "error"));
      sqlite3_free(err);
      return s;
    }
    return absl::OkStatus();
  }

  /// A cached prepared statement for `sql`. Programming errors in SQL are fatal.
  Stmt stmt(const std::string& sql) {
    auto it = cache_.find(sql);
    if (it == cache_.end()) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) !=
          SQLITE_OK) {
        // The SQL is ours: failing to prepare it is a broken invariant.
        fprintf(stderr, "hyperfleet: bad SQL (%s): %s\n", sqlite3_errmsg(db_), sql.c_str());
        abort();
      }
      it = cache_.emplace(sql, s).first;
    }
    return Stmt(it->second);
  }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

// ---- page tokens ------------------------------------------------------------------------
// A NextToken is the hex of a small JSON document {"k": <sort key>, "i": <tie-breaker>}:
// keyset pagination, stable under concurrent inserts.

std::string EncodeToken(const json& key, const std::string& tie) {
  std::string raw = json{{"k", key}, {"i", tie}}.dump();
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

struct Token {
  json key;
  std::string tie;
};

StatusOr<Token> DecodeToken(const std::string& token, bool numeric_key) {
  auto bad = [] { return absl::InvalidArgumentError("Invalid pagination token (NextToken)."); };
  if (token.size() % 2 != 0 || token.size() > 8192) return bad();
  std::string raw;
  raw.reserve(token.size() / 2);
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nib(token[i]), lo = nib(token[i + 1]);
    if (hi < 0 || lo < 0) return bad();
    raw.push_back(static_cast<char>(hi * 16 + lo));
  }
  json j = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("k") || !j.contains("i") || !j["i"].is_string()) {
    return bad();
  }
  if (numeric_key ? !j["k"].is_number() : !j["k"].is_string()) return bad();
  return Token{j["k"], j["i"].get<std::string>()};
}

// ---- row codecs -------------------------------------------------------------------------

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

model::Cluster ReadCluster(const Stmt& s) {
  model::Cluster c;
  c.id = s.text(0);
  c.name = s.text(1);
  c.arn = s.text(2);
  c.status = s.text(3);
  c.failure_message = s.text(4);
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

constexpr const char* kNodeCols =
    "cluster_id, instance_id, logical_id, group_name, instance_type, status, message, "
    "launch_time, private_ip, hostname, revision, body";

// The columns of a node summary: all but the JSON body, which list pages never need.
constexpr const char* kNodeSummaryCols =
    "cluster_id, instance_id, logical_id, group_name, instance_type, status, message, "
    "launch_time, private_ip, hostname, revision";

model::Node ReadNode(const Stmt& s, bool body_column = true) {
  model::Node n;
  n.cluster_id = s.text(0);
  n.instance_id = s.text(1);
  n.logical_id = s.text(2);
  n.group = s.text(3);
  n.instance_type = s.text(4);
  // A status this binary does not know cannot come from it: read it as failed.
  n.status = model::ParseInstanceStatus(s.text(5)).value_or(model::InstanceStatus::kFailure);
  n.message = s.text(6);
  n.launch_time = FromEpochSeconds(s.real(7));
  n.private_ip = s.text(8);
  n.hostname = s.text(9);
  n.revision = s.int64(10);
  if (!body_column) return n;
  ReadNodeBody(json::parse(s.text(11), nullptr, false), n);
  return n;
}

constexpr const char* kEventCols =
    "seq, id, cluster_id, group_name, instance_id, resource_type, level, time, description, "
    "metadata";

model::Event ReadEvent(const Stmt& s) {
  model::Event e;
  e.seq = s.int64(0);
  e.id = s.text(1);
  e.cluster_id = s.text(2);
  e.group = s.text(3);
  e.instance_id = s.text(4);
  e.resource_type = s.text(5);
  e.level = s.text(6);
  e.time = FromEpochSeconds(s.real(7));
  e.description = s.text(8);
  e.metadata = json::parse(s.text(9), nullptr, false);
  if (e.metadata.is_discarded()) e.metadata = json();
  return e;
}

constexpr const char* kSchedulerCols =
    "id, kind, cluster_id, arn, name, team, status, version, creation_time, "
    "last_modified_time, revision, body";

model::SchedulerResource ReadSchedulerResource(const Stmt& s) {
  model::SchedulerResource r;
  r.id = s.text(0);
  r.kind = s.text(1);
  r.cluster_id = s.text(2);
  r.arn = s.text(3);
  r.name = s.text(4);
  r.team = s.text(5);
  r.status = s.text(6);
  r.version = static_cast<int>(s.int64(7));
  r.creation_time = FromEpochSeconds(s.real(8));
  r.last_modified_time = FromEpochSeconds(s.real(9));
  r.revision = s.int64(10);
  r.body = json::parse(s.text(11), nullptr, false);
  if (!r.body.is_object()) r.body = json::object();
  return r;
}

/// LIKE pattern matching `needle` anywhere, with LIKE's wildcards escaped.
std::string ContainsPattern(const std::string& needle) {
  std::string p = "%";
  for (char c : needle) {
    if (c == '%' || c == '_' || c == '\\') p.push_back('\\');
    p.push_back(c);
  }
  p.push_back('%');
  return p;
}

/// Keyset pagination over (sort key, tie-breaker) columns, shared by every list query: the
/// page starts strictly after the last row of the previous page, in the requested order.
struct Keyset {
  const char* key_col;  ///< sort column
  const char* tie_col;  ///< unique tie-breaker column
  bool numeric_key;     ///< sort column holds numbers (epoch seconds), else text
  bool descending;
  std::optional<Token> after;  ///< from the request's NextToken

  /// Parses `page_token` (empty: first page). InvalidArgument for a token that is not ours.
  Status start(const std::string& page_token) {
    if (page_token.empty()) return absl::OkStatus();
    HF_ASSIGN_OR_RETURN(after, DecodeToken(page_token, numeric_key));
    return absl::OkStatus();
  }
  /// The WHERE condition (bound at ?key_param, ?key_param+1) and ORDER BY ... LIMIT ?limit.
  std::string sql(int key_param, int limit_param) const {
    const char* dir = descending ? "DESC" : "ASC";
    return absl::StrCat(
        after ? absl::StrCat(" AND (", key_col, ", ", tie_col, ") ", descending ? "<" : ">",
                             " (?", key_param, ", ?", key_param + 1, ")")
              : "",
        " ORDER BY ", key_col, " ", dir, ", ", tie_col, " ", dir, " LIMIT ?", limit_param);
  }
  void bind(Stmt& s, int key_param, int limit_param, int limit) const {
    if (after) {
      if (numeric_key) {
        s.bind(key_param, after->key.get<double>());
      } else {
        s.bind(key_param, after->key.get<std::string>());
      }
      s.bind(key_param + 1, after->tie);
    }
    s.bind(limit_param, static_cast<int64_t>(limit) + 1);  // one more: is there a next page?
  }
  /// Reads the rows of `s` into a page of at most `limit` items; `key_of(item)` gives the
  /// (sort key, tie-breaker) that the next page's token starts after.
  template <class T, class ReadFn, class KeyFn>
  StatusOr<Page<T>> collect(Connection& c, Stmt& s, int limit, ReadFn read, KeyFn key_of) const {
    Page<T> page;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) page.items.push_back(read(s));
    if (rc != SQLITE_DONE) return SqliteError(c.db(), "list");
    if (static_cast<int>(page.items.size()) > limit) {
      page.items.resize(limit);
      auto [key, tie] = key_of(page.items.back());
      page.next_token = EncodeToken(key, tie);
    }
    return page;
  }
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(std::string path) : path_(std::move(path)) {}

  Status open() {
    HF_ASSIGN_OR_RETURN(writer_, Connection::Open(path_, /*readonly=*/false));
    in_memory_ = path_ == ":memory:";
    if (!in_memory_) {
      HF_RETURN_IF_ERROR(writer_->exec("PRAGMA journal_mode=WAL"));
    }
    HF_RETURN_IF_ERROR(writer_->exec("PRAGMA synchronous=FULL"));
    return Migrate(writer_->db());
  }

  // hf::store::Store
  StatusOr<int64_t> commit(const WriteBatch& batch) override {
    std::lock_guard lock(write_mu_);
    Connection& c = *writer_;
    HF_RETURN_IF_ERROR(c.exec("BEGIN IMMEDIATE"));
    auto result = apply(c, batch);
    if (!result.ok()) {
      (void)c.exec("ROLLBACK");
      return result.status();
    }
    Status s = c.exec("COMMIT");
    if (!s.ok()) {
      (void)c.exec("ROLLBACK");
      return s;
    }
    return result;
  }

  StatusOr<model::Cluster> cluster(const std::string& name_or_arn) override {
    return readCluster("name = ?1 OR arn = ?1", name_or_arn);
  }

  StatusOr<model::Cluster> clusterById(const std::string& id) override {
    return readCluster("id = ?1", id);
  }

  StatusOr<model::Cluster> readCluster(const char* condition, const std::string& key) {
    return withReader([&](Connection& c) -> StatusOr<model::Cluster> {
      auto s = c.stmt(absl::StrCat("SELECT ", kClusterCols, " FROM clusters WHERE ", condition));
      s.bind(1, key);
      int rc = s.step();
      if (rc == SQLITE_ROW) return ReadCluster(s);
      if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("Cluster ", key, " not found"));
      return SqliteError(c.db(), "read cluster");
    });
  }

  StatusOr<std::vector<model::Cluster>> allClusters() override {
    return withReader([&](Connection& c) -> StatusOr<std::vector<model::Cluster>> {
      auto s = c.stmt(absl::StrCat("SELECT ", kClusterCols, " FROM clusters ORDER BY id"));
      std::vector<model::Cluster> out;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) out.push_back(ReadCluster(s));
      if (rc != SQLITE_DONE) return SqliteError(c.db(), "list clusters");
      return out;
    });
  }

  StatusOr<Page<model::Cluster>> listClusters(const ClusterQuery& q) override {
    const bool by_time = q.sort_by == SortBy::kCreationTime;
    Keyset keys{by_time ? "creation_time" : "name", "id", by_time, q.descending, {}};
    HF_RETURN_IF_ERROR(keys.start(q.page_token));
    // Conditions appear only when used: an always-present range on the sort column would
    // keep SQLite from seeking to the page's start in the index.
    std::string sql = absl::StrCat(
        "SELECT ", kClusterCols, " FROM clusters WHERE 1",
        q.created_after ? " AND creation_time > ?1" : "",
        q.created_before ? " AND creation_time < ?2" : "",
        q.name_contains.empty() ? "" : " AND name LIKE ?3 ESCAPE '\\'", keys.sql(4, 6));
    return withReader([&](Connection& c) -> StatusOr<Page<model::Cluster>> {
      auto s = c.stmt(sql);
      if (q.created_after) s.bind(1, ToEpochSeconds(*q.created_after));
      if (q.created_before) s.bind(2, ToEpochSeconds(*q.created_before));
      if (!q.name_contains.empty()) s.bind(3, ContainsPattern(q.name_contains));
      keys.bind(s, 4, 6, q.limit);
      return keys.collect<model::Cluster>(
          c, s, q.limit, [](const Stmt& row) { return ReadCluster(row); },
          [&](const model::Cluster& last) {
            return std::pair(by_time ? json(ToEpochSeconds(last.creation_time)) : json(last.name),
                             last.id);
          });
    });
  }

  StatusOr<std::vector<model::Node>> nodes(const std::string& cluster_id) override {
    return withReader([&](Connection& c) -> StatusOr<std::vector<model::Node>> {
      auto s = c.stmt(absl::StrCat("SELECT ", kNodeCols,
                                   " FROM nodes WHERE cluster_id = ?1 ORDER BY launch_time, "
                                   "instance_id"));
      s.bind(1, cluster_id);
      std::vector<model::Node> out;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) out.push_back(ReadNode(s));
      if (rc != SQLITE_DONE) return SqliteError(c.db(), "list nodes");
      return out;
    });
  }

  StatusOr<Page<model::Node>> listNodes(const std::string& cluster_id,
                                        const NodeQuery& q) override {
    const bool by_time = q.sort_by == SortBy::kCreationTime;
    // NAME orders nodes by instance group name, then instance id.
    Keyset keys{by_time ? "launch_time" : "group_name", "instance_id", by_time, q.descending, {}};
    HF_RETURN_IF_ERROR(keys.start(q.page_token));
    std::string sql = absl::StrCat(
        "SELECT ", kNodeSummaryCols, " FROM nodes WHERE cluster_id = ?1",
        q.created_after ? " AND launch_time > ?2" : "",
        q.created_before ? " AND launch_time < ?3" : "",
        q.group_contains.empty() ? "" : " AND group_name LIKE ?4 ESCAPE '\\'", keys.sql(5, 7));
    return withReader([&](Connection& c) -> StatusOr<Page<model::Node>> {
      auto s = c.stmt(sql);
      s.bind(1, cluster_id);
      if (q.created_after) s.bind(2, ToEpochSeconds(*q.created_after));
      if (q.created_before) s.bind(3, ToEpochSeconds(*q.created_before));
      if (!q.group_contains.empty()) s.bind(4, ContainsPattern(q.group_contains));
      keys.bind(s, 5, 7, q.limit);
      return keys.collect<model::Node>(
          c, s, q.limit, [](const Stmt& row) { return ReadNode(row, /*body_column=*/false); },
          [&](const model::Node& last) {
            return std::pair(by_time ? json(ToEpochSeconds(last.launch_time)) : json(last.group),
                             last.instance_id);
          });
    });
  }


  StatusOr<std::map<std::string, GroupCounts>> groupCounts(
      const std::string& cluster_id) override {
    return withReader([&](Connection& c) -> StatusOr<std::map<std::string, GroupCounts>> {
      // A cluster's revision changes with every write to it or to any of its nodes, so
      // counts computed at a revision stay right until the revision moves. Revision and
      // counts are read in one snapshot.
      HF_RETURN_IF_ERROR(c.exec("BEGIN"));
      auto result = countsAtCurrentRevision(c, cluster_id);
      (void)c.exec("COMMIT");
      return result;
    });
  }

  StatusOr<std::map<std::string, GroupCounts>> countsAtCurrentRevision(
      Connection& c, const std::string& cluster_id) {
    HF_ASSIGN_OR_RETURN(int64_t revision, rowRevision(c, "clusters", "id", cluster_id));
    {
      std::lock_guard lock(counts_mu_);
      auto it = counts_cache_.find(cluster_id);
      if (it != counts_cache_.end() && it->second.first == revision) return it->second.second;
    }
    HF_ASSIGN_OR_RETURN(auto counts, countNodes(c, cluster_id));
    std::lock_guard lock(counts_mu_);
    counts_cache_[cluster_id] = {revision, counts};
    return counts;
  }

  StatusOr<std::map<std::string, GroupCounts>> countNodes(Connection& c,
                                                        const std::string& cluster_id) {
    auto s = c.stmt(
        "SELECT group_name, status, COUNT(*) FROM nodes WHERE cluster_id = ?1 "
        "GROUP BY group_name, status");
    s.bind(1, cluster_id);
    std::map<std::string, GroupCounts> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      GroupCounts& g = out[s.text(0)];
      const auto status = model::ParseInstanceStatus(s.text(1));
      const int n = static_cast<int>(s.int64(2));
      if (status == model::instance_status::kRunning) {
        g.running += n;
      } else if (status == model::instance_status::kPending) {
        g.pending += n;
      } else if (status == model::instance_status::kFailure) {
        g.failed += n;
      } else if (status == model::instance_status::kShuttingDown) {
        g.shutting_down += n;
      } else {
        g.other += n;
      }
    }
    if (rc != SQLITE_DONE) return SqliteError(c.db(), "count nodes");
    return out;
  }

  StatusOr<model::Node> node(const std::string& cluster_id, const std::string& id) override {
    return withReader([&](Connection& c) -> StatusOr<model::Node> {
      auto s = c.stmt(absl::StrCat(
          "SELECT ", kNodeCols,
          " FROM nodes WHERE cluster_id = ?1 AND (instance_id = ?2 OR logical_id = ?2)"));
      s.bind(1, cluster_id).bind(2, id);
      int rc = s.step();
      if (rc == SQLITE_ROW) return ReadNode(s);
      if (rc == SQLITE_DONE) {
        return absl::NotFoundError(absl::StrCat("Node ", id, " not found in the cluster"));
      }
      return SqliteError(c.db(), "read node");
    });
  }

  StatusOr<Page<model::Event>> listEvents(const std::string& cluster_id,
                                          const EventQuery& q) override {
    Keyset keys{"time", "seq", /*numeric_key=*/true, q.descending, {}};
    HF_RETURN_IF_ERROR(keys.start(q.page_token));
    int64_t after_seq = 0;
    if (keys.after && !absl::SimpleAtoi(keys.after->tie, &after_seq)) {
      return absl::InvalidArgumentError("Invalid pagination token (NextToken).");
    }
    std::string sql = absl::StrCat(
        "SELECT ", kEventCols, " FROM events WHERE cluster_id = ?1",
        q.after ? " AND time > ?2" : "", q.before ? " AND time < ?3" : "",
        q.group.empty() ? "" : " AND group_name = ?4",
        q.instance_id.empty() ? "" : " AND instance_id = ?5",
        q.resource_type.empty() ? "" : " AND resource_type = ?6", keys.sql(7, 9));
    return withReader([&](Connection& c) -> StatusOr<Page<model::Event>> {
      auto s = c.stmt(sql);
      s.bind(1, cluster_id);
      if (q.after) s.bind(2, ToEpochSeconds(*q.after));
      if (q.before) s.bind(3, ToEpochSeconds(*q.before));
      if (!q.group.empty()) s.bind(4, q.group);
      if (!q.instance_id.empty()) s.bind(5, q.instance_id);
      if (!q.resource_type.empty()) s.bind(6, q.resource_type);
      keys.bind(s, 7, 9, q.limit);
      if (keys.after) s.bind(8, after_seq);  // seq is an integer column
      return keys.collect<model::Event>(
          c, s, q.limit, [](const Stmt& row) { return ReadEvent(row); },
          [](const model::Event& last) {
            return std::pair(json(ToEpochSeconds(last.time)), std::to_string(last.seq));
          });
    });
  }


  StatusOr<model::Event> event(const std::string& cluster_id, const std::string& id) override {
    return withReader([&](Connection& c) -> StatusOr<model::Event> {
      auto s = c.stmt(absl::StrCat("SELECT ", kEventCols,
                                   " FROM events WHERE cluster_id = ?1 AND id = ?2"));
      s.bind(1, cluster_id).bind(2, id);
      int rc = s.step();
      if (rc == SQLITE_ROW) return ReadEvent(s);
      if (rc == SQLITE_DONE) {
        return absl::NotFoundError(absl::StrCat("Event ", id, " not found"));
      }
      return SqliteError(c.db(), "read event");
    });
  }

  StatusOr<std::vector<model::Tag>> tags(const std::string& resource_arn) override {
    return withReader([&](Connection& c) -> StatusOr<std::vector<model::Tag>> {
      auto s = c.stmt("SELECT key, value FROM tags WHERE resource_arn = ?1 ORDER BY key");
      s.bind(1, resource_arn);
      std::vector<model::Tag> out;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) out.push_back({s.text(0), s.text(1)});
      if (rc != SQLITE_DONE) return SqliteError(c.db(), "list tags");
      return out;
    });
  }

  StatusOr<model::SchedulerResource> schedulerResource(const std::string& kind,
                                                       const std::string& id) override {
    return withReader([&](Connection& c) -> StatusOr<model::SchedulerResource> {
      auto s = c.stmt(absl::StrCat("SELECT ", kSchedulerCols,
                                   " FROM scheduler_resources WHERE kind = ?1 AND id = ?2"));
      s.bind(1, kind).bind(2, id);
      int rc = s.step();
      if (rc == SQLITE_ROW) return ReadSchedulerResource(s);
      if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat(kind, " ", id, " not found"));
      return SqliteError(c.db(), "read scheduler resource");
    });
  }

  StatusOr<model::SchedulerResource> schedulerResourceVersion(const std::string& kind,
                                                              const std::string& id,
                                                              int version) override {
    HF_ASSIGN_OR_RETURN(auto current, schedulerResource(kind, id));
    if (version == current.version) return current;
    return withReader([&](Connection& c) -> StatusOr<model::SchedulerResource> {
      auto s = c.stmt(
          "SELECT status, last_modified_time, body FROM scheduler_resource_versions "
          "WHERE id = ?1 AND version = ?2");
      s.bind(1, id).bind(2, static_cast<int64_t>(version));
      int rc = s.step();
      if (rc == SQLITE_DONE) {
        return absl::NotFoundError(
            absl::StrCat(kind, " ", id, " has no version ", version,
                         " (current version ", current.version, ")"));
      }
      if (rc != SQLITE_ROW) return SqliteError(c.db(), "read scheduler resource version");
      model::SchedulerResource r = current;
      r.version = version;
      r.status = s.text(0);
      r.last_modified_time = FromEpochSeconds(s.real(1));
      r.body = json::parse(s.text(2), nullptr, false);
      if (!r.body.is_object()) r.body = json::object();
      return r;
    });
  }

  StatusOr<std::vector<model::SchedulerResource>> schedulerResources(
      const std::string& kind, const std::string& cluster_id) override {
    return withReader([&](Connection& c) -> StatusOr<std::vector<model::SchedulerResource>> {
      auto s = c.stmt(absl::StrCat("SELECT ", kSchedulerCols,
                                   " FROM scheduler_resources WHERE kind = ?1 AND "
                                   "(?2 = '' OR cluster_id = ?2) ORDER BY id"));
      s.bind(1, kind).bind(2, cluster_id);
      std::vector<model::SchedulerResource> out;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) out.push_back(ReadSchedulerResource(s));
      if (rc != SQLITE_DONE) return SqliteError(c.db(), "list scheduler resources");
      return out;
    });
  }

 private:
  /// Runs `fn` with a read connection from the pool (the writer for in-memory stores).
  template <class Fn>
  auto withReader(Fn&& fn) -> decltype(fn(std::declval<Connection&>())) {
    if (in_memory_) {
      std::lock_guard lock(write_mu_);
      return fn(*writer_);
    }
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard lock(pool_mu_);
      if (!readers_.empty()) {
        conn = std::move(readers_.back());
        readers_.pop_back();
      }
    }
    if (!conn) {
      auto opened = Connection::Open(path_, /*readonly=*/true);
      if (!opened.ok()) return opened.status();
      conn = std::move(opened).value();
    }
    // Each read is its own implicit transaction: a consistent snapshot per call.
    auto result = fn(*conn);
    {
      std::lock_guard lock(pool_mu_);
      if (readers_.size() < 64) readers_.push_back(std::move(conn));
    }
    return result;
  }

  /// Revision of a row, or kMustNotExist when absent.
  StatusOr<int64_t> rowRevision(Connection& c, const char* table, const char* key_col,
                                const std::string& key) {
    auto s = c.stmt(absl::StrCat("SELECT revision FROM ", table, " WHERE ", key_col, " = ?1"));
    s.bind(1, key);
    int rc = s.step();
    if (rc == SQLITE_ROW) return s.int64(0);
    if (rc == SQLITE_DONE) return kMustNotExist;
    return SqliteError(c.db(), "read revision");
  }

  Status checkRevision(Connection& c, const char* table, const char* key_col,
                       const std::string& key, int64_t expected, const char* what) {
    HF_ASSIGN_OR_RETURN(int64_t actual, rowRevision(c, table, key_col, key));
    if (actual == expected) return absl::OkStatus();
    if (expected == kMustNotExist) {
      return absl::FailedPreconditionError(absl::StrCat(what, " ", key, " already exists"));
    }
    if (actual == kMustNotExist) {
      return absl::FailedPreconditionError(absl::StrCat(what, " ", key, " no longer exists"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", key, " was modified concurrently (revision ", actual, ", expected ",
        expected, ")"));
  }

  Status stepDone(Connection& c, Stmt& s, const char* what) {
    int rc = s.step();
    if (rc == SQLITE_DONE) return absl::OkStatus();
    if (rc == SQLITE_CONSTRAINT) {
      return absl::AlreadyExistsError(absl::StrCat(what, ": ", sqlite3_errmsg(c.db())));
    }
    return SqliteError(c.db(), what);
  }

  Status writeCluster(Connection& c, const ClusterWrite& w, int64_t rev) {
    const auto& cl = w.cluster;
    HF_RETURN_IF_ERROR(checkRevision(c, "clusters", "id", cl.id, w.expected_revision, "Cluster"));
    if (w.expected_revision == kMustNotExist) {
      // Name uniqueness is checked here so the error names the cluster (ResourceInUse).
      auto q = c.stmt("SELECT 1 FROM clusters WHERE name = ?1");
      q.bind(1, cl.name);
      if (q.step() == SQLITE_ROW) {
        return absl::AlreadyExistsError(
            absl::StrCat("Cluster with name ", cl.name, " already exists"));
      }
    }
    auto s = c.stmt(
        "INSERT INTO clusters (id, name, arn, status, failure_message, creation_time, "
        "revision, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO UPDATE SET "
        "name = excluded.name, arn = excluded.arn, status = excluded.status, "
        "failure_message = excluded.failure_message, creation_time = excluded.creation_time, "
        "revision = excluded.revision, body = excluded.body");
    s.bind(1, cl.id).bind(2, cl.name).bind(3, cl.arn).bind(4, cl.status);
    s.bind(5, cl.failure_message).bind(6, ToEpochSeconds(cl.creation_time)).bind(7, rev);
    s.bind(8, ClusterBody(cl));
    return stepDone(c, s, "write cluster");
  }

  Status eraseCluster(Connection& c, const ClusterWrite& w) {
    const auto& cl = w.cluster;
    HF_RETURN_IF_ERROR(checkRevision(c, "clusters", "id", cl.id, w.expected_revision, "Cluster"));
    for (const char* sql :
         {"DELETE FROM tags WHERE resource_arn IN "
          "(SELECT arn FROM scheduler_resources WHERE cluster_id = ?1)",
          "DELETE FROM scheduler_resource_versions WHERE id IN "
          "(SELECT id FROM scheduler_resources WHERE cluster_id = ?1)",
          "DELETE FROM scheduler_resources WHERE cluster_id = ?1",
          "DELETE FROM nodes WHERE cluster_id = ?1", "DELETE FROM events WHERE cluster_id = ?1",
          "DELETE FROM clusters WHERE id = ?1"}) {
      auto s = c.stmt(sql);
      s.bind(1, cl.id);
      HF_RETURN_IF_ERROR(stepDone(c, s, "delete cluster"));
    }
    auto s = c.stmt("DELETE FROM tags WHERE resource_arn = ?1");
    s.bind(1, cl.arn);
    return stepDone(c, s, "delete tags");
  }

  Status writeSchedulerResource(Connection& c, const SchedulerResourceWrite& w, int64_t rev) {
    const auto& r = w.resource;
    HF_RETURN_IF_ERROR(checkRevision(c, "scheduler_resources", "id", r.id, w.expected_revision,
                                     r.kind.c_str()));
    if (w.erase) {
      for (const char* sql : {"DELETE FROM tags WHERE resource_arn = ?2",
                              "DELETE FROM scheduler_resource_versions WHERE id = ?1",
                              "DELETE FROM scheduler_resources WHERE id = ?1"}) {
        auto s = c.stmt(sql);
        s.bind(1, r.id).bind(2, r.arn);
        HF_RETURN_IF_ERROR(stepDone(c, s, "delete scheduler resource"));
      }
      return absl::OkStatus();
    }
    // Governance objects belong to a live cluster (the foreign key would say so less clearly).
    HF_ASSIGN_OR_RETURN(int64_t cluster_rev, rowRevision(c, "clusters", "id", r.cluster_id));
    if (cluster_rev == kMustNotExist) {
      return absl::FailedPreconditionError(
          absl::StrCat("Cluster ", r.cluster_id, " no longer exists"));
    }
    auto s = c.stmt(
        "INSERT INTO scheduler_resources (id, kind, cluster_id, arn, name, team, status, "
        "version, creation_time, last_modified_time, revision, body) VALUES "
        "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(id) DO UPDATE SET "
        "name = excluded.name, team = excluded.team, status = excluded.status, "
        "version = excluded.version, last_modified_time = excluded.last_modified_time, "
        "revision = excluded.revision, body = excluded.body");
    s.bind(1, r.id).bind(2, r.kind).bind(3, r.cluster_id).bind(4, r.arn).bind(5, r.name);
    s.bind(6, r.team).bind(7, r.status).bind(8, static_cast<int64_t>(r.version));
    s.bind(9, ToEpochSeconds(r.creation_time)).bind(10, ToEpochSeconds(r.last_modified_time));
    s.bind(11, rev).bind(12, r.body.dump());
    HF_RETURN_IF_ERROR(stepDone(c, s, "write scheduler resource"));
    auto v = c.stmt(
        "INSERT INTO scheduler_resource_versions (id, version, status, last_modified_time, "
        "body) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(id, version) DO UPDATE SET "
        "status = excluded.status, last_modified_time = excluded.last_modified_time, "
        "body = excluded.body");
    v.bind(1, r.id).bind(2, static_cast<int64_t>(r.version)).bind(3, r.status);
    v.bind(4, ToEpochSeconds(r.last_modified_time)).bind(5, r.body.dump());
    return stepDone(c, v, "write scheduler resource version");
  }

  // Tags belong to an object that exists (a cluster or a governance object): none lands on
  // one deleted after the writer read it. Both arn columns are UNIQUE, hence indexed.
  Status checkTaggable(Connection& c, const std::string& arn) {
    auto s = c.stmt(
        "SELECT 1 FROM clusters WHERE arn = ?1 UNION ALL "
        "SELECT 1 FROM scheduler_resources WHERE arn = ?1 LIMIT 1");
    s.bind(1, arn);
    const int rc = s.step();
    if (rc == SQLITE_ROW) return absl::OkStatus();
    if (rc != SQLITE_DONE) return SqliteError(c.db(), "find tagged resource");
    return absl::FailedPreconditionError(absl::StrCat("Resource ", arn, " does not exist"));
  }

  StatusOr<int64_t> apply(Connection& c, const WriteBatch& b) {
    int64_t rev;
    {
      auto s = c.stmt("UPDATE meta SET value = value + 1 WHERE key = 'revision' RETURNING value");
      if (s.step() != SQLITE_ROW) return SqliteError(c.db(), "bump revision");
      rev = s.int64(0);
    }
    // Cluster erases run last: they take the cluster's nodes, events and tags with them, so
    // node writes of the same batch must see those rows first.
    for (const auto& w : b.clusters) {
      if (w.erase) continue;
      HF_RETURN_IF_ERROR(writeCluster(c, w, rev));
    }
    for (const auto& w : b.nodes) {
      const auto& n = w.node;
      HF_RETURN_IF_ERROR(
          checkRevision(c, "nodes", "instance_id", n.instance_id, w.expected_revision, "Node"));
      if (w.erase) {
        auto s = c.stmt("DELETE FROM nodes WHERE instance_id = ?1");
        s.bind(1, n.instance_id);
        HF_RETURN_IF_ERROR(stepDone(c, s, "delete node"));
        continue;
      }
      auto s = c.stmt(
          "INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, "
          "status, message, launch_time, private_ip, hostname, revision, body) VALUES "
          "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT(instance_id) DO "
          "UPDATE SET cluster_id = excluded.cluster_id, logical_id = excluded.logical_id, "
          "group_name = excluded.group_name, instance_type = excluded.instance_type, "
          "status = excluded.status, message = excluded.message, "
          "launch_time = excluded.launch_time, private_ip = excluded.private_ip, "
          "hostname = excluded.hostname, revision = excluded.revision, body = excluded.body");
      s.bind(1, n.cluster_id).bind(2, n.instance_id).bind(3, n.logical_id).bind(4, n.group);
      s.bind(5, n.instance_type).bind(6, model::ToString(n.status)).bind(7, n.message);
      s.bind(8, ToEpochSeconds(n.launch_time)).bind(9, n.private_ip).bind(10, n.hostname);
      s.bind(11, rev);
      s.bind(12, NodeBody(n).dump());
      HF_RETURN_IF_ERROR(stepDone(c, s, "write node"));
    }
    // A node write moves its cluster's revision too (see groupCounts).
    std::set<std::string> touched;
    for (const auto& w : b.nodes) touched.insert(w.node.cluster_id);
    for (const auto& id : touched) {
      auto s = c.stmt("UPDATE clusters SET revision = ?2 WHERE id = ?1");
      s.bind(1, id).bind(2, rev);
      HF_RETURN_IF_ERROR(stepDone(c, s, "bump cluster revision"));
    }
    for (const auto& w : b.scheduler_resources) {
      HF_RETURN_IF_ERROR(writeSchedulerResource(c, w, rev));
    }
    for (const auto& e : b.events) {
      auto s = c.stmt(
          "INSERT INTO events (id, cluster_id, group_name, instance_id, resource_type, level, "
          "time, description, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
      s.bind(1, e.id).bind(2, e.cluster_id).bind(3, e.group).bind(4, e.instance_id);
      s.bind(5, e.resource_type).bind(6, e.level).bind(7, ToEpochSeconds(e.time));
      s.bind(8, e.description).bind(9, e.metadata.dump());
      HF_RETURN_IF_ERROR(stepDone(c, s, "append event"));
    }
    for (const auto& t : b.tags) {
      if (!t.put.empty()) HF_RETURN_IF_ERROR(checkTaggable(c, t.resource_arn));
      for (const auto& tag : t.put) {
        auto s = c.stmt(
            "INSERT INTO tags (resource_arn, key, value) VALUES (?1, ?2, ?3) "
            "ON CONFLICT(resource_arn, key) DO UPDATE SET value = excluded.value");
        s.bind(1, t.resource_arn).bind(2, tag.key).bind(3, tag.value);
        HF_RETURN_IF_ERROR(stepDone(c, s, "put tag"));
      }
      for (const auto& key : t.erase_keys) {
        auto s = c.stmt("DELETE FROM tags WHERE resource_arn = ?1 AND key = ?2");
        s.bind(1, t.resource_arn).bind(2, key);
        HF_RETURN_IF_ERROR(stepDone(c, s, "delete tag"));
      }
    }
    for (const auto& w : b.clusters) {
      if (w.erase) HF_RETURN_IF_ERROR(eraseCluster(c, w));
    }
    return rev;
  }

  std::string path_;
  bool in_memory_ = false;
  std::mutex write_mu_;  // serialises commits (and all access for in-memory stores)
  std::unique_ptr<Connection> writer_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> readers_;
  std::mutex counts_mu_;
  // cluster id -> (cluster revision, counts at that revision)
  std::unordered_map<std::string, std::pair<int64_t, std::map<std::string, GroupCounts>>>
      counts_cache_;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  auto store = std::make_unique<SqliteStore>(path);
  HF_RETURN_IF_ERROR(store->open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace hf::store
