// The SQLite wrapper on real SQLite: in-memory and file databases, binding and reading every
// type, errors as Status, the statement cache, moves.
#include "hyperfleet/common/sqlite.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hf::sqlite {
namespace {

Database MustOpen(const std::string& path, OpenOptions options = {}) {
  auto db = Database::Open(path, options);
  EXPECT_TRUE(db.ok()) << db.status();
  return *std::move(db);
}

Statement MustPrepare(Database& db, std::string_view sql) {
  auto stmt = db.prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  return *std::move(stmt);
}

TEST(Sqlite, BindsAndReadsEveryType) {
  Database db = MustOpen(":memory:", {.label = "test.db"});
  ASSERT_TRUE(db.exec("CREATE TABLE t(i INTEGER, r REAL, s TEXT, n INTEGER);"
                      "CREATE INDEX t_i ON t(i);").ok());
  Statement ins = MustPrepare(db, "INSERT INTO t(i, r, s, n) VALUES(?1, ?2, ?3, ?4)");
  const std::string with_nul("a\0b", 3);
  ASSERT_TRUE(ins.bind(1, int64_t{1} << 40).bind(2, 2.5).bind(3, with_nul).bindNull(4).run().ok());
  EXPECT_EQ(db.lastInsertRowid(), 1);
  EXPECT_EQ(db.changes(), 1);
  // run() reset the statement: it binds and runs again.
  ASSERT_TRUE(ins.bind(1, 7).bind(2, -1.0).bind(3, "x").bind(4, int64_t{9}).run().ok());
  EXPECT_EQ(db.lastInsertRowid(), 2);

  Statement q = MustPrepare(db, "SELECT i, r, s, n FROM t ORDER BY rowid");
  ASSERT_TRUE(q.step().value());
  EXPECT_EQ(q.int64(0), int64_t{1} << 40);
  EXPECT_EQ(q.real(1), 2.5);
  EXPECT_EQ(q.text(2), with_nul);
  EXPECT_TRUE(q.isNull(3));
  EXPECT_EQ(q.optionalInt64(3), std::nullopt);
  EXPECT_EQ(q.text(3), "");
  ASSERT_TRUE(q.step().value());
  EXPECT_EQ(q.int64(0), 7);
  EXPECT_EQ(q.optionalInt64(3), 9);
  EXPECT_FALSE(q.step().value());
  q.reset();
  ASSERT_TRUE(q.step().value());  // from the first row again
  EXPECT_EQ(q.int64(0), int64_t{1} << 40);
}

TEST(Sqlite, ErrorsAreStatusesNamingTheDatabase) {
  Database db = MustOpen(":memory:", {.label = "test.db"});
  const auto bad = db.prepare("SELEC 1");
  ASSERT_TRUE(absl::IsInternal(bad.status()));
  EXPECT_EQ(bad.status().message(), "test.db: prepare: near \"SELEC\": syntax error");
  const Status exec = db.exec("CREATE TABLE");
  ASSERT_TRUE(absl::IsInternal(exec));
  EXPECT_EQ(exec.message(), "test.db: incomplete input in CREATE TABLE");

  ASSERT_TRUE(db.exec("CREATE TABLE u(k TEXT UNIQUE)").ok());
  Statement ins = MustPrepare(db, "INSERT INTO u(k) VALUES(?1)");
  ASSERT_TRUE(ins.bind(1, "k").run().ok());
  const Status dup = ins.run();
  ASSERT_TRUE(absl::IsInternal(dup));
  EXPECT_EQ(dup.message(), "test.db: UNIQUE constraint failed: u.k");
  // The failure, with the caller's context, and its kind.
  EXPECT_TRUE(db.constraintViolated());
  EXPECT_EQ(db.error("insert k").message(), "test.db: insert k: UNIQUE constraint failed: u.k");
  EXPECT_EQ(db.errorMessage(), "UNIQUE constraint failed: u.k");
  ASSERT_FALSE(db.prepare("SELECT missing FROM u").ok());
  EXPECT_FALSE(db.constraintViolated());
  EXPECT_EQ(db.error("find").message(), "test.db: find: no such column: missing");

  const auto missing = Database::Open("/nonexistent/dir/x.db", {.readonly = true});
  ASSERT_TRUE(absl::IsInternal(missing.status()));
  EXPECT_EQ(missing.status().message(),
            "cannot open database /nonexistent/dir/x.db: unable to open database file");
}

TEST(Sqlite, CachedStatementsAreResetAndClearedForTheNextUser) {
  Database db = MustOpen(":memory:");
  ASSERT_TRUE(db.exec("CREATE TABLE t(v); INSERT INTO t VALUES(1); INSERT INTO t VALUES(2)").ok());
  const std::string sql = "SELECT ?1, v FROM t ORDER BY v";
  sqlite3_stmt* handle = nullptr;
  {
    Statement s = db.cached(sql);
    handle = s.handle();
    s.bind(1, "bound");
    ASSERT_TRUE(s.step().value());
    EXPECT_EQ(s.text(0), "bound");
    EXPECT_EQ(s.int64(1), 1);
  }
  Statement again = db.cached(sql);
  EXPECT_EQ(again.handle(), handle);  // prepared once
  ASSERT_TRUE(again.step().value());
  EXPECT_TRUE(again.isNull(0));  // bindings cleared
  EXPECT_EQ(again.int64(1), 1);  // and reset to the first row
}

TEST(Sqlite, BindAllBindsInOrderFromTheFirstParameter) {
  Database db = MustOpen(":memory:");
  Statement s = MustPrepare(db, "SELECT ?1, ?2, ?3, ?4, ?5");
  const std::string text = "text";
  s.bindAll(int64_t{1} << 40, 2.5, text, "literal", 7);
  ASSERT_TRUE(s.step().value());
  EXPECT_EQ(s.int64(0), int64_t{1} << 40);
  EXPECT_EQ(s.real(1), 2.5);
  EXPECT_EQ(s.text(2), "text");
  EXPECT_EQ(s.text(3), "literal");
  EXPECT_EQ(s.int64(4), 7);
}

TEST(SqliteDeathTest, BadCachedSqlAborts) {
  Database db = MustOpen(":memory:");
  EXPECT_DEATH(db.cached("SELEC 1"), "bad SQL");
}

TEST(Sqlite, StatementsSurviveMovingTheirDatabase) {
  Database a = MustOpen(":memory:", {.label = "moved.db"});
  ASSERT_TRUE(a.exec("CREATE TABLE t(k UNIQUE); INSERT INTO t VALUES(1)").ok());
  Statement ins = MustPrepare(a, "INSERT INTO t VALUES(1)");
  Database b = std::move(a);
  const Status dup = ins.run();
  EXPECT_EQ(dup.message(), "moved.db: UNIQUE constraint failed: t.k");
  EXPECT_EQ(b.label(), "moved.db");
}

TEST(Sqlite, FileDatabaseSharedWithAReadOnlyConnection) {
  char tmpl[] = "/tmp/hf-sqlite-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/x.db";
  {
    Database writer = MustOpen(path, {.cache_kib = 2048});
    Statement size = MustPrepare(writer, "PRAGMA cache_size");
    ASSERT_TRUE(size.step().value());
    EXPECT_EQ(size.int64(0), -2048);
    ASSERT_TRUE(writer.exec("PRAGMA journal_mode=WAL; CREATE TABLE t(v TEXT);"
                            "INSERT INTO t VALUES('hello')").ok());
    Database reader = MustOpen(path, {.readonly = true});
    Statement q = MustPrepare(reader, "SELECT v FROM t");
    ASSERT_TRUE(q.step().value());
    EXPECT_EQ(q.text(0), "hello");
    EXPECT_TRUE(absl::IsInternal(reader.exec("INSERT INTO t VALUES('no')")));  // read-only
  }
  std::filesystem::remove_all(tmpl);
}

TEST(Sqlite, ADatabaseItCreatesIsItsOwnersOnlyWhateverTheUmask) {
  char tmpl[] = "/tmp/hf-sqlite-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/state.db";
  const mode_t saved = ::umask(022);
  {
    Database db = MustOpen(path);
    ASSERT_TRUE(db.exec("PRAGMA journal_mode=WAL; CREATE TABLE t(v); INSERT INTO t VALUES(1)").ok());
    Database reader = MustOpen(path, {.readonly = true});  // maps the -shm file
    Statement q = MustPrepare(reader, "SELECT v FROM t");
    ASSERT_TRUE(q.step().value());
    for (const std::string f : {path, path + "-wal", path + "-shm"}) {
      struct stat st {};
      ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
      EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
    }
  }
  ::umask(saved);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace hf::sqlite
