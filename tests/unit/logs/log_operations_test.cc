#include "hyperfleet/logs/log_operations.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hyperfleet/api/api_handler.h"

namespace hf::logs {
namespace {

class Clock1 : public Clock {
 public:
  SystemTime now() const override { return SystemTime(std::chrono::milliseconds(5000)); }
};

class LogOperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-logops-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(*OpenLogStoreInDataDir(dir_, clock_));
    ops_ = std::make_unique<LogOperations>(*store_, LogsConfig{});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Validates as the ApiHandler does, then calls.
  StatusOr<nlohmann::json> Call(const std::string& op, const nlohmann::json& in) {
    if (Status s = ops_->model().validateInput(op, in); !s.ok()) {
      return AwsErrorTypeOf(s) ? s : WithAwsErrorType(s, ops_->validationErrorType());
    }
    return ops_->call(op, ops_->model().pruneInput(op, in));
  }
  static std::string TypeOf(const Status& s) { return AwsErrorTypeOf(s).value_or(""); }

  std::string dir_;
  Clock1 clock_;
  std::unique_ptr<LogStore> store_;
  std::unique_ptr<LogOperations> ops_;
};

TEST_F(LogOperationsTest, ModelHasTheFourOperations) {
  EXPECT_EQ(ops_->model().operations(),
            (std::vector<std::string>{"DescribeLogGroups", "DescribeLogStreams",
                                      "FilterLogEvents", "GetLogEvents"}));
}

TEST_F(LogOperationsTest, DescribeLogGroupsShapesAndPages) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->append("/aws/sagemaker/Clusters/c" + std::to_string(i), "s", {}).ok());
  }
  auto r = Call("DescribeLogGroups", {{"logGroupNamePrefix", "/aws/"}, {"limit", 2}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)["logGroups"].size(), 2u);
  const auto& g = (*r)["logGroups"][0];
  EXPECT_EQ(g["logGroupName"], "/aws/sagemaker/Clusters/c0");
  EXPECT_EQ(g["creationTime"], 5000);
  EXPECT_EQ(g["arn"], "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Clusters/c0:*");
  ASSERT_TRUE(r->contains("nextToken"));
  auto r2 = Call("DescribeLogGroups", {{"logGroupNamePrefix", "/aws/"}, {"limit", 2},
                                       {"nextToken", (*r)["nextToken"]}});
  ASSERT_EQ((*r2)["logGroups"].size(), 1u);
  EXPECT_FALSE(r2->contains("nextToken"));
  auto pat = Call("DescribeLogGroups", {{"logGroupNamePattern", "C1"}});
  ASSERT_EQ((*pat)["logGroups"].size(), 1u);
  auto bad = Call("DescribeLogGroups", {{"limit", 51}});
  EXPECT_EQ(TypeOf(bad.status()), "InvalidParameterException");
  EXPECT_NE(std::string(bad.status().message()).find("1 validation error detected"),
            std::string::npos);
}

TEST_F(LogOperationsTest, DescribeLogStreamsErrorsAndFields) {
  auto missing = Call("DescribeLogStreams", {{"logGroupName", "/none"}});
  EXPECT_EQ(TypeOf(missing.status()), "ResourceNotFoundException");
  EXPECT_EQ(missing.status().message(), "The specified log group does not exist.");
  ASSERT_TRUE(store_->append("/g", "s1", std::vector<InputLogEvent>{{42, "hi"}}).ok());
  auto r = Call("DescribeLogStreams", {{"logGroupIdentifier",
                                        "arn:aws:logs:us-west-2:123456789012:log-group:/g"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& s = (*r)["logStreams"][0];
  EXPECT_EQ(s["logStreamName"], "s1");
  EXPECT_EQ(s["firstEventTimestamp"], 42);
  EXPECT_EQ(s["lastEventTimestamp"], 42);
  EXPECT_EQ(s["lastIngestionTime"], 5000);
  EXPECT_EQ(s["storedBytes"], 2);
  auto combo = Call("DescribeLogStreams", {{"logGroupName", "/g"},
                                           {"logStreamNamePrefix", "s"},
                                           {"orderBy", "LastEventTime"}});
  EXPECT_EQ(TypeOf(combo.status()), "InvalidParameterException");
  auto both = Call("DescribeLogStreams", {{"logGroupName", "/g"}, {"logGroupIdentifier", "/g"}});
  EXPECT_EQ(TypeOf(both.status()), "InvalidParameterException");
  auto bad_order = Call("DescribeLogStreams", {{"logGroupName", "/g"}, {"orderBy", "Size"}});
  EXPECT_EQ(TypeOf(bad_order.status()), "InvalidParameterException");
}

TEST_F(LogOperationsTest, GetLogEventsTokensAsAws) {
  std::vector<InputLogEvent> batch;
  for (int i = 0; i < 5; ++i) batch.push_back({100 + i, "e" + std::to_string(i)});
  ASSERT_TRUE(store_->append("/g", "s", batch).ok());
  // Default: the latest events.
  auto r = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"}, {"limit", 2}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)["events"].size(), 2u);
  EXPECT_EQ((*r)["events"][0]["message"], "e3");
  EXPECT_EQ((*r)["events"][1]["ingestionTime"], 5000);
  // Forward at the end: no events, same token back.
  const std::string fwd = (*r)["nextForwardToken"];
  auto end = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"},
                                   {"nextToken", fwd}});
  EXPECT_TRUE((*end)["events"].empty());
  EXPECT_EQ((*end)["nextForwardToken"], fwd);
  // New events appear through the same forward token.
  ASSERT_TRUE(store_->append("/g", "s", std::vector<InputLogEvent>{{200, "late"}}).ok());
  auto more = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"},
                                    {"nextToken", fwd}});
  ASSERT_EQ((*more)["events"].size(), 1u);
  EXPECT_EQ((*more)["events"][0]["message"], "late");
  // Backward from the first page: the two before it.
  auto back = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"}, {"limit", 2},
                                    {"nextToken", (*r)["nextBackwardToken"]}});
  ASSERT_EQ((*back)["events"].size(), 2u);
  EXPECT_EQ((*back)["events"][0]["message"], "e1");
  // From head with a time range (endTime exclusive).
  auto head = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"},
                                    {"startFromHead", true}, {"startTime", 101}, {"endTime", 103}});
  ASSERT_EQ((*head)["events"].size(), 2u);
  EXPECT_EQ((*head)["events"][0]["message"], "e1");
  // Errors.
  auto bad = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"},
                                   {"nextToken", "garbage"}});
  EXPECT_EQ(TypeOf(bad.status()), "InvalidParameterException");
  auto nostream = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "x"}});
  EXPECT_EQ(TypeOf(nostream.status()), "ResourceNotFoundException");
  EXPECT_EQ(nostream.status().message(), "The specified log stream does not exist.");
  auto required = Call("GetLogEvents", {{"logGroupName", "/g"}});
  EXPECT_EQ(TypeOf(required.status()), "InvalidParameterException");
  auto zero = Call("GetLogEvents", {{"logGroupName", "/g"}, {"logStreamName", "s"}, {"limit", 0}});
  EXPECT_EQ(TypeOf(zero.status()), "InvalidParameterException");
}

