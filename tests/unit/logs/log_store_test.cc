#include "hyperfleet/logs/log_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace hf::logs {
namespace {

class FixedClock : public Clock {
 public:
  SystemTime now() const override { return SystemTime(std::chrono::milliseconds(ms.load())); }
  std::atomic<int64_t> ms{1'700'000'000'000};
};

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-logs-XXXXXX";
    dir_ = mkdtemp(tmpl);
    Open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(RetentionPolicy r = {}) {
    store_.reset();
    auto s = OpenLogStoreInDataDir(dir_, clock_, r);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void Put(const std::string& g, const std::string& s,
           std::vector<InputLogEvent> events) {
    ASSERT_TRUE(store_->append(g, s, events).ok());
  }
  std::string dir_;
  FixedClock clock_;
  std::unique_ptr<LogStore> store_;
};

TEST_F(LogStoreTest, AppendCreatesGroupAndStreamAndKeepsEventsAcrossReopen) {
  Put("/g", "s1", {{100, "a"}, {50, "b"}});
  Open();
  auto g = store_->group("/g");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->creation_ms, clock_.ms.load());
  EXPECT_EQ((*g)->stored_bytes, 2);
  auto s = store_->stream("/g", "s1");
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->first_event_ms, 50);
  EXPECT_EQ((*s)->last_event_ms, 100);
  EXPECT_EQ((*s)->last_ingestion_ms, clock_.ms.load());
  auto page = store_->getEvents("/g", "s1", {});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->events.size(), 2u);
  EXPECT_EQ(page->events[0].message, "b");  // ordered by timestamp
  EXPECT_EQ(page->events[1].message, "a");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/logs.db"));
}

TEST_F(LogStoreTest, MissingGroupAndStreamAreNotFoundWithAwsMessages) {
  auto e = store_->getEvents("/nope", "s", {});
  ASSERT_TRUE(absl::IsNotFound(e.status()));
  EXPECT_EQ(e.status().message(), "The specified log group does not exist.");
  Put("/g", "s", {});
  e = store_->getEvents("/g", "other", {});
  ASSERT_TRUE(absl::IsNotFound(e.status()));
  EXPECT_EQ(e.status().message(), "The specified log stream does not exist.");
  EXPECT_TRUE(absl::IsInvalidArgument(store_->append("", "s", {}) ));
}

TEST_F(LogStoreTest, DescribeGroupsByPrefixWithPages) {
  for (const char* g : {"/a/1", "/a/2", "/a/3", "/b/1", "/A/9"}) Put(g, "s", {});
  bool more = false;
  auto p1 = store_->describeGroups("/a/", "", 2, &more);
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->size(), 2u);
  EXPECT_TRUE(more);
  auto p2 = store_->describeGroups("/a/", p1->back().name, 2, &more);
  ASSERT_TRUE(p2.ok());
  ASSERT_EQ(p2->size(), 1u);  // prefixes are case-sensitive: /A/9 is not listed
  EXPECT_EQ((*p2)[0].name, "/a/3");
  EXPECT_FALSE(more);
}

TEST_F(LogStoreTest, DescribeStreamsOrdersByNameOrLastEvent) {
  Put("/g", "b", {{300, "x"}});
  Put("/g", "a", {{100, "x"}});
  Put("/g", "c", {{200, "x"}});
  Put("/g", "c_", {});
  StreamQuery q;
  q.limit = 2;
  auto p = store_->describeStreams("/g", q);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->streams.size(), 2u);
  EXPECT_EQ(p->streams[0].name, "a");
  ASSERT_TRUE(p->next);
  q.after = p->next;
  p = store_->describeStreams("/g", q);
  ASSERT_EQ(p->streams.size(), 2u);
  EXPECT_EQ(p->streams[1].name, "c_");
  EXPECT_FALSE(p->next);

  StreamQuery by_time;
  by_time.order_by_last_event = true;
  by_time.descending = true;
  by_time.limit = 1;
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) {
    auto page = store_->describeStreams("/g", by_time);
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& s : page->streams) names.push_back(s.name);
    if (!page->next) break;
    by_time.after = page->next;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"b", "c", "a", "c_"}));

  StreamQuery prefix;
  prefix.prefix = "c_";  // '_' is not a wildcard
  p = store_->describeStreams("/g", prefix);
  ASSERT_EQ(p->streams.size(), 1u);
  EXPECT_EQ(p->streams[0].name, "c_");
}

