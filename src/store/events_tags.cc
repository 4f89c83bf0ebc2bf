// Events and tags in the SQLite store: the event row codec, reads, and the writes of a batch.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/keyset.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {
namespace {

using nlohmann::json;

constexpr const char* kEventCols =
    "seq, id, cluster_id, group_name, instance_id, resource_type, level, time, description, "
    "metadata";

model::Event ReadEvent(const sqlite::Statement& s) {
  model::Event e;
  e.seq = s.int64(0);
  ReadTexts(s, 1, e.id, e.cluster_id, e.group, e.instance_id, e.resource_type, e.level);
  e.time = FromEpochSeconds(s.real(7));
  e.description = s.text(8);
  e.metadata = json::parse(s.text(9), nullptr, false);
  if (e.metadata.is_discarded()) e.metadata = json();
  return e;
}

// Tags belong to an object that exists (a cluster or a governance object): none lands on
// one deleted after the writer read it. Both arn columns are UNIQUE, hence indexed.
Status CheckTaggable(sqlite::Database& db, const std::string& arn) {
  auto s = db.cached(
      "SELECT 1 FROM clusters WHERE arn = ?1 UNION ALL "
      "SELECT 1 FROM scheduler_resources WHERE arn = ?1 LIMIT 1");
  s.bind(1, arn);
  return ReadOne<bool>(
             db, s, "find tagged resource", [](const sqlite::Statement&) { return true; },
             [&] {
               return absl::FailedPreconditionError(
                   absl::StrCat("Resource ", arn, " does not exist"));
             })
      .status();
}

}  // namespace

StatusOr<Page<model::Event>> SqliteStore::listEvents(const std::string& cluster_id,
                                                     const EventQuery& q) {
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
  return withReader([&](sqlite::Database& db) -> StatusOr<Page<model::Event>> {
    auto s = db.cached(sql);
    s.bind(1, cluster_id);
    if (q.after) s.bind(2, ToEpochSeconds(*q.after));
    if (q.before) s.bind(3, ToEpochSeconds(*q.before));
    if (!q.group.empty()) s.bind(4, q.group);
    if (!q.instance_id.empty()) s.bind(5, q.instance_id);
    if (!q.resource_type.empty()) s.bind(6, q.resource_type);
    keys.bind(s, 7, 9, q.limit);
    if (keys.after) s.bind(8, after_seq);  // seq is an integer column
    return keys.collect<model::Event>(db, s, q.limit, ReadEvent, [](const model::Event& last) {
      return std::pair(json(ToEpochSeconds(last.time)), std::to_string(last.seq));
    });
  });
}

StatusOr<model::Event> SqliteStore::event(const std::string& cluster_id, const std::string& id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<model::Event> {
    auto s = db.cached(
        absl::StrCat("SELECT ", kEventCols, " FROM events WHERE cluster_id = ?1 AND id = ?2"));
    s.bind(1, cluster_id).bind(2, id);
    return ReadOne<model::Event>(db, s, "read event", ReadEvent, [&] {
      return absl::NotFoundError(absl::StrCat("Event ", id, " not found"));
    });
  });
}

StatusOr<std::vector<model::Tag>> SqliteStore::tags(const std::string& resource_arn) {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<model::Tag>> {
    auto s = db.cached("SELECT key, value FROM tags WHERE resource_arn = ?1 ORDER BY key");
    s.bind(1, resource_arn);
    return ReadAll<model::Tag>(db, s, "list tags", [](const sqlite::Statement& row) {
      return model::Tag{row.text(0), row.text(1)};
    });
  });
}

Status AppendEvent(sqlite::Database& db, const model::Event& e) {
  auto s = db.cached(
      "INSERT INTO events (id, cluster_id, group_name, instance_id, resource_type, level, "
      "time, description, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s.bindAll(e.id, e.cluster_id, e.group, e.instance_id, e.resource_type, e.level,
            ToEpochSeconds(e.time), e.description, e.metadata.dump());
  return RunWrite(db, s, "append event");
}

Status WriteTags(sqlite::Database& db, const TagWrite& t) {
  if (!t.put.empty()) HF_RETURN_IF_ERROR(CheckTaggable(db, t.resource_arn));
  for (const auto& tag : t.put) {
    auto s = db.cached(
        "INSERT INTO tags (resource_arn, key, value) VALUES (?1, ?2, ?3) "
        "ON CONFLICT(resource_arn, key) DO UPDATE SET value = excluded.value");
    s.bindAll(t.resource_arn, tag.key, tag.value);
    HF_RETURN_IF_ERROR(RunWrite(db, s, "put tag"));
  }
  for (const auto& key : t.erase_keys) {
    auto s = db.cached("DELETE FROM tags WHERE resource_arn = ?1 AND key = ?2");
    s.bindAll(t.resource_arn, key);
    HF_RETURN_IF_ERROR(RunWrite(db, s, "delete tag"));
  }
  return absl::OkStatus();
}

}  // namespace hf::store
