#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "hyperfleet/common/sqlite.h"
#include "hyperfleet/store/page_token.h"
#include "hyperfleet/store/store.h"

namespace hf::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      dir_ = fs::temp_directory_path() / ("hf-store-" + std::to_string(getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()
                                              ->current_test_info()
                                              ->name());
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      path_ = (dir_ / "state.db").string();
    } else {
      path_ = ":memory:";
    }
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  model::Cluster MakeCluster(const std::string& id, const std::string& name, double t) {
    model::Cluster c;
    c.id = id;
    c.name = name;
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id;
    c.creation_time = FromEpochSeconds(t);
    model::InstanceGroup g;
    g.name = "workers";
    g.instance_type = "ml.c5.xlarge";
    g.target_count = 2;
    g.spec = {{"InstanceGroupName", "workers"}, {"InstanceType", "ml.c5.xlarge"},
              {"InstanceCount", 2}};
    c.groups.push_back(g);
    return c;
  }

  model::Node MakeNode(const std::string& cluster, const std::string& id, double t,
                       const std::string& group = "workers") {
    model::Node n;
    n.cluster_id = cluster;
    n.instance_id = id;
    n.logical_id = "l-" + id;
    n.group = group;
    n.instance_type = "ml.c5.xlarge";
    n.launch_time = FromEpochSeconds(t);
    return n;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, CreateReadRoundTrip) {
  auto c = MakeCluster("abcdefabcdef", "demo", 100.5);
  c.spec = {{"NodeRecovery", "Automatic"}};
  WriteBatch b;
  b.clusters.push_back({c, kMustNotExist, false});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok()) << rev.status();
  for (const std::string& key : std::vector<std::string>{"", "demo", c.arn}) {
    auto got = key.empty() ? store_->clusterById(c.id) : store_->cluster(key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->name, "demo");
    EXPECT_EQ(got->revision, *rev);
    EXPECT_EQ(got->spec["NodeRecovery"], "Automatic");
    ASSERT_EQ(got->groups.size(), 1u);
    EXPECT_EQ(got->groups[0].target_count, 2);
    EXPECT_DOUBLE_EQ(ToEpochSeconds(got->creation_time), 100.5);
  }
  EXPECT_TRUE(absl::IsNotFound(store_->cluster("nope").status()));
  // The API names clusters by name or ARN: a bare id is not a name.
  EXPECT_TRUE(absl::IsNotFound(store_->cluster("abcdefabcdef").status()));
}

TEST_P(StoreTest, AClusterNamedLikeAnotherClustersIdIsFoundByItsName) {
  WriteBatch b;
  b.clusters.push_back({MakeCluster("abcdefabcdef", "alpha", 1), kMustNotExist, false});
  b.clusters.push_back({MakeCluster("zzzzzzzzzzzz", "abcdefabcdef", 2), kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  auto got = store_->cluster("abcdefabcdef");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id, "zzzzzzzzzzzz");
}

TEST_P(StoreTest, CompareAndSwapRejectsStaleWritesAndChangesNothing) {
  auto c = MakeCluster("abcdefabcdef", "demo", 1);
  WriteBatch create;
  create.clusters.push_back({c, kMustNotExist, false});
  auto r1 = store_->commit(create);
  ASSERT_TRUE(r1.ok());
  // A second create of the same id fails.
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->commit(create).status()));

  c.status = "InService";
  WriteBatch update;
  update.clusters.push_back({c, *r1, false});
  update.nodes.push_back({MakeNode(c.id, "i-00000000000000001", 1), kMustNotExist, false});
  ASSERT_TRUE(store_->commit(update).ok());

  // Replaying the same update (stale revision) fails atomically: the node in the batch is
  // not written either.
  WriteBatch stale;
  c.status = "Failed";
  stale.clusters.push_back({c, *r1, false});
  stale.nodes.push_back({MakeNode(c.id, "i-00000000000000002", 2), kMustNotExist, false});
  auto s = store_->commit(stale);
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_EQ(store_->cluster("demo")->status, "InService");
  EXPECT_EQ(store_->nodes(c.id)->size(), 1u);
}

TEST_P(StoreTest, DuplicateNameIsAlreadyExists) {
  WriteBatch a, b;
  a.clusters.push_back({MakeCluster("aaaaaaaaaaaa", "demo", 1), kMustNotExist, false});
  b.clusters.push_back({MakeCluster("bbbbbbbbbbbb", "demo", 2), kMustNotExist, false});
  ASSERT_TRUE(store_->commit(a).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->commit(b).status()));
}

