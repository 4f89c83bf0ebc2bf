#include "hyperfleet/logs/log_store.h"

#include <algorithm>
#include <chrono>
#include <variant>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/sqlite.h"

namespace hf::logs {
namespace {

int64_t Millis(SystemTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// Steps `q` and collects events made by `read_row` until `limit` events or `max_bytes` of
/// messages (at least one event) are taken; `more` says a further row was left.
template <class ReadRow>
StatusOr<EventPage> FillPage(sqlite::Statement& q, int limit, int64_t max_bytes, ReadRow read_row) {
  EventPage page;
  int64_t bytes = 0;
  while (true) {
    HF_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) break;
    LogEvent e = read_row();
    if (static_cast<int>(page.events.size()) == limit ||
        (!page.events.empty() && bytes + static_cast<int64_t>(e.message.size()) > max_bytes)) {
      page.more = true;
      break;
    }
    bytes += static_cast<int64_t>(e.message.size());
    page.events.push_back(std::move(e));
  }
  return page;
}

StatusOr<sqlite::Database> OpenDb(const std::string& path, bool readonly) {
  HF_ASSIGN_OR_RETURN(
      sqlite::Database db,
      sqlite::Database::Open(path, {.readonly = readonly, .cache_kib = 1024, .label = "logs.db"}));
  // Name prefixes are case-sensitive in CloudWatch Logs; LIKE is not by default.
  HF_RETURN_IF_ERROR(db.exec("PRAGMA case_sensitive_like=ON"));
  return db;
}

// Schema version 1. Streams carry their own counters so that describe and retention need
// no scan over events.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS log_groups(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, creation_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS log_streams(
  id INTEGER PRIMARY KEY, group_id INTEGER NOT NULL, name TEXT NOT NULL,
  creation_ms INTEGER NOT NULL, first_event_ms INTEGER, last_event_ms INTEGER,
  last_ingestion_ms INTEGER, stored_bytes INTEGER NOT NULL DEFAULT 0,
  event_count INTEGER NOT NULL DEFAULT 0, UNIQUE(group_id, name));
CREATE TABLE IF NOT EXISTS log_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL, ts INTEGER NOT NULL,
  ingestion_ms INTEGER NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS log_events_by_stream ON log_events(stream_id, ts, id);
CREATE INDEX IF NOT EXISTS log_events_by_time ON log_events(ts, id);
PRAGMA user_version=1;
)sql";

