#include "hyperfleet/logs/log_operations.h"

#include <cctype>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hf::data {
extern const std::string_view kLogsServiceModel;  // data/aws-models/logs/2014-03-28
}  // namespace hf::data

namespace hf::logs {
namespace {

constexpr int64_t kMinTs = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTs = std::numeric_limits<int64_t>::max();

Status InvalidParameter(std::string message) {
  return WithAwsErrorType(absl::InvalidArgumentError(message), "InvalidParameterException");
}

/// Store NotFound errors carry CloudWatch Logs' messages; give them its type.
Status Tagged(Status s) {
  if (absl::IsNotFound(s) && !AwsErrorTypeOf(s)) {
    return WithAwsErrorType(std::move(s), "ResourceNotFoundException");
  }
  return s;
}

std::string TokenOf(char kind, const EventCursor& c) {
  return absl::StrCat(std::string(1, kind), "/", c.timestamp_ms, "/", c.id);
}

/// Parses "<kind>/<ts>/<id>"; nullopt when malformed.
std::optional<std::pair<char, EventCursor>> ParseEventToken(const std::string& token) {
  std::vector<std::string> parts = absl::StrSplit(token, '/');
  if (parts.size() != 3 || parts[0].size() != 1) return std::nullopt;
  EventCursor c;
  if (!absl::SimpleAtoi(parts[1], &c.timestamp_ms) || !absl::SimpleAtoi(parts[2], &c.id)) {
    return std::nullopt;
  }
  return std::make_pair(parts[0][0], c);
}

std::optional<int64_t> OptInt(const nlohmann::json& in, const char* key) {
  auto it = in.find(key);
  if (it == in.end() || !it->is_number()) return std::nullopt;
  return it->get<int64_t>();
}

std::string OptString(const nlohmann::json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// The log group named by logGroupName or logGroupIdentifier (a name or an ARN).
StatusOr<std::string> GroupName(const nlohmann::json& in) {
  const std::string name = OptString(in, "logGroupName");
  const std::string id = OptString(in, "logGroupIdentifier");
  if (!name.empty() && !id.empty()) {
    return InvalidParameter("LogGroup name and LogGroup ARN are mutually exclusive parameters.");
  }
  if (name.empty() && id.empty()) {
    return InvalidParameter("Should provide either a LogGroup name or a LogGroup ARN.");
  }
  if (!name.empty()) return name;
  if (id.starts_with("arn:")) {
    const size_t at = id.find(":log-group:");
    if (at == std::string::npos) return InvalidParameter("Invalid log group ARN: " + id);
    std::string rest = id.substr(at + 11);
    if (rest.ends_with(":*")) rest.resize(rest.size() - 2);
    return rest;
  }
  return id;
}

}  // namespace

std::shared_ptr<const model::ServiceModel> LogsServiceModel() {
  static const std::shared_ptr<const model::ServiceModel> model = [] {
    auto parsed = model::ServiceModel::FromJson(hf::data::kLogsServiceModel);
    if (!parsed.ok()) {
      // The embedded file is generated and tested; failing here is a build defect.
      std::abort();
    }
    return *parsed;
  }();
  return model;
}

StatusOr<FilterTerms> ParseFilterPattern(std::string_view pattern) {
  FilterTerms out;
  const std::string pattern_copy(pattern);
  const std::string p(absl::StripAsciiWhitespace(pattern_copy));
  if (p.empty() || p == "\"\"") return out;
  if (p.front() == '{' || p.front() == '[' || p.front() == '%') {
    return InvalidParameter(
        "Invalid filter pattern: Hyperfleet supports terms, \"quoted phrases\", ?term and "
        "-term only (no JSON, space-delimited or regular-expression patterns).");
  }
  size_t i = 0;
  while (i < p.size()) {
    if (std::isspace(static_cast<unsigned char>(p[i]))) {
      ++i;
      continue;
    }
    std::vector<std::string>* list = &out.all;
    if (p[i] == '?') {
      list = &out.any;
      ++i;
    } else if (p[i] == '-' && i + 1 < p.size() && !std::isspace(static_cast<unsigned char>(p[i + 1]))) {
      list = &out.none;
      ++i;
    }
    std::string term;
    if (i < p.size() && p[i] == '"') {
      ++i;
      bool closed = false;
      while (i < p.size()) {
        if (p[i] == '\\' && i + 1 < p.size()) {
          term.push_back(p[i + 1]);
          i += 2;
        } else if (p[i] == '"') {
          closed = true;
          ++i;
          break;
        } else {
          term.push_back(p[i++]);
        }
      }
      if (!closed) return InvalidParameter("Invalid filter pattern: unclosed quote.");
    } else {
      while (i < p.size() && !std::isspace(static_cast<unsigned char>(p[i]))) term.push_back(p[i++]);
    }
    if (!term.empty()) list->push_back(std::move(term));
  }
  return out;
}

LogOperations::LogOperations(LogStore& store, LogsConfig config)
    : store_(store), config_(std::move(config)), model_(LogsServiceModel()) {}

StatusOr<nlohmann::json> LogOperations::call(std::string_view op, const nlohmann::json& input) {
  StatusOr<nlohmann::json> r = [&]() -> StatusOr<nlohmann::json> {
    if (op == "DescribeLogGroups") return describeLogGroups(input);
    if (op == "DescribeLogStreams") return describeLogStreams(input);
    if (op == "GetLogEvents") return getLogEvents(input);
    if (op == "FilterLogEvents") return filterLogEvents(input);
    return WithAwsErrorType(
        absl::UnimplementedError(absl::StrCat("Unknown operation Logs_20140328.", std::string(op), ".")),
        "UnknownOperationException");
  }();
  if (!r.ok()) return Tagged(r.status());
  return r;
}

StatusOr<nlohmann::json> LogOperations::describeLogGroups(const nlohmann::json& in) {
  const std::string prefix = OptString(in, "logGroupNamePrefix");
  const std::string pattern = absl::AsciiStrToLower(OptString(in, "logGroupNamePattern"));
  if (!prefix.empty() && !pattern.empty()) {
    return InvalidParameter(
        "LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters.");
  }
  std::unordered_set<std::string> wanted;
  if (auto it = in.find("logGroupIdentifiers"); it != in.end() && it->is_array()) {
    for (const auto& v : *it) {
      nlohmann::json one = {{"logGroupIdentifier", v}};
      HF_ASSIGN_OR_RETURN(std::string name, GroupName(one));
      wanted.insert(name);
    }
  }
  const std::string cls = OptString(in, "logGroupClass");
  const int limit = static_cast<int>(OptInt(in, "limit").value_or(50));
  std::string after;
  if (const std::string token = OptString(in, "nextToken"); !token.empty()) {
    if (!token.starts_with("g/")) return InvalidParameter("The specified nextToken is invalid.");
    after = token.substr(2);
  }
  auto keep = [&](const LogGroupInfo& g) {
    if (!pattern.empty() && !absl::StrContains(absl::AsciiStrToLower(g.name), pattern)) {
      return false;
    }
    if (!wanted.empty() && !wanted.count(g.name)) return false;
    return cls.empty() || cls == "STANDARD";
  };
  nlohmann::json groups = nlohmann::json::array();
  bool more = true;
  std::string last;
  // Filters beyond the prefix apply after the store's page, so pages are refilled.
  while (more && static_cast<int>(groups.size()) < limit) {
    HF_ASSIGN_OR_RETURN(auto page, store_.describeGroups(prefix, after, limit, &more));
    for (const auto& g : page) {
      after = g.name;
      if (!keep(g)) continue;
      const std::string arn = absl::StrCat("arn:aws:logs:", config_.region, ":",
                                           config_.account_id, ":log-group:", g.name);
      groups.push_back({{"logGroupName", g.name},
                        {"creationTime", g.creation_ms},
                        {"metricFilterCount", 0},
                        {"arn", arn + ":*"},
                        {"storedBytes", g.stored_bytes},
                        {"logGroupClass", "STANDARD"},
                        {"logGroupArn", arn}});
      last = g.name;
      if (static_cast<int>(groups.size()) == limit) {
        more = more || &g != &page.back();
        break;
      }
    }
  }
  nlohmann::json out = {{"logGroups", groups}};
  if (more && !last.empty()) out["nextToken"] = "g/" + last;
  return out;
}

StatusOr<nlohmann::json> LogOperations::describeLogStreams(const nlohmann::json& in) {
  HF_ASSIGN_OR_RETURN(std::string group, GroupName(in));
  StreamQuery q;
  q.prefix = OptString(in, "logStreamNamePrefix");
  q.order_by_last_event = OptString(in, "orderBy") == "LastEventTime";
  if (q.order_by_last_event && !q.prefix.empty()) {
    return InvalidParameter("Cannot order by LastEventTime with a logStreamNamePrefix.");
  }
  q.descending = in.value("descending", false);
  q.limit = static_cast<int>(OptInt(in, "limit").value_or(50));
  if (const std::string token = OptString(in, "nextToken"); !token.empty()) {
    if (!token.starts_with("s/")) return InvalidParameter("The specified nextToken is invalid.");
    q.after = token.substr(2);
  }
  auto page = store_.describeStreams(group, q);
  if (!page.ok()) {
    if (absl::IsInvalidArgument(page.status())) {
      return InvalidParameter(std::string(page.status().message()));
    }
    return page.status();
  }
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : page->streams) {
    nlohmann::json j = {{"logStreamName", s.name},
                        {"creationTime", s.creation_ms},
                        {"arn", absl::StrCat("arn:aws:logs:", config_.region, ":",
                                             config_.account_id, ":log-group:", group,
                                             ":log-stream:", s.name)},
                        {"storedBytes", s.stored_bytes}};
    if (s.first_event_ms) j["firstEventTimestamp"] = *s.first_event_ms;
    if (s.last_event_ms) j["lastEventTimestamp"] = *s.last_event_ms;
    if (s.last_ingestion_ms) j["lastIngestionTime"] = *s.last_ingestion_ms;
    streams.push_back(std::move(j));
  }
  nlohmann::json out = {{"logStreams", streams}};
  if (page->next) out["nextToken"] = "s/" + *page->next;
  return out;
}

StatusOr<nlohmann::json> LogOperations::getLogEvents(const nlohmann::json& in) {
  HF_ASSIGN_OR_RETURN(std::string group, GroupName(in));
  const std::string stream = OptString(in, "logStreamName");
  EventQuery q;
  q.start_ms = OptInt(in, "startTime");
  q.end_ms = OptInt(in, "endTime");
  q.limit = static_cast<int>(OptInt(in, "limit").value_or(10000));
  q.from_head = in.value("startFromHead", false);
  const std::string token = OptString(in, "nextToken");
  std::optional<std::pair<char, EventCursor>> parsed;
  if (!token.empty()) {
    parsed = ParseEventToken(token);
    if (!parsed || (parsed->first != 'f' && parsed->first != 'b')) {
      return InvalidParameter("The specified nextToken is invalid.");
    }
    if (parsed->first == 'f') {
      q.after = parsed->second;
      q.from_head = true;
    } else {
      q.before = parsed->second;
      q.from_head = false;
    }
  }
  HF_ASSIGN_OR_RETURN(EventPage page, store_.getEvents(group, stream, q));
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : page.events) {
    events.push_back(
        {{"timestamp", e.timestamp_ms}, {"message", e.message}, {"ingestionTime", e.ingestion_ms}});
  }
  nlohmann::json out = {{"events", events}};
  if (!page.events.empty()) {
    const auto& first = page.events.front();
    const auto& last = page.events.back();
    out["nextForwardToken"] = TokenOf('f', {last.timestamp_ms, last.id});
    out["nextBackwardToken"] = TokenOf('b', {first.timestamp_ms, first.id});
  } else if (parsed) {
    // Nothing more in that direction: the same token comes back, as AWS does.
    const char other = parsed->first == 'f' ? 'b' : 'f';
    out[parsed->first == 'f' ? "nextForwardToken" : "nextBackwardToken"] = token;
    out[other == 'f' ? "nextForwardToken" : "nextBackwardToken"] = TokenOf(other, parsed->second);
  } else {
    out["nextForwardToken"] = TokenOf('f', {q.start_ms ? *q.start_ms : kMinTs, 0});
    out["nextBackwardToken"] = TokenOf('b', {q.end_ms ? *q.end_ms : kMaxTs, 0});
  }
  return out;
}