TEST_P(StoreTest, NodePagesCoverEveryNodeOnceInEachOrder) {
  auto c = MakeCluster("abcdefabcdef", "demo", 1);
  WriteBatch b;
  b.clusters.push_back({c, kMustNotExist, false});
  for (int i = 0; i < 257; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "i-%017x", i * 7919 % 1000);
    // Several nodes share a launch time, so ties are broken by instance id.
    b.nodes.push_back({MakeNode(c.id, id, 1000 + i / 3, i % 2 ? "workers" : "ctl"),
                       kMustNotExist, false});
  }
  ASSERT_TRUE(store_->commit(b).ok());
  for (auto sort : {SortBy::kCreationTime, SortBy::kName}) {
    for (bool desc : {false, true}) {
      NodeQuery q;
      q.sort_by = sort;
      q.descending = desc;
      q.limit = 10;
      std::vector<std::string> seen;
      std::set<std::string> unique;
      for (int pages = 0; pages < 100; ++pages) {
        auto page = store_->listNodes(c.id, q);
        ASSERT_TRUE(page.ok()) << page.status();
        for (const auto& n : page->items) {
          seen.push_back(n.instance_id);
          unique.insert(n.instance_id);
        }
        if (page->next_token.empty()) break;
        q.page_token = page->next_token;
      }
      EXPECT_EQ(seen.size(), 257u);
      EXPECT_EQ(unique.size(), 257u);
    }
  }
  NodeQuery filtered;
  filtered.group_contains = "ct";
  filtered.limit = 100;
  auto page = store_->listNodes(c.id, filtered);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->items.size(), 100u);
  for (const auto& n : page->items) EXPECT_EQ(n.group, "ctl");

  auto counts = store_->groupCounts(c.id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)["ctl"].pending, 129);
  EXPECT_EQ((*counts)["workers"].pending, 128);
}

TEST_P(StoreTest, ANodeIsFoundByInstanceIdOrLogicalIdInItsClusterOnly) {
  WriteBatch b;
  b.clusters.push_back({MakeCluster("c1", "one", 1), kMustNotExist, false});
  b.clusters.push_back({MakeCluster("c2", "two", 2), kMustNotExist, false});
  for (int i = 0; i < 3; ++i) b.nodes.push_back({MakeNode("c1", "i-" + std::to_string(i), i)});
  b.nodes.push_back({MakeNode("c2", "i-9", 9)});
  ASSERT_TRUE(store_->commit(b).ok());
  EXPECT_EQ(store_->node("c1", "i-1")->instance_id, "i-1");
  EXPECT_EQ(store_->node("c1", "l-i-2")->instance_id, "i-2");
  EXPECT_TRUE(absl::IsNotFound(store_->node("c1", "i-9").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->node("c1", "l-i-9").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->node("c1", "i-7").status()));
}

TEST_P(StoreTest, ForeignTokensAreRejected) {
  NodeQuery q;
  q.page_token = "not-a-token";
  EXPECT_TRUE(absl::IsInvalidArgument(store_->listNodes("x", q).status()));
  ClusterQuery cq;
  cq.page_token = "7b7d";  // hex of "{}"
  EXPECT_TRUE(absl::IsInvalidArgument(store_->listClusters(cq).status()));
}

TEST(PageToken, IsTheLowercaseHexOfKeyAndTieAndReadsOnlyThat) {
  const std::string token = EncodePageToken(12.5, "abc");
  EXPECT_EQ(token, "7b2269223a22616263222c226b223a31322e357d");  // {"i":"abc","k":12.5}
  auto back = DecodePageToken(token, /*numeric_key=*/true);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->key, 12.5);
  EXPECT_EQ(back->tie, "abc");
  EXPECT_TRUE(DecodePageToken(EncodePageToken("demo", "id"), false).ok());
  for (const std::string& bad : {
           absl::AsciiStrToUpper(token),  // only what EncodePageToken writes
           token.substr(1), token + "0g", std::string("7b7d"),  // "{}"
           EncodePageToken("demo", "id"),  // a text key where a number is expected
       }) {
    const auto decoded = DecodePageToken(bad, /*numeric_key=*/true);
    ASSERT_TRUE(absl::IsInvalidArgument(decoded.status())) << bad;
    EXPECT_EQ(decoded.status().message(), "Invalid pagination token (NextToken).");
  }
  EXPECT_FALSE(DecodePageToken(token, /*numeric_key=*/false).ok());
}

