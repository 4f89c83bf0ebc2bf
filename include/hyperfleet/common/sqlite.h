#pragma once
// The one SQLite wrapper (library hf_sqlite): a connection and its prepared statements, with
// errors as Status. Our own rather than SQLiteCpp (libsqlitecpp-dev): that one reports every
// error by exception where the project uses Status, and has no per-connection statement
// cache, which the store relies on.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hf::sqlite {

namespace internal {
struct Connection;  // the handle, label and statement cache, at a stable address
}

/// A prepared statement: bind parameters (1-based), step through rows, read columns
/// (0-based). Move-only; one thread at a time. A statement from Database::prepare() is
/// finalized with it; one from Database::cached() is reset and its bindings cleared, so the
/// connection can hand it out again. Must not outlive its Database (which may be moved).
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);
  /// Text, copied (the view need not outlive the call).
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const std::string& text) {
    return bind(index, std::string_view(text));
  }
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bindNull(int index);
  /// Binds `values` to ?1, ?2, ... in order, each as bind() would.
  template <class... Values>
  Statement& bindAll(const Values&... values) {
    int index = 0;
    (bind(++index, values), ...);
    return *this;
  }

  /// Steps once: true when a row is ready to read, false when the statement is done.
  /// Errors: Internal "<database label>: <SQLite's message>".
  StatusOr<bool> step();
  /// Steps until done (for statements without rows), then resets so that it can be bound
  /// and run again. Errors: as step().
  Status run();
  /// Back to before the first step; bindings are kept.
  void reset();

  int64_t int64(int column) const;
  double real(int column) const;
  /// Text (or a blob's bytes); "" for NULL.
  std::string text(int column) const;
  bool isNull(int column) const;
  /// nullopt for NULL.
  std::optional<int64_t> optionalInt64(int column) const;

  /// The statement's SQLite handle, for what this wrapper does not cover.
  sqlite3_stmt* handle() const { return stmt_; }

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, const internal::Connection* connection, bool owned)
      : stmt_(stmt), connection_(connection), owned_(owned) {}
  void release();

  sqlite3_stmt* stmt_ = nullptr;
  const internal::Connection* connection_ = nullptr;
  bool owned_ = true;
};

/// How Database::Open opens a file.
struct OpenOptions {
  bool readonly = false;  ///< else read-write, created when missing
  /// How long a statement waits for another connection's lock before failing (SQLITE_BUSY).
  std::chrono::milliseconds busy_timeout{10000};
  /// Page cache size in KiB (PRAGMA cache_size=-N); 0 keeps SQLite's default.
  int cache_kib = 0;
  /// Names the database in error messages ("logs.db"); "" uses the path.
  std::string label{};
};

/// One connection (SQLITE_OPEN_NOMUTEX: one thread at a time), closed on destruction
/// after its cached statements are finalized. Move-only.
class Database {
 public:
  /// Opens `path` (":memory:" for a private in-memory database). A file it creates is mode
  /// 0600 whatever the umask (state is its owner's only), and so are its -wal and -shm
  /// files, which SQLite gives the database's mode. Errors: Internal "cannot open database
  /// <path>: <SQLite's message>".
  static StatusOr<Database> Open(const std::string& path, const OpenOptions& options = {});

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  /// Runs `sql`, one or more statements without results. Errors: Internal "<label>:
  /// <SQLite's message> in <the SQL's first 60 bytes>".
  Status exec(std::string_view sql);
  /// A new prepared statement (the first of `sql`). Errors: Internal "<label>: prepare:
  /// <SQLite's message>".
  StatusOr<Statement> prepare(std::string_view sql);
  /// The connection's cached statement for `sql`, prepared on first use
  /// (SQLITE_PREPARE_PERSISTENT). For the program's own fixed SQL: failing to prepare it is a
  /// broken invariant, reported on stderr before abort(). One user of a given SQL at a time.
  Statement cached(const std::string& sql);

  /// Rowid of the last successful INSERT on this connection.
  int64_t lastInsertRowid() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const;
  /// Internal "<label>: <what>: <SQLite's message for the last failed call>": a failure with
  /// the caller's context, e.g. after step() failed.
  Status error(std::string_view what) const;
  /// SQLite's message for the last failed call on this connection.
  std::string errorMessage() const;
  /// Whether the last failed call violated a constraint (UNIQUE, PRIMARY KEY, FOREIGN KEY,
  /// NOT NULL, CHECK: SQLITE_CONSTRAINT), e.g. to report a taken name as AlreadyExists.
  bool constraintViolated() const;
  /// The label errors name the database by.
  const std::string& label() const;
  /// The connection's SQLite handle, for what this wrapper does not cover.
  sqlite3* handle() const;

 private:
  explicit Database(std::unique_ptr<internal::Connection> c);

  std::unique_ptr<internal::Connection> c_;
};

}  // namespace hf::sqlite
