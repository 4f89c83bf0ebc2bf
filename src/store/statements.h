#pragma once
// Statement helpers of the SQLite store (private to src/store), on the one SQLite wrapper
// (hyperfleet/common/sqlite.h): reading rows, running a write, and the compare-and-swap
// check of a row's revision. Failures read "sqlite: <what>: <SQLite's message>" (the store
// labels its connections "sqlite").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/sqlite.h"
#include "hyperfleet/common/status.h"

namespace hf::store {

/// Reads text columns `first`, `first` + 1, ... of the current row into `out...`, in order.
template <class... Out>
void ReadTexts(const sqlite::Statement& s, int first, Out&... out) {
  int column = first;
  ((out = s.text(column++)), ...);
}

/// Steps `s` through its rows, calling `on_row(s)` on each. Errors: Internal naming `what`.
template <class Fn>
Status ForEachRow(const sqlite::Database& db, sqlite::Statement& s, std::string_view what,
                  Fn on_row) {
  for (;;) {
    const StatusOr<bool> row = s.step();
    if (!row.ok()) return db.error(what);
    if (!*row) return absl::OkStatus();
    on_row(static_cast<const sqlite::Statement&>(s));
  }
}

/// Every row of `s`, each read by `read(s)`. Errors: as ForEachRow.
template <class T, class ReadFn>
StatusOr<std::vector<T>> ReadAll(const sqlite::Database& db, sqlite::Statement& s,
                                 std::string_view what, ReadFn read) {
  std::vector<T> out;
  HF_RETURN_IF_ERROR(
      ForEachRow(db, s, what, [&](const sqlite::Statement& row) { out.push_back(read(row)); }));
  return out;
}

/// The first row of `s`, read by `read(s)`; `not_found()` (a Status) when there is none.
/// Errors: Internal naming `what`.
template <class T, class ReadFn, class NotFoundFn>
StatusOr<T> ReadOne(const sqlite::Database& db, sqlite::Statement& s, std::string_view what,
                    ReadFn read, NotFoundFn not_found) {
  const StatusOr<bool> row = s.step();
  if (!row.ok()) return db.error(what);
  if (!*row) return not_found();
  return read(static_cast<const sqlite::Statement&>(s));
}

/// Runs write statement `s` to its end. Errors: AlreadyExists "<what>: <SQLite's message>"
/// for a violated constraint (e.g. a taken ARN), Internal naming `what` otherwise.
Status RunWrite(const sqlite::Database& db, sqlite::Statement& s, std::string_view what);

/// The revision of the row of `table` whose `key_col` is `key`; kMustNotExist when absent.
StatusOr<int64_t> RowRevision(sqlite::Database& db, const char* table, const char* key_col,
                              const std::string& key);

/// Compare-and-swap on one row: OK when its revision is `expected` (kMustNotExist: no such
/// row). Errors: FailedPrecondition "<what> <key> already exists", "... no longer exists" or
/// "... was modified concurrently (revision R, expected E)".
Status CheckRevision(sqlite::Database& db, const char* table, const char* key_col,
                     const std::string& key, int64_t expected, const char* what);

}  // namespace hf::store
