// SQLite implementation of hf::store::Store: opening, the connection pool and commit.
//
// One write connection (serialised by a mutex) and a pool of read connections; WAL mode lets
// readers run while a write commits. synchronous=FULL so that an acknowledged commit survives
// a kill -9 or power loss. Row revisions come from one monotonically increasing counter kept
// in the `meta` table and bumped by every commit.
#include "store/sqlite_store.h"

#include "store/migrations.h"
#include "store/statements.h"

namespace hf::store {
namespace {

/// The page cache of each connection, read-only or not. Enough for a 10,000-node cluster's
/// node table and time index (~3 MiB): with less, every page of a ListClusterNodes walk is
/// read from the file again (api_bench: 34 reads per 100-node page with 1 MiB, none with
/// 4 MiB; 60 -> 15 us of system CPU per page). Filled only as pages are read, so a small
/// state costs no more.
constexpr int kCacheKib = 4096;

/// One connection of the store (read-only ones for the pool), foreign keys enforced.
StatusOr<sqlite::Database> OpenConnection(const std::string& path, bool readonly) {
  HF_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path, {.readonly = readonly,
                                                             .cache_kib = kCacheKib,
                                                             .label = "sqlite"}));
  HF_RETURN_IF_ERROR(db.exec("PRAGMA foreign_keys=ON"));
  return db;
}

}  // namespace

Status SqliteStore::open() {
  HF_ASSIGN_OR_RETURN(writer_, OpenConnection(path_, /*readonly=*/false));
  in_memory_ = path_ == ":memory:";
  if (!in_memory_) {
    HF_RETURN_IF_ERROR(writer_->exec("PRAGMA journal_mode=WAL"));
  }
  HF_RETURN_IF_ERROR(writer_->exec("PRAGMA synchronous=FULL"));
  return Migrate(*writer_);
}

StatusOr<sqlite::Database> SqliteStore::takeReader() {
  {
    std::lock_guard lock(pool_mu_);
    if (!readers_.empty()) {
      sqlite::Database db = std::move(readers_.back());
      readers_.pop_back();
      return db;
    }
  }
  return OpenConnection(path_, /*readonly=*/true);
}

void SqliteStore::returnReader(sqlite::Database db) {
  std::lock_guard lock(pool_mu_);
  if (readers_.size() < 64) readers_.push_back(std::move(db));
}

StatusOr<int64_t> SqliteStore::commit(const WriteBatch& batch) {
  std::lock_guard lock(write_mu_);
  sqlite::Database& db = *writer_;
  HF_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  auto result = apply(db, batch);
  if (!result.ok()) {
    (void)db.exec("ROLLBACK");
    return result.status();
  }
  Status s = db.exec("COMMIT");
  if (!s.ok()) {
    (void)db.exec("ROLLBACK");
    return s;
  }
  return result;
}

StatusOr<int64_t> SqliteStore::apply(sqlite::Database& db, const WriteBatch& b) {
  int64_t rev;
  {
    auto s = db.cached("UPDATE meta SET value = value + 1 WHERE key = 'revision' RETURNING value");
    const StatusOr<bool> row = s.step();
    if (!row.ok() || !*row) return db.error("bump revision");
    rev = s.int64(0);
  }
  // Cluster erases run last: they take the cluster's nodes, events and tags with them, so
  // node writes of the same batch must see those rows first.
  for (const auto& w : b.clusters) {
    if (!w.erase) HF_RETURN_IF_ERROR(WriteCluster(db, w, rev));
  }
  for (const auto& w : b.nodes) HF_RETURN_IF_ERROR(WriteNode(db, w, rev));
  HF_RETURN_IF_ERROR(TouchClustersOf(db, b.nodes, rev));
  for (const auto& w : b.scheduler_resources) {
    HF_RETURN_IF_ERROR(WriteSchedulerResource(db, w, rev));
  }
  for (const auto& w : b.machines) HF_RETURN_IF_ERROR(WriteMachine(db, w, rev));
  for (const auto& w : b.spare_targets) HF_RETURN_IF_ERROR(WriteSpareTarget(db, w));
  // EKS cluster erases last, as cluster erases: they take the cluster's access entries.
  for (const auto& w : b.eks_clusters) {
    if (!w.erase) HF_RETURN_IF_ERROR(WriteEksCluster(db, w, rev));
  }
  for (const auto& w : b.eks_access_entries) HF_RETURN_IF_ERROR(WriteEksAccessEntry(db, w, rev));
  for (const auto& w : b.eks_clusters) {
    if (w.erase) HF_RETURN_IF_ERROR(WriteEksCluster(db, w, rev));
  }
  for (const auto& e : b.events) HF_RETURN_IF_ERROR(AppendEvent(db, e));
  for (const auto& t : b.tags) HF_RETURN_IF_ERROR(WriteTags(db, t));
  for (const auto& w : b.clusters) {
    if (w.erase) HF_RETURN_IF_ERROR(EraseCluster(db, w));
  }
  return rev;
}

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  auto store = std::make_unique<SqliteStore>(path);
  HF_RETURN_IF_ERROR(store->open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace hf::store