StatusOr<nlohmann::json> LogOperations::filterLogEvents(const nlohmann::json& in) {
  HF_ASSIGN_OR_RETURN(std::string group, GroupName(in));
  FilterQuery q;
  if (auto it = in.find("logStreamNames"); it != in.end() && it->is_array()) {
    for (const auto& v : *it) q.stream_names.push_back(v.get<std::string>());
  }
  q.stream_prefix = OptString(in, "logStreamNamePrefix");
  if (!q.stream_names.empty() && !q.stream_prefix.empty()) {
    return InvalidParameter(
        "logStreamNames and logStreamNamePrefix are mutually exclusive parameters.");
  }
  q.start_ms = OptInt(in, "startTime");
  q.end_ms = OptInt(in, "endTime");
  q.limit = static_cast<int>(OptInt(in, "limit").value_or(10000));
  HF_ASSIGN_OR_RETURN(FilterTerms terms, ParseFilterPattern(OptString(in, "filterPattern")));
  q.all_terms = std::move(terms.all);
  q.any_terms = std::move(terms.any);
  q.none_terms = std::move(terms.none);
  if (const std::string token = OptString(in, "nextToken"); !token.empty()) {
    auto parsed = ParseEventToken(token);
    if (!parsed || parsed->first != 'e') {
      return InvalidParameter("The specified nextToken is invalid.");
    }
    q.after = parsed->second;
  }
  HF_ASSIGN_OR_RETURN(EventPage page, store_.filterEvents(group, q));
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : page.events) {
    events.push_back({{"logStreamName", e.stream},
                      {"timestamp", e.timestamp_ms},
                      {"message", e.message},
                      {"ingestionTime", e.ingestion_ms},
                      {"eventId", std::to_string(e.id)}});
  }
  nlohmann::json out = {{"events", events}, {"searchedLogStreams", nlohmann::json::array()}};
  if (page.more && !page.events.empty()) {
    const auto& last = page.events.back();
    out["nextToken"] = TokenOf('e', {last.timestamp_ms, last.id});
  }
  return out;
}

}  // namespace hf::logs
