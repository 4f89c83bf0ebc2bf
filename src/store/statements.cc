#include "store/statements.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/store/store.h"

namespace hf::store {

Status RunWrite(const sqlite::Database& db, sqlite::Statement& s, std::string_view what) {
  if (s.step().ok()) return absl::OkStatus();
  if (db.constraintViolated()) {
    return absl::AlreadyExistsError(absl::StrCat(AbslView(what), ": ", db.errorMessage()));
  }
  return db.error(what);
}

StatusOr<int64_t> RowRevision(sqlite::Database& db, const char* table, const char* key_col,
                              const std::string& key) {
  auto s = db.cached(absl::StrCat("SELECT revision FROM ", table, " WHERE ", key_col, " = ?1"));
  s.bind(1, key);
  return ReadOne<int64_t>(
      db, s, "read revision", [](const sqlite::Statement& row) { return row.int64(0); },
      [] { return StatusOr<int64_t>(kMustNotExist); });
}

Status CheckRevision(sqlite::Database& db, const char* table, const char* key_col,
                     const std::string& key, int64_t expected, const char* what) {
  HF_ASSIGN_OR_RETURN(int64_t actual, RowRevision(db, table, key_col, key));
  if (actual == expected) return absl::OkStatus();
  if (expected == kMustNotExist) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", key, " already exists"));
  }
  if (actual == kMustNotExist) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", key, " no longer exists"));
  }
  return absl::FailedPreconditionError(absl::StrCat(what, " ", key,
                                                    " was modified concurrently (revision ",
                                                    actual, ", expected ", expected, ")"));
}

}  // namespace hf::store
