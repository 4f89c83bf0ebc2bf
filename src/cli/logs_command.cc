#include "hyperfleet/cli/logs_command.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <memory>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "hyperfleet/cli/client_config.h"
#include "hyperfleet/cli/command_error.h"

namespace hf::cli {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// --since as `aws logs tail` takes it: "<n>s|m|h|d|w" ago, or an ISO-8601 time.
StatusOr<int64_t> ParseSince(const std::string& since, int64_t now_ms) {
  if (since.size() >= 2) {
    int64_t n = 0;
    const char unit = since.back();
    const int64_t scale = unit == 's' ? 1000 : unit == 'm' ? 60000 : unit == 'h' ? 3600000
                          : unit == 'd' ? 86400000 : unit == 'w' ? 604800000 : 0;
    if (scale != 0 && absl::SimpleAtoi(since.substr(0, since.size() - 1), &n)) {
      return now_ms - n * scale;
    }
  }
  for (const char* fmt : {"%Y-%m-%dT%H:%M:%E*S%Ez", "%Y-%m-%dT%H:%M:%E*SZ", "%Y-%m-%dT%H:%M:%E*S",
                          "%Y-%m-%d %H:%M:%E*S", "%Y-%m-%d"}) {
    absl::Time t;
    std::string err;
    if (absl::ParseTime(fmt, since, absl::UTCTimeZone(), &t, &err)) return absl::ToUnixMillis(t);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--since '", since, "': expected e.g. 10m, 2h, 1d or an ISO-8601 time"));
}

/// One event as `aws logs tail` prints it: short "2024-01-02T03:04:05 message", detailed
/// "2024-01-02T03:04:05.678000+00:00 stream message" (Python's isoformat in UTC).
std::string FormatEvent(const nlohmann::json& e, bool detailed) {
  const int64_t ts = e.value("timestamp", int64_t{0});
  const absl::Time t = absl::FromUnixMillis(ts);
  std::string when;
  if (detailed) {
    const int64_t ms = ((ts % 1000) + 1000) % 1000;
    when = absl::FormatTime("%Y-%m-%dT%H:%M:%S", t, absl::UTCTimeZone());
    if (ms != 0) absl::StrAppend(&when, absl::StrFormat(".%03d000", ms));
    when += "+00:00";
  } else {
    when = absl::FormatTime("%Y-%m-%dT%H:%M:%S", t, absl::UTCTimeZone());
  }
  std::string line = detailed ? absl::StrCat(when, " ", e.value("logStreamName", ""), " ",
                                             e.value("message", ""))
                              : absl::StrCat(when, " ", e.value("message", ""));
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  return line;
}

struct TailFlags {
  ClientFlags client;
  std::string group, prefix, since = "10m", format = "detailed";
  bool follow = false;
};

Status RunTail(const TailFlags& f) {
  HF_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(f.client, LogsService()));
  AwsJsonClient client(std::move(config), LogsService());
  HF_ASSIGN_OR_RETURN(int64_t start, ParseSince(f.since, NowMs()));
  const bool detailed = f.format == "detailed";
  // Events already printed at the latest timestamp: a follow poll restarts at that
  // timestamp (events can share it), so their ids are remembered to print each once.
  std::set<std::string> seen_at_start;
  while (true) {
    nlohmann::json req = {{"logGroupName", f.group}, {"startTime", start}};
    if (!f.prefix.empty()) req["logStreamNamePrefix"] = f.prefix;
    int64_t latest = start;
    std::set<std::string> seen_at_latest = seen_at_start;
    std::string token;
    do {
      if (!token.empty()) req["nextToken"] = token;
      auto resp = client.Call("FilterLogEvents", req);
      if (!resp.ok()) return absl::Status(resp.status().code(),
                                          DescribeCallError(resp.status(), "FilterLogEvents"));
      for (const auto& e : (*resp)["events"]) {
        const std::string id = e.value("eventId", "");
        const int64_t ts = e.value("timestamp", int64_t{0});
        if (ts == start && seen_at_start.count(id)) continue;
        std::fputs(FormatEvent(e, detailed).c_str(), stdout);
        if (ts > latest) {
          latest = ts;
          seen_at_latest.clear();
        }
        if (ts == latest) seen_at_latest.insert(id);
      }
      std::fflush(stdout);
      token = resp->value("nextToken", "");
    } while (!token.empty());
    if (!f.follow) return absl::OkStatus();
    start = latest;
    seen_at_start = std::move(seen_at_latest);
    std::this_thread::sleep_for(std::chrono::seconds(1));  // poll interval, as aws logs tail
  }
}

struct StreamsFlags {
  ClientFlags client;
  std::string group;
};

Status RunStreams(const StreamsFlags& f) {
  HF_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(f.client, LogsService()));
  AwsJsonClient client(std::move(config), LogsService());
  nlohmann::json req = {{"logGroupName", f.group}};
  std::string token;
  do {
    if (!token.empty()) req["nextToken"] = token;
    auto resp = client.Call("DescribeLogStreams", req);
    if (!resp.ok()) return absl::Status(resp.status().code(),
                                        DescribeCallError(resp.status(), "DescribeLogStreams"));
    for (const auto& s : (*resp)["logStreams"]) {
      std::string last = "-";
      if (s.contains("lastEventTimestamp")) {
        last = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                absl::FromUnixMillis(s["lastEventTimestamp"].get<int64_t>()),
                                absl::UTCTimeZone());
      }
      std::printf("%s\t%s\n", s.value("logStreamName", "").c_str(), last.c_str());
    }
    token = resp->value("nextToken", "");
  } while (!token.empty());
  return absl::OkStatus();
}

}  // namespace

void AddLogsCommand(CLI::App& app) {
  auto* logs = app.add_subcommand("logs", "Read log groups (CloudWatch Logs API client)");
  logs->require_subcommand(1);

  auto tail_flags = std::make_shared<TailFlags>();
  auto* tail = logs->add_subcommand("tail", "Print a log group's events, as aws logs tail");
  tail->add_option("group", tail_flags->group, "Log group name")->required();
  tail->add_option("--log-stream-name-prefix", tail_flags->prefix, "Only streams with it");
  tail->add_option("--since", tail_flags->since, "Start: 10m, 2h, 1d, or ISO-8601")
      ->capture_default_str();
  tail->add_flag("--follow", tail_flags->follow, "Keep polling for new events");
  tail->add_option("--format", tail_flags->format, "short or detailed")
      ->capture_default_str()
      ->check(CLI::IsMember({"short", "detailed"}));
  AddClientFlags(*tail, tail_flags->client);
  tail->callback([tail_flags] {
    if (Status s = RunTail(*tail_flags); !s.ok()) ExitWithError("logs tail", s);
  });

  auto streams_flags = std::make_shared<StreamsFlags>();
  auto* streams = logs->add_subcommand("streams", "List a log group's streams");
  streams->add_option("group", streams_flags->group, "Log group name")->required();
  AddClientFlags(*streams, streams_flags->client);
  streams->callback([streams_flags] {
    if (Status s = RunStreams(*streams_flags); !s.ok()) ExitWithError("logs streams", s);
  });
}

}  // namespace hf::cli