TEST_F(LogOperationsTest, FilterLogEventsPatternsAndPages) {
  ASSERT_TRUE(store_->append("/g", "a", std::vector<InputLogEvent>{
      {1, "[ok] step one"}, {3, "disk full ERROR"}, {5, "done"}}).ok());
  ASSERT_TRUE(store_->append("/g", "b", std::vector<InputLogEvent>{
      {2, "ERROR: step two failed"}, {4, "retry"}}).ok());
  auto all = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"limit", 2}});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ((*all)["events"].size(), 2u);
  EXPECT_EQ((*all)["events"][1]["logStreamName"], "b");
  EXPECT_EQ((*all)["events"][1]["eventId"].is_string(), true);
  ASSERT_TRUE(all->contains("nextToken"));
  std::vector<std::string> messages;
  nlohmann::json req = {{"logGroupName", "/g"}, {"limit", 2}};
  for (int i = 0; i < 10; ++i) {
    auto p = Call("FilterLogEvents", req);
    for (auto& e : (*p)["events"]) messages.push_back(e["message"]);
    if (!p->contains("nextToken")) break;
    req["nextToken"] = (*p)["nextToken"];
  }
  EXPECT_EQ(messages.size(), 5u);
  auto phrase = Call("FilterLogEvents", {{"logGroupName", "/g"},
                                         {"filterPattern", "\"step two\" ERROR"}});
  ASSERT_EQ((*phrase)["events"].size(), 1u);
  auto any = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"filterPattern", "?done ?retry"}});
  EXPECT_EQ((*any)["events"].size(), 2u);
  auto not_ = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"filterPattern", "ERROR -disk"},
                                       {"logStreamNames", {"a", "b"}}});
  ASSERT_EQ((*not_)["events"].size(), 1u);
  EXPECT_EQ((*not_)["events"][0]["logStreamName"], "b");
  auto time = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"startTime", 2}, {"endTime", 4}});
  EXPECT_EQ((*time)["events"].size(), 2u);
  auto json = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"filterPattern", "{ $.a = 1 }"}});
  EXPECT_EQ(TypeOf(json.status()), "InvalidParameterException");
  auto both = Call("FilterLogEvents", {{"logGroupName", "/g"}, {"logStreamNames", {"a"}},
                                       {"logStreamNamePrefix", "a"}});
  EXPECT_EQ(TypeOf(both.status()), "InvalidParameterException");
  auto nogroup = Call("FilterLogEvents", {{"logGroupName", "/none"}});
  EXPECT_EQ(TypeOf(nogroup.status()), "ResourceNotFoundException");
}

TEST(FilterPatternTest, Parses) {
  auto t = ParseFilterPattern(R"(ERROR "a \"b\"" ?x ?y -z)");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->all, (std::vector<std::string>{"ERROR", "a \"b\""}));
  EXPECT_EQ(t->any, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(t->none, (std::vector<std::string>{"z"}));
  EXPECT_TRUE(ParseFilterPattern("\"\"")->all.empty());
  EXPECT_FALSE(ParseFilterPattern("\"open").ok());
  EXPECT_FALSE(ParseFilterPattern("[a, b]").ok());
}

}  // namespace
}  // namespace hf::logs
