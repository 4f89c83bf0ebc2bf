#pragma once
// Keyset pagination of the store's list queries (private to src/store), over the NextTokens
// of hyperfleet/store/page_token.h.
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/sqlite.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/store/page_token.h"
#include "hyperfleet/store/store.h"
#include "store/statements.h"

namespace hf::store {

/// A LIKE pattern matching `needle` anywhere, with LIKE's wildcards escaped (ESCAPE '\').
std::string ContainsPattern(const std::string& needle);

/// The filters ListClusters and ListClusterNodes share: created strictly after and before
/// (on `time_col`, epoch seconds) and a name containing `contains` (on `name_col`), bound at
/// ?first, ?first+1 and ?first+2. Each condition appears only when used: an always-present
/// range on the sort column would keep SQLite from seeking to the page's start in the index.
struct CreatedFilter {
  const char* time_col;
  const char* name_col;
  int first;
  std::optional<SystemTime> after, before;
  std::string contains;

  /// " AND ..." for each condition used.
  std::string sql() const;
  void bind(sqlite::Statement& s) const;
};

/// Keyset pagination over (sort key, tie-breaker) columns, shared by every list query: the
/// page starts strictly after the last row of the previous page, in the requested order.
struct Keyset {
  const char* key_col;  ///< sort column
  const char* tie_col;  ///< unique tie-breaker column
  bool numeric_key;     ///< sort column holds numbers (epoch seconds), else text
  bool descending;
  std::optional<PageToken> after;  ///< from the request's NextToken

  /// Parses `page_token` (empty: first page). InvalidArgument for a token that is not ours.
  Status start(const std::string& page_token);
  /// The WHERE condition (bound at ?key_param, ?key_param+1) and ORDER BY ... LIMIT ?limit.
  std::string sql(int key_param, int limit_param) const;
  /// Binds the position and the limit (one more row than the page: is there a next page?).
  void bind(sqlite::Statement& s, int key_param, int limit_param, int limit) const;

  /// Reads the rows of `s` into a page of at most `limit` items; `key_of(item)` gives the
  /// (sort key, tie-breaker) that the next page's token starts after. Errors: Internal.
  template <class T, class ReadFn, class KeyFn>
  StatusOr<Page<T>> collect(const sqlite::Database& db, sqlite::Statement& s, int limit,
                            ReadFn read, KeyFn key_of) const {
    Page<T> page;
    // limit + 1 rows at most (bind()): for a page of the API's size (MaxResults <= 100 in
    // the model), one allocation and no moves of items as the page grows.
    if (limit > 0 && limit <= 1000) page.items.reserve(static_cast<size_t>(limit) + 1);
    HF_RETURN_IF_ERROR(ForEachRow(db, s, "list", [&](const sqlite::Statement& row) {
      page.items.push_back(read(row));
    }));
    if (static_cast<int>(page.items.size()) > limit) {
      page.items.resize(limit);
      auto [key, tie] = key_of(page.items.back());
      page.next_token = EncodePageToken(key, tie);
    }
    return page;
  }
};

}  // namespace hf::store