TEST_P(StoreTest, EraseRemovesNodesEventsAndTags) {
  auto c = MakeCluster("abcdefabcdef", "demo", 1);
  WriteBatch b;
  b.clusters.push_back({c, kMustNotExist, false});
  b.nodes.push_back({MakeNode(c.id, "i-00000000000000001", 1), kMustNotExist, false});
  model::Event e;
  e.id = "ev1";
  e.cluster_id = c.id;
  e.description = "created";
  b.events.push_back(e);
  b.tags.push_back({c.arn, {{"env", "dev"}}, {}});
  auto rev = store_->commit(b);
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_EQ(store_->tags(c.arn)->size(), 1u);
  EXPECT_TRUE(store_->event(c.id, "ev1").ok());

  WriteBatch erase;
  c.revision = *rev;
  erase.clusters.push_back({c, *rev, true});
  ASSERT_TRUE(store_->commit(erase).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->clusterById(c.id).status()));
  EXPECT_TRUE(store_->nodes(c.id)->empty());
  EXPECT_TRUE(store_->tags(c.arn)->empty());
  EXPECT_TRUE(absl::IsNotFound(store_->event(c.id, "ev1").status()));
}

TEST_P(StoreTest, ConcurrentWritersNeverLoseAnUpdate) {
  auto c = MakeCluster("abcdefabcdef", "demo", 1);
  WriteBatch b;
  b.clusters.push_back({c, kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  // Each thread adds tags through read-modify-write with CAS, retrying on conflict; every
  // increment must survive.
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        for (;;) {
          auto cur = store_->cluster("demo");
          ASSERT_TRUE(cur.ok());
          WriteBatch w;
          model::Cluster next = *cur;
          next.failure_message = std::to_string(std::stoi("0" + cur->failure_message) + 1);
          w.clusters.push_back({next, cur->revision, false});
          auto r = store_->commit(w);
          if (r.ok()) break;
          ASSERT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(store_->cluster("demo")->failure_message, std::to_string(kThreads * kEach));
}

TEST_P(StoreTest, ReopenKeepsCommittedData) {
  if (!GetParam()) GTEST_SKIP() << "in-memory stores do not persist";
  WriteBatch b;
  b.clusters.push_back({MakeCluster("abcdefabcdef", "demo", 1), kMustNotExist, false});
  ASSERT_TRUE(store_->commit(b).ok());
  store_.reset();
  auto reopened = OpenSqliteStore(path_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE((*reopened)->cluster("demo").ok());
}

TEST_P(StoreTest, FileIsInWalModeAtTheCurrentSchemaVersion) {
  if (!GetParam()) GTEST_SKIP() << "an in-memory store has no file";
  auto db = sqlite::Database::Open(path_, {.readonly = true});
  ASSERT_TRUE(db.ok()) << db.status();
  auto mode = db->prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok() && mode->step().value());
  EXPECT_EQ(mode->text(0), "wal");  // readers run while a write commits
  auto version = db->prepare("PRAGMA user_version");
  ASSERT_TRUE(version.ok() && version->step().value());
  EXPECT_EQ(version->int64(0), 5);
}

TEST_P(StoreTest, ANewerSchemaIsRefused) {
  if (!GetParam()) GTEST_SKIP() << "an in-memory store has no file";
  store_.reset();
  {
    auto db = sqlite::Database::Open(path_);
    ASSERT_TRUE(db.ok() && db->exec("PRAGMA user_version = 99").ok());
  }
  auto reopened = OpenSqliteStore(path_);
  ASSERT_TRUE(absl::IsFailedPrecondition(reopened.status())) << reopened.status();
  EXPECT_NE(reopened.status().message().find("schema version 99"), std::string::npos);
}

TEST_P(StoreTest, ANodeOfNoClusterIsRefusedByItsForeignKeyAndNothingIsWritten) {
  WriteBatch b;
  b.clusters.push_back({MakeCluster("abcdefabcdef", "demo", 1), kMustNotExist, false});
  const int64_t rev = store_->commit(b).value();
  WriteBatch orphan;
  orphan.nodes.push_back({MakeNode("nosuchcluster", "i-1", 2), kMustNotExist, false});
  orphan.events.push_back(model::MakeEvent("e-1", "abcdefabcdef", FromEpochSeconds(2),
                                           {"Cluster", "Info", "x", "", "", nullptr}));
  const auto refused = store_->commit(orphan);
  ASSERT_TRUE(absl::IsAlreadyExists(refused.status())) << refused.status();
  EXPECT_EQ(refused.status().message(), "write node: FOREIGN KEY constraint failed");
  EXPECT_TRUE(absl::IsNotFound(store_->node("nosuchcluster", "i-1").status()));
  EXPECT_TRUE(store_->listEvents("abcdefabcdef", {}).value().items.empty());
  // The refused batch drew no revision either.
  WriteBatch next;
  next.nodes.push_back({MakeNode("abcdefabcdef", "i-2", 3), kMustNotExist, false});
  EXPECT_EQ(store_->commit(next).value(), rev + 1);
}

INSTANTIATE_TEST_SUITE_P(FileAndMemory, StoreTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "File" : "Memory"; });

}  // namespace
}  // namespace hf::store