/// `prefix` with LIKE's wildcards escaped (ESCAPE '\\').
std::string EscapeLike(const std::string& prefix) {
  std::string out;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

class SqliteLogStore final : public LogStore {
 public:
  SqliteLogStore(std::string path, sqlite::Database writer, const Clock& clock,
                 RetentionPolicy retention)
      : path_(std::move(path)), writer_(std::move(writer)), clock_(clock),
        retention_(retention) {}

  Status append(const std::string& group, const std::string& stream,
                std::span<const InputLogEvent> events) override {
    if (group.empty() || stream.empty()) {
      return absl::InvalidArgumentError("log group and stream names must not be empty");
    }
    const int64_t now = Millis(clock_.now());
    std::lock_guard lock(write_mu_);
    sqlite::Database& db = writer_;
    HF_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
    Status s = appendLocked(db, group, stream, events, now);
    if (!s.ok()) {
      db.exec("ROLLBACK").IgnoreError();
      return s;
    }
    return db.exec("COMMIT");
  }

  StatusOr<bool> deleteGroup(const std::string& group) override {
    std::lock_guard lock(write_mu_);
    sqlite::Database& db = writer_;
    HF_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
    auto run = [&]() -> StatusOr<bool> {
      HF_ASSIGN_OR_RETURN(sqlite::Statement find,
                          db.prepare("SELECT id FROM log_groups WHERE name=?1"));
      find.bind(1, group);
      HF_ASSIGN_OR_RETURN(bool found, find.step());
      if (!found) return false;
      const int64_t gid = find.int64(0);
      for (const char* sql :
           {"DELETE FROM log_events WHERE stream_id IN (SELECT id FROM log_streams WHERE "
            "group_id=?1)",
            "DELETE FROM log_streams WHERE group_id=?1", "DELETE FROM log_groups WHERE id=?1"}) {
        HF_ASSIGN_OR_RETURN(sqlite::Statement del, db.prepare(sql));
        HF_RETURN_IF_ERROR(del.bind(1, gid).run());
      }
      return true;
    };
    auto r = run();
    if (!r.ok()) {
      db.exec("ROLLBACK").IgnoreError();
      return r;
    }
    HF_RETURN_IF_ERROR(db.exec("COMMIT"));
    return r;
  }

  StatusOr<std::optional<LogGroupInfo>> group(const std::string& name) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    return groupOn(r.db(), name);
  }

  StatusOr<std::vector<LogGroupInfo>> describeGroups(const std::string& prefix,
                                                     const std::string& after, int limit,
                                                     bool* more) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement q,
        r.db().prepare(
            "SELECT g.name, g.creation_ms, (SELECT COALESCE(SUM(stored_bytes),0) FROM log_streams "
            "WHERE group_id=g.id) FROM log_groups g WHERE g.name LIKE ?1 ESCAPE '\\' AND "
            "g.name > ?2 ORDER BY g.name LIMIT ?3"));
    q.bind(1, EscapeLike(prefix) + "%").bind(2, after).bind(3, int64_t{limit} + 1);
    std::vector<LogGroupInfo> out;
    while (true) {
      HF_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      out.push_back({q.text(0), q.int64(1), q.int64(2)});
    }
    const bool has_more = static_cast<int>(out.size()) > limit;
    if (has_more) out.pop_back();
    if (more) *more = has_more;
    return out;
  }

  StatusOr<StreamPage> describeStreams(const std::string& group,
                                       const StreamQuery& query) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    HF_ASSIGN_OR_RETURN(int64_t gid, groupId(r.db(), group));
    // Keyset pagination: by name, or by (COALESCE(last_event_ms, -1), name).
    const char* cmp = query.descending ? "<" : ">";
    const char* dir = query.descending ? "DESC" : "ASC";
    std::string sql =
        "SELECT name, creation_ms, first_event_ms, last_event_ms, last_ingestion_ms, "
        "stored_bytes, event_count, COALESCE(last_event_ms,-1) FROM log_streams WHERE "
        "group_id=?1 AND name LIKE ?2 ESCAPE '\\'";
    int64_t after_ts = 0;
    std::string after_name;
    if (query.after) {
      if (query.order_by_last_event) {
        const auto slash = query.after->find('/');
        if (slash == std::string::npos) {
          return absl::InvalidArgumentError("The specified nextToken is invalid.");
        }
        try {
          after_ts = std::stoll(query.after->substr(0, slash));
        } catch (...) {
          return absl::InvalidArgumentError("The specified nextToken is invalid.");
        }
        after_name = query.after->substr(slash + 1);
        absl::StrAppend(&sql, " AND (COALESCE(last_event_ms,-1), name) ", cmp, " (?3, ?4)");
      } else {
        after_name = *query.after;
        absl::StrAppend(&sql, " AND name ", cmp, " ?4");
      }
    }
    if (query.order_by_last_event) {
      absl::StrAppend(&sql, " ORDER BY COALESCE(last_event_ms,-1) ", dir, ", name ", dir);
    } else {
      absl::StrAppend(&sql, " ORDER BY name ", dir);
    }
    absl::StrAppend(&sql, " LIMIT ?5");
    HF_ASSIGN_OR_RETURN(sqlite::Statement q, r.db().prepare(sql));
    q.bind(1, gid).bind(2, EscapeLike(query.prefix) + "%").bind(5, int64_t{query.limit} + 1);
    if (query.after) q.bind(3, after_ts).bind(4, after_name);
    StreamPage page;
    std::vector<int64_t> sort_keys;
    while (true) {
      HF_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      page.streams.push_back({q.text(0), q.int64(1), q.optionalInt64(2), q.optionalInt64(3),
                              q.optionalInt64(4), q.int64(5), q.int64(6)});
      sort_keys.push_back(q.int64(7));
    }
    if (static_cast<int>(page.streams.size()) > query.limit) {
      page.streams.pop_back();
      const auto& last = page.streams.back();
      page.next = query.order_by_last_event
                      ? absl::StrCat(sort_keys[page.streams.size() - 1], "/", last.name)
                      : last.name;
    }
    return page;
  }

  StatusOr<std::optional<LogStreamInfo>> stream(const std::string& group,
                                                const std::string& stream) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    HF_ASSIGN_OR_RETURN(int64_t gid, groupId(r.db(), group));
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement q,
        r.db().prepare(
            "SELECT name, creation_ms, first_event_ms, last_event_ms, last_ingestion_ms, "
            "stored_bytes, event_count FROM log_streams WHERE group_id=?1 AND name=?2"));
    q.bind(1, gid).bind(2, stream);
    HF_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) return std::optional<LogStreamInfo>();
    return std::optional<LogStreamInfo>(LogStreamInfo{q.text(0), q.int64(1), q.optionalInt64(2),
                                                      q.optionalInt64(3), q.optionalInt64(4),
                                                      q.int64(5), q.int64(6)});
  }

  StatusOr<EventPage> getEvents(const std::string& group, const std::string& stream,
                                const EventQuery& query) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    HF_ASSIGN_OR_RETURN(int64_t gid, groupId(r.db(), group));
    HF_ASSIGN_OR_RETURN(sqlite::Statement find,
                        r.db().prepare("SELECT id FROM log_streams WHERE group_id=?1 AND name=?2"));
    find.bind(1, gid).bind(2, stream);
    HF_ASSIGN_OR_RETURN(bool found, find.step());
    if (!found) return absl::NotFoundError("The specified log stream does not exist.");
    const int64_t sid = find.int64(0);
    std::string sql = "SELECT id, ts, ingestion_ms, message FROM log_events WHERE stream_id=?1";
    if (query.start_ms) sql += " AND ts >= ?2";
    if (query.end_ms) sql += " AND ts < ?3";
    if (query.after) sql += " AND (ts, id) > (?4, ?5)";
    if (query.before) sql += " AND (ts, id) < (?6, ?7)";
    sql += query.from_head ? " ORDER BY ts, id" : " ORDER BY ts DESC, id DESC";
    sql += " LIMIT ?8";
    HF_ASSIGN_OR_RETURN(sqlite::Statement q, r.db().prepare(sql));
    q.bind(1, sid).bind(8, int64_t{query.limit} + 1);
    if (query.start_ms) q.bind(2, *query.start_ms);
    if (query.end_ms) q.bind(3, *query.end_ms);
    if (query.after) q.bind(4, query.after->timestamp_ms).bind(5, query.after->id);
    if (query.before) q.bind(6, query.before->timestamp_ms).bind(7, query.before->id);
    HF_ASSIGN_OR_RETURN(EventPage page, FillPage(q, query.limit, query.max_bytes, [&] {
                          return LogEvent{q.int64(0), stream, q.int64(1), q.int64(2), q.text(3)};
                        }));
    if (!query.from_head) std::reverse(page.events.begin(), page.events.end());
    return page;
  }

  StatusOr<EventPage> filterEvents(const std::string& group,
                                   const FilterQuery& query) const override {
    HF_ASSIGN_OR_RETURN(Reader r, reader());
    HF_ASSIGN_OR_RETURN(int64_t gid, groupId(r.db(), group));
    // Bind parameters are numbered as they are added.
    std::vector<std::variant<int64_t, std::string>> params;
    // The value is built in place in the vector: moving a variant temporary that holds an
    // int64_t made GCC 12 warn that the (inactive) string member may be read uninitialised.
    auto param = [&](auto&& v) {
      params.emplace_back(std::forward<decltype(v)>(v));
      return absl::StrCat("?", params.size());
    };
    std::string sql = absl::StrCat(
        "SELECT e.id, s.name, e.ts, e.ingestion_ms, e.message FROM log_events e "
        "JOIN log_streams s ON s.id = e.stream_id WHERE s.group_id=",
        param(gid));
    if (!query.stream_names.empty()) {
      sql += " AND s.name IN (";
      for (size_t i = 0; i < query.stream_names.size(); ++i) {
        absl::StrAppend(&sql, i ? "," : "", param(query.stream_names[i]));
      }
      sql += ")";
    }
    if (!query.stream_prefix.empty()) {
      absl::StrAppend(&sql, " AND s.name LIKE ", param(EscapeLike(query.stream_prefix) + "%"),
                      " ESCAPE '\\'");
    }
    if (query.start_ms) absl::StrAppend(&sql, " AND e.ts >= ", param(*query.start_ms));
    if (query.end_ms) absl::StrAppend(&sql, " AND e.ts < ", param(*query.end_ms));
    if (query.after) {
      absl::StrAppend(&sql, " AND (e.ts, e.id) > (", param(query.after->timestamp_ms), ", ",
                      param(query.after->id), ")");
    }
    for (const auto& t : query.all_terms) {
      absl::StrAppend(&sql, " AND instr(e.message, ", param(t), ") > 0");
    }
    for (const auto& t : query.none_terms) {
      absl::StrAppend(&sql, " AND instr(e.message, ", param(t), ") = 0");
    }
    if (!query.any_terms.empty()) {
      sql += " AND (";
      for (size_t i = 0; i < query.any_terms.size(); ++i) {
        absl::StrAppend(&sql, i ? " OR " : "", "instr(e.message, ", param(query.any_terms[i]),
                        ") > 0");
      }
      sql += ")";
    }
    absl::StrAppend(&sql, " ORDER BY e.ts, e.id LIMIT ", param(int64_t{query.limit} + 1));
    HF_ASSIGN_OR_RETURN(sqlite::Statement q, r.db().prepare(sql));
    for (size_t i = 0; i < params.size(); ++i) {
      if (auto* v = std::get_if<int64_t>(&params[i])) {
        q.bind(static_cast<int>(i + 1), *v);
      } else {
        q.bind(static_cast<int>(i + 1), std::get<std::string>(params[i]));
      }
    }
    HF_ASSIGN_OR_RETURN(EventPage page, FillPage(q, query.limit, query.max_bytes, [&] {
                          return LogEvent{q.int64(0), q.text(1), q.int64(2), q.int64(3), q.text(4)};
                        }));
    return page;
  }

 private:
  /// A read-only connection borrowed from the pool; returned when destroyed.
  class Reader {
   public:
    Reader(const SqliteLogStore* store, sqlite::Database db) : store_(store), db_(std::move(db)) {}
    Reader(Reader&& other) noexcept
        : store_(other.store_), db_(std::exchange(other.db_, std::nullopt)) {}
    ~Reader() {
      if (db_) {
        std::lock_guard lock(store_->pool_mu_);
        store_->pool_.push_back(*std::move(db_));
      }
    }
    sqlite::Database& db() { return *db_; }

   private:
    const SqliteLogStore* store_;
    std::optional<sqlite::Database> db_;  // empty once moved from
  };

  StatusOr<Reader> reader() const {
    {
      std::lock_guard lock(pool_mu_);
      if (!pool_.empty()) {
        sqlite::Database db = std::move(pool_.back());
        pool_.pop_back();
        return Reader(this, std::move(db));
      }
    }
    HF_ASSIGN_OR_RETURN(sqlite::Database db, OpenDb(path_, /*readonly=*/true));
    return Reader(this, std::move(db));
  }

  static StatusOr<std::optional<LogGroupInfo>> groupOn(sqlite::Database& db,
                                                       const std::string& name) {
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement q,
        db.prepare(
            "SELECT g.name, g.creation_ms, (SELECT COALESCE(SUM(stored_bytes),0) FROM log_streams "
            "WHERE group_id=g.id) FROM log_groups g WHERE g.name=?1"));
    q.bind(1, name);
    HF_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) return std::optional<LogGroupInfo>();
    return std::optional<LogGroupInfo>(LogGroupInfo{q.text(0), q.int64(1), q.int64(2)});
  }

  static StatusOr<int64_t> groupId(sqlite::Database& db, const std::string& name) {
    HF_ASSIGN_OR_RETURN(sqlite::Statement q, db.prepare("SELECT id FROM log_groups WHERE name=?1"));
    q.bind(1, name);
    HF_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) return absl::NotFoundError("The specified log group does not exist.");
    return q.int64(0);
  }

  Status appendLocked(sqlite::Database& db, const std::string& group, const std::string& stream,
                      std::span<const InputLogEvent> events, int64_t now) {
    {
      HF_ASSIGN_OR_RETURN(sqlite::Statement ins,
                          db.prepare("INSERT INTO log_groups(name, creation_ms) VALUES(?1, ?2) "
                                     "ON CONFLICT(name) DO NOTHING"));
      HF_RETURN_IF_ERROR(ins.bind(1, group).bind(2, now).run());
    }
    HF_ASSIGN_OR_RETURN(int64_t gid, groupId(db, group));
    {
      HF_ASSIGN_OR_RETURN(
          sqlite::Statement ins,
          db.prepare("INSERT INTO log_streams(group_id, name, creation_ms) VALUES(?1, ?2, ?3) "
                     "ON CONFLICT(group_id, name) DO NOTHING"));
      HF_RETURN_IF_ERROR(ins.bind(1, gid).bind(2, stream).bind(3, now).run());
    }
    HF_ASSIGN_OR_RETURN(sqlite::Statement find,
                        db.prepare("SELECT id FROM log_streams WHERE group_id=?1 AND name=?2"));
    find.bind(1, gid).bind(2, stream);
    HF_ASSIGN_OR_RETURN(bool found, find.step());
    if (!found) return absl::InternalError("logs.db: stream vanished during append");
    const int64_t sid = find.int64(0);
    if (events.empty()) return absl::OkStatus();

    HF_ASSIGN_OR_RETURN(sqlite::Statement ins,
                        db.prepare("INSERT INTO log_events(stream_id, ts, ingestion_ms, message) "
                                   "VALUES(?1, ?2, ?3, ?4)"));
    int64_t bytes = 0, min_ts = events[0].timestamp_ms, max_ts = events[0].timestamp_ms;
    for (const auto& e : events) {
      HF_RETURN_IF_ERROR(ins.bind(1, sid).bind(2, e.timestamp_ms).bind(3, now)
                             .bind(4, e.message).run());
      bytes += static_cast<int64_t>(e.message.size());
      min_ts = std::min(min_ts, e.timestamp_ms);
      max_ts = std::max(max_ts, e.timestamp_ms);
    }
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement upd,
        db.prepare("UPDATE log_streams SET first_event_ms=MIN(COALESCE(first_event_ms, ?2), ?2), "
                   "last_event_ms=MAX(COALESCE(last_event_ms, ?3), ?3), last_ingestion_ms=?4, "
                   "stored_bytes=stored_bytes+?5, event_count=event_count+?6 WHERE id=?1"));
    HF_RETURN_IF_ERROR(upd.bind(1, sid).bind(2, min_ts).bind(3, max_ts).bind(4, now)
                           .bind(5, bytes).bind(6, static_cast<int64_t>(events.size())).run());
    return applyRetention(db, sid);
  }

  /// Drops the stream's oldest events while it is over either cap.
  Status applyRetention(sqlite::Database& db, int64_t sid) {
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement counts,
        db.prepare("SELECT event_count, stored_bytes FROM log_streams WHERE id=?1"));
    counts.bind(1, sid);
    HF_ASSIGN_OR_RETURN(bool row, counts.step());
    if (!row) return absl::OkStatus();
    int64_t count = counts.int64(0), bytes = counts.int64(1);
    if (count <= retention_.max_events_per_stream && bytes <= retention_.max_bytes_per_stream) {
      return absl::OkStatus();
    }
    HF_ASSIGN_OR_RETURN(sqlite::Statement oldest,
                        db.prepare("SELECT id, length(CAST(message AS BLOB)) FROM log_events WHERE "
                                   "stream_id=?1 ORDER BY ts, id"));
    oldest.bind(1, sid);
    std::vector<int64_t> drop;
    while (count > retention_.max_events_per_stream ||
           bytes > retention_.max_bytes_per_stream) {
      HF_ASSIGN_OR_RETURN(bool more, oldest.step());
      if (!more) break;
      drop.push_back(oldest.int64(0));
      --count;
      bytes -= oldest.int64(1);
    }
    HF_ASSIGN_OR_RETURN(sqlite::Statement del, db.prepare("DELETE FROM log_events WHERE id=?1"));
    for (int64_t id : drop) {
      HF_RETURN_IF_ERROR(del.bind(1, id).run());
    }
    HF_ASSIGN_OR_RETURN(
        sqlite::Statement upd,
        db.prepare("UPDATE log_streams SET event_count=?2, stored_bytes=?3, first_event_ms=(SELECT "
                   "MIN(ts) FROM log_events WHERE stream_id=?1) WHERE id=?1"));
    return upd.bind(1, sid).bind(2, count).bind(3, bytes).run();
  }

  const std::string path_;
  sqlite::Database writer_;
  const Clock& clock_;
  const RetentionPolicy retention_;
  std::mutex write_mu_;
  mutable std::mutex pool_mu_;
  mutable std::vector<sqlite::Database> pool_;
};

}  // namespace

StatusOr<std::unique_ptr<LogStore>> OpenLogStore(const std::string& path, const Clock& clock,
                                                 RetentionPolicy retention) {
  HF_ASSIGN_OR_RETURN(sqlite::Database db, OpenDb(path, /*readonly=*/false));
  HF_RETURN_IF_ERROR(db.exec("PRAGMA journal_mode=WAL"));
  HF_RETURN_IF_ERROR(db.exec("PRAGMA synchronous=NORMAL"));
  HF_RETURN_IF_ERROR(db.exec(kSchema));
  return std::unique_ptr<LogStore>(
      new SqliteLogStore(path, std::move(db), clock, retention));
}

StatusOr<std::unique_ptr<LogStore>> OpenLogStoreInDataDir(const std::string& data_dir,
                                                          const Clock& clock,
                                                          RetentionPolicy retention) {
  HF_RETURN_IF_ERROR(MakeDirs(data_dir, 0700));
  return OpenLogStore(data_dir + "/logs.db", clock, retention);
}

}  // namespace hf::logs
