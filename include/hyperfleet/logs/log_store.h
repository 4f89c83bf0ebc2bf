#pragma once
// The log store behind the CloudWatch Logs subset: log groups, their streams and events, in
// their own SQLite database <data-dir>/logs.db (WAL, synchronous=NORMAL: a lost last batch
// after a power cut is acceptable for logs, and log writes never contend with the control
// store). Times are epoch milliseconds, as CloudWatch Logs counts them.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::logs {

/// One event to append: when it happened (ms since epoch) and its text.
struct InputLogEvent {
  int64_t timestamp_ms = 0;
  std::string message;
};

/// One stored event. `id` increases with ingestion (unique in the database); events are
/// ordered by (timestamp_ms, id).
struct LogEvent {
  int64_t id = 0;
  std::string stream;  ///< its log stream's name
  int64_t timestamp_ms = 0;
  int64_t ingestion_ms = 0;
  std::string message;
};

/// A position between two events in (timestamp_ms, id) order: a query "after" it sees events
/// with (timestamp, id) > (timestamp_ms, id), "before" it those with a smaller pair.
struct EventCursor {
  int64_t timestamp_ms = 0;
  int64_t id = 0;
};

struct LogGroupInfo {
  std::string name;
  int64_t creation_ms = 0;
  int64_t stored_bytes = 0;  ///< sum over its streams
};

struct LogStreamInfo {
  std::string name;
  int64_t creation_ms = 0;
  std::optional<int64_t> first_event_ms, last_event_ms, last_ingestion_ms;  ///< none if empty
  int64_t stored_bytes = 0;  ///< UTF-8 bytes of the messages kept
  int64_t event_count = 0;
};

/// How much each stream keeps: the oldest events (by timestamp) go first once either cap is
/// passed, so the database's size is bounded by streams × max_bytes_per_stream.
struct RetentionPolicy {
  int64_t max_events_per_stream = 10000;
  int64_t max_bytes_per_stream = 8 << 20;
};

/// Which streams a describeStreams() call lists, and in what order.
struct StreamQuery {
  std::string prefix;               ///< only names starting with it
  bool order_by_last_event = false; ///< false: by name; true: by lastEventTimestamp
  bool descending = false;
  int limit = 50;
  /// Resume after this position (from the previous page's `next`); empty: from the start.
  std::optional<std::string> after;
};

struct StreamPage {
  std::vector<LogStreamInfo> streams;
  std::optional<std::string> next;  ///< opaque resume position when more streams follow
};

/// A range of one stream's events.
struct EventQuery {
  std::optional<int64_t> start_ms;  ///< inclusive
  std::optional<int64_t> end_ms;    ///< exclusive, as CloudWatch Logs' endTime
  std::optional<EventCursor> after;   ///< only events after this position
  std::optional<EventCursor> before;  ///< only events before this position
  bool from_head = true;  ///< true: the first `limit` events; false: the last `limit`
  int limit = 10000;
  int64_t max_bytes = 1 << 20;  ///< stop before the page's messages pass this (>= 1 event)
};

/// Events across a group's streams, in (timestamp, id) order.
struct FilterQuery {
  std::vector<std::string> stream_names;  ///< empty: every stream (or the prefix's)
  std::string stream_prefix;
  std::optional<int64_t> start_ms;  ///< inclusive
  std::optional<int64_t> end_ms;    ///< exclusive
  /// Each must occur in the message (case-sensitive); any_terms: at least one must (when not
  /// empty); none_terms: none may.
  std::vector<std::string> all_terms, any_terms, none_terms;
  std::optional<EventCursor> after;
  int limit = 10000;
  int64_t max_bytes = 1 << 20;
};

struct EventPage {
  std::vector<LogEvent> events;  ///< ascending (timestamp, id)
  bool more = false;             ///< true when the limit cut the page short
};

/// Log groups, streams and events over one SQLite file. Thread-safe: appends are serialised
/// on one writer connection; reads use their own connections, so they never wait for one.
class LogStore {
 public:
  virtual ~LogStore() = default;

  /// Appends `events` to `group`/`stream`, creating either on first use, in one transaction;
  /// every event gets ingestion time `clock.now()`. Then applies the retention policy to the
  /// stream. An empty batch still creates the group and stream. Errors: InvalidArgument for
  /// an empty group or stream name; Internal for SQLite failures.
  virtual Status append(const std::string& group, const std::string& stream,
                        std::span<const InputLogEvent> events) = 0;

  /// Deletes a group with its streams and events. Returns false when it did not exist.
  virtual StatusOr<bool> deleteGroup(const std::string& group) = 0;

  /// The group, or nullopt when it does not exist.
  virtual StatusOr<std::optional<LogGroupInfo>> group(const std::string& name) const = 0;

  /// Groups whose name starts with `prefix` and sorts after `after` (exclusive; empty: from
  /// the first), by name, at most `limit`; `*more` says whether more follow.
  virtual StatusOr<std::vector<LogGroupInfo>> describeGroups(const std::string& prefix,
                                                             const std::string& after, int limit,
                                                             bool* more) const = 0;

  /// Streams of `group`. Errors: NotFound when the group does not exist; InvalidArgument for
  /// a malformed `after`.
  virtual StatusOr<StreamPage> describeStreams(const std::string& group,
                                               const StreamQuery& query) const = 0;

  /// The stream, or nullopt. Errors: NotFound when the group does not exist.
  virtual StatusOr<std::optional<LogStreamInfo>> stream(const std::string& group,
                                                        const std::string& stream) const = 0;

  /// Events of one stream. Errors: NotFound when the group or the stream does not exist
  /// (the message says which, in CloudWatch Logs' words).
  virtual StatusOr<EventPage> getEvents(const std::string& group, const std::string& stream,
                                        const EventQuery& query) const = 0;

  /// Events of the group's selected streams. Errors: NotFound when the group does not exist.
  virtual StatusOr<EventPage> filterEvents(const std::string& group,
                                           const FilterQuery& query) const = 0;
};

/// Opens (creating when missing) the log database at `path`. `clock` must outlive the store.
/// Errors: Internal naming the path when SQLite cannot open or migrate it.
StatusOr<std::unique_ptr<LogStore>> OpenLogStore(const std::string& path, const Clock& clock,
                                                 RetentionPolicy retention = {});

/// OpenLogStore(<data_dir>/logs.db, ...): what the server uses.
StatusOr<std::unique_ptr<LogStore>> OpenLogStoreInDataDir(const std::string& data_dir,
                                                          const Clock& clock,
                                                          RetentionPolicy retention = {});

}  // namespace hf::logs
