#pragma once
#include "hyperfleet/common/sqlite.h"
#include "hyperfleet/common/status.h"

namespace hf::store {

/// The schema version this binary writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 5;

/// Brings the database to kSchemaVersion, one migration per version, each in its own
/// transaction. Errors: FailedPrecondition when the file is newer than this binary;
/// Internal when a migration fails (the database is left at the last good version).
Status Migrate(sqlite::Database& db);

}  // namespace hf::store
