#include "hyperfleet/common/sqlite.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hf::sqlite {
namespace internal {

struct Connection {
  sqlite3* db = nullptr;
  std::string label;
  std::unordered_map<std::string, sqlite3_stmt*> cache;

  Status Error(std::string_view what) const {
    const char* message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    return absl::InternalError(what.empty()
                                   ? absl::StrCat(label, ": ", message)
                                   : absl::StrCat(label, ": ", std::string(what), ": ", message));
  }

  ~Connection() {
    for (auto& [sql, stmt] : cache) sqlite3_finalize(stmt);
    sqlite3_close_v2(db);
  }
};

}  // namespace internal

// ---- Statement ------------------------------------------------------------------------------

Statement::Statement(Statement&& other) noexcept { *this = std::move(other); }

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    release();
    stmt_ = std::exchange(other.stmt_, nullptr);
    connection_ = std::exchange(other.connection_, nullptr);
    owned_ = other.owned_;
  }
  return *this;
}

Statement::~Statement() { release(); }

void Statement::release() {
  if (stmt_ == nullptr) return;
  if (owned_) {
    sqlite3_finalize(stmt_);
  } else {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  stmt_ = nullptr;
}

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

Statement& Statement::bindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

StatusOr<bool> Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return connection_->Error({});
}

Status Statement::run() {
  StatusOr<bool> row = false;
  do {
    row = step();
  } while (row.ok() && *row);
  sqlite3_reset(stmt_);
  return row.status();
}

void Statement::reset() { sqlite3_reset(stmt_); }

int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return p != nullptr ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                      : std::string();
}

bool Statement::isNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::optional<int64_t> Statement::optionalInt64(int column) const {
  if (isNull(column)) return std::nullopt;
  return int64(column);
}

// ---- Database -------------------------------------------------------------------------------

Database::Database(std::unique_ptr<internal::Connection> c) : c_(std::move(c)) {}
Database::Database(Database&& other) noexcept = default;
Database& Database::operator=(Database&& other) noexcept = default;
Database::~Database() = default;

StatusOr<Database> Database::Open(const std::string& path, const OpenOptions& options) {
  auto c = std::make_unique<internal::Connection>();
  c->label = options.label.empty() ? path : options.label;
  const int flags = (options.readonly ? SQLITE_OPEN_READONLY
                                      : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX;
  if (!options.readonly && path != ":memory:" && path.rfind("file:", 0) != 0) {
    // Created owner-only whatever the umask; SQLite gives -wal and -shm the database's mode.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)::fchmod(fd, 0600);
      ::close(fd);
    }
  }
  if (sqlite3_open_v2(path.c_str(), &c->db, flags, nullptr) != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("cannot open database ", path, ": ",
                     c->db != nullptr ? sqlite3_errmsg(c->db) : "out of memory"));
  }
  sqlite3_busy_timeout(c->db, static_cast<int>(options.busy_timeout.count()));
  Database db(std::move(c));
  if (options.cache_kib > 0) {
    HF_RETURN_IF_ERROR(db.exec(absl::StrCat("PRAGMA cache_size=-", options.cache_kib)));
  }
  return db;
}

Status Database::exec(std::string_view sql) {
  const std::string text(sql);
  char* err = nullptr;
  if (sqlite3_exec(c_->db, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    Status s = absl::InternalError(
        absl::StrCat(c_->label, ": ", err != nullptr ? err : "error", " in ", text.substr(0, 60)));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

StatusOr<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(c_->db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(stmt);
    return c_->Error("prepare");
  }
  return Statement(stmt, c_.get(), /*owned=*/true);
}

Statement Database::cached(const std::string& sql) {
  auto it = c_->cache.find(sql);
  if (it == c_->cache.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(c_->db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
        SQLITE_OK) {
      // The SQL is the program's own: failing to prepare it is a broken invariant.
      std::fprintf(stderr, "hyperfleet: bad SQL (%s): %s\n", sqlite3_errmsg(c_->db), sql.c_str());
      std::abort();
    }
    it = c_->cache.emplace(sql, stmt).first;
  }
  return Statement(it->second, c_.get(), /*owned=*/false);
}

int64_t Database::lastInsertRowid() const { return sqlite3_last_insert_rowid(c_->db); }

int Database::changes() const { return sqlite3_changes(c_->db); }

Status Database::error(std::string_view what) const { return c_->Error(what); }

std::string Database::errorMessage() const { return sqlite3_errmsg(c_->db); }

bool Database::constraintViolated() const { return sqlite3_errcode(c_->db) == SQLITE_CONSTRAINT; }

const std::string& Database::label() const { return c_->label; }

sqlite3* Database::handle() const { return c_->db; }

}  // namespace hf::sqlite