TEST_F(LogStoreTest, GetEventsRangesCursorsAndLimits) {
  std::vector<InputLogEvent> batch;
  for (int i = 0; i < 10; ++i) batch.push_back({1000 + i, "m" + std::to_string(i)});
  Put("/g", "s", batch);
  EventQuery q;
  q.start_ms = 1002;
  q.end_ms = 1008;  // exclusive
  q.limit = 3;
  q.from_head = false;
  auto p = store_->getEvents("/g", "s", q);
  ASSERT_EQ(p->events.size(), 3u);
  EXPECT_EQ(p->events[0].message, "m5");
  EXPECT_EQ(p->events[2].message, "m7");
  EXPECT_TRUE(p->more);
  EventQuery fwd;
  fwd.after = EventCursor{p->events[2].timestamp_ms, p->events[2].id};
  p = store_->getEvents("/g", "s", fwd);
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[0].message, "m8");
  EventQuery bytes;
  bytes.max_bytes = 5;  // two 2-byte messages fit, a third does not
  p = store_->getEvents("/g", "s", bytes);
  EXPECT_EQ(p->events.size(), 2u);
  EXPECT_TRUE(p->more);
}

TEST_F(LogStoreTest, FilterInterleavesStreamsAndMatchesTerms) {
  Put("/g", "node/1", {{10, "ERROR disk full"}, {30, "ok"}});
  Put("/g", "node/2", {{20, "error lower"}, {40, "ERROR again"}});
  Put("/g", "other", {{25, "ERROR other"}});
  FilterQuery q;
  q.stream_prefix = "node/";
  auto p = store_->filterEvents("/g", q);
  ASSERT_EQ(p->events.size(), 4u);
  EXPECT_EQ(p->events[1].stream, "node/2");
  q.all_terms = {"ERROR"};  // case-sensitive
  p = store_->filterEvents("/g", q);
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[1].message, "ERROR again");
  FilterQuery named;
  named.stream_names = {"other", "node/1"};
  named.none_terms = {"ok"};
  named.limit = 1;
  p = store_->filterEvents("/g", named);
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_TRUE(p->more);
  named.after = EventCursor{p->events[0].timestamp_ms, p->events[0].id};
  p = store_->filterEvents("/g", named);
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].message, "ERROR other");
  EXPECT_FALSE(p->more);
}

TEST_F(LogStoreTest, RetentionCapsEventsAndBytesPerStream) {
  Open({/*max_events_per_stream=*/5, /*max_bytes_per_stream=*/1000});
  for (int i = 0; i < 8; ++i) Put("/g", "s", {{i, "e" + std::to_string(i)}});
  auto s = store_->stream("/g", "s");
  EXPECT_EQ((*s)->event_count, 5);
  EXPECT_EQ((*s)->first_event_ms, 3);
  EXPECT_EQ((*s)->stored_bytes, 10);
  Open({100, 25});
  Put("/g", "s", {{100, std::string(20, 'x')}});
  s = store_->stream("/g", "s");
  EXPECT_LE((*s)->stored_bytes, 25);
  auto p = store_->getEvents("/g", "s", {});
  EXPECT_EQ(p->events.back().message, std::string(20, 'x'));
}

TEST_F(LogStoreTest, DeleteGroupRemovesEverything) {
  Put("/g", "s", {{1, "x"}});
  Put("/h", "s", {{1, "y"}});
  auto d = store_->deleteGroup("/g");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d);
  EXPECT_FALSE(*store_->deleteGroup("/g"));
  EXPECT_FALSE(store_->group("/g")->has_value());
  Put("/g", "s", {});
  EXPECT_TRUE(store_->getEvents("/g", "s", {})->events.empty());
  EXPECT_EQ(store_->getEvents("/h", "s", {})->events.size(), 1u);
}

TEST_F(LogStoreTest, ConcurrentAppendsAndReads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(store_->append("/g", "s" + std::to_string(t), std::vector<InputLogEvent>{{i, "m"}}).ok());
        ASSERT_TRUE(store_->filterEvents("/g", {}).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  FilterQuery all;
  EXPECT_EQ(store_->filterEvents("/g", all)->events.size(), 800u);
}

}  // namespace
}  // namespace hf::logs
