// AddTags, ListTags and DeleteTags through the ApiHandler on an in-memory store, on each
// taggable HyperPod ARN (cluster, cluster scheduler config, compute quota): create-time tags,
// round trips, the 50-tag limit, reserved "aws:" keys, unknown, deleted and foreign ARNs,
// pages, and the store's refusal of tags on an object that is gone.
#include "hyperfleet/api/tag_operations.h"

#include <gtest/gtest.h>

#include "api_world.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using testing::ApiWorld;

constexpr const char* kArnPrefix = "arn:aws:sagemaker:us-west-2:123456789012:";

Json Tags(std::initializer_list<std::pair<const char*, const char*>> pairs) {
  Json out = Json::array();
  for (const auto& [k, v] : pairs) out.push_back({{"Key", k}, {"Value", v}});
  return out;
}

class TagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Json spec = ApiWorld::ClusterSpec("tagged");
    spec["Tags"] = Tags({{"env", "dev"}});
    cluster_arn_ = w_.Sm("CreateCluster", spec).value()["ClusterArn"].get<std::string>();
    w_.SetClusterStatus("tagged", "InService");
    policy_arn_ = w_.Sm("CreateClusterSchedulerConfig",
                        {{"Name", "policy"},
                         {"ClusterArn", cluster_arn_},
                         {"SchedulerConfig", {{"FairShare", "Enabled"}}},
                         {"Tags", Tags({{"owner", "ml-platform"}, {"tier", "gold"}})}})
                      .value()["ClusterSchedulerConfigArn"].get<std::string>();
    quota_arn_ = w_.Sm("CreateComputeQuota",
                       {{"Name", "team-a-quota"},
                        {"ClusterArn", cluster_arn_},
                        {"ComputeQuotaConfig",
                         {{"ComputeQuotaResources",
                           {{{"InstanceType", "ml.c5.xlarge"}, {"Count", 1}}}}}},
                        {"ComputeQuotaTarget", {{"TeamName", "team-a"}}},
                        {"Tags", Tags({{"team", "a"}})}})
                     .value()["ComputeQuotaArn"].get<std::string>();
  }

  /// The tags of `arn` as ListTags returns them.
  Json List(const std::string& arn) {
    auto r = w_.Sm("ListTags", {{"ResourceArn", arn}});
    EXPECT_TRUE(r.ok()) << arn << ": " << r.status();
    return r.ok() ? (*r)["Tags"] : Json();
  }

  std::vector<std::string> Arns() const { return {cluster_arn_, policy_arn_, quota_arn_}; }

  ApiWorld w_;
  std::string cluster_arn_, policy_arn_, quota_arn_;
};

TEST_F(TagsTest, EveryTaggableArnListsItsCreateTimeTags) {
  EXPECT_EQ(List(cluster_arn_), Tags({{"env", "dev"}}));
  EXPECT_EQ(List(policy_arn_), Tags({{"owner", "ml-platform"}, {"tier", "gold"}}));
  EXPECT_EQ(List(quota_arn_), Tags({{"team", "a"}}));
  EXPECT_TRUE(policy_arn_.starts_with(std::string(kArnPrefix) + "cluster-scheduler-config/"));
  EXPECT_TRUE(quota_arn_.starts_with(std::string(kArnPrefix) + "compute-quota/"));
}

TEST_F(TagsTest, AddAndDeleteTagsRoundTripOnEveryTaggableArn) {
  for (const std::string& arn : Arns()) {
    SCOPED_TRACE(arn);
    auto added = w_.Sm("AddTags", {{"ResourceArn", arn},
                                   {"Tags", Tags({{"stack", "s1"}, {"a", "1"}})}});
    ASSERT_TRUE(added.ok()) << added.status();
    EXPECT_EQ(*added, Json({{"Tags", Tags({{"stack", "s1"}, {"a", "1"}})}}));
    // Overwrite one, as IaC updates do.
    ASSERT_TRUE(w_.Sm("AddTags", {{"ResourceArn", arn}, {"Tags", Tags({{"stack", "s2"}})}}).ok());
    Json listed = List(arn);
    ASSERT_EQ(listed.size(), 3u + (arn == policy_arn_ ? 1 : 0)) << listed;
    EXPECT_EQ(listed[0], Json({{"Key", "a"}, {"Value", "1"}}));  // ordered by key
    auto deleted = w_.Sm("DeleteTags", {{"ResourceArn", arn}, {"TagKeys", {"a", "stack", "none"}}});
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    EXPECT_EQ(*deleted, Json::object());
  }
  EXPECT_EQ(List(cluster_arn_), Tags({{"env", "dev"}}));
  EXPECT_EQ(List(policy_arn_), Tags({{"owner", "ml-platform"}, {"tier", "gold"}}));
  EXPECT_EQ(List(quota_arn_), Tags({{"team", "a"}}));
}

TEST_F(TagsTest, AResourceHasAtMost50Tags) {
  for (const std::string& arn : Arns()) {
    SCOPED_TRACE(arn);
    const size_t have = List(arn).size();
    Json fill = Json::array();
    for (size_t i = have; i < kMaxTagsPerResource; ++i) {
      fill.push_back({{"Key", "k" + std::to_string(100 + i)}, {"Value", "v"}});
    }
    ASSERT_TRUE(w_.Sm("AddTags", {{"ResourceArn", arn}, {"Tags", fill}}).ok());
    ASSERT_EQ(List(arn).size(), 50u);
    std::string message;
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", arn},
                                                  {"Tags", Tags({{"one-more", "x"}})}}),
                                &message),
              "ValidationException");
    EXPECT_NE(message.find("at most 50 tags"), std::string::npos) << message;
    EXPECT_NE(message.find(arn), std::string::npos) << message;
    EXPECT_EQ(List(arn).size(), 50u);  // nothing written
    // Overwriting a key of a full resource adds nothing and is accepted.
    EXPECT_TRUE(w_.Sm("AddTags", {{"ResourceArn", arn}, {"Tags", Tags({{"k149", "w"}})}}).ok());
  }
}

TEST_F(TagsTest, ReservedAndMalformedKeysAreRefusedWithTheFieldNamed) {
  for (const std::string& arn : Arns()) {
    SCOPED_TRACE(arn);
    const Json before = List(arn);
    std::string message;
    EXPECT_EQ(ApiWorld::ErrorOf(
                  w_.Sm("AddTags", {{"ResourceArn", arn},
                                    {"Tags", Tags({{"ok", "1"}, {"aws:cloudformation:x", "y"}})}}),
                  &message),
              "ValidationException");
    EXPECT_NE(message.find("'tags.2.member.key'"), std::string::npos) << message;
    EXPECT_NE(message.find("aws:"), std::string::npos) << message;
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", arn},
                                                  {"Tags", Tags({{"AWS:Upper", "y"}})}})),
              "ValidationException");
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", arn},
                                                  {"Tags", Tags({{"d", "1"}, {"d", "2"}})}}),
                                &message),
              "ValidationException");
    EXPECT_NE(message.find("'tags.2.member.key'"), std::string::npos) << message;
    // The model's pattern and lengths (the validator's, before any lookup).
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", arn},
                                                  {"Tags", Tags({{"bad#key", "1"}})}}),
                                &message),
              "ValidationException");
    EXPECT_NE(message.find("tags.1.member.key"), std::string::npos) << message;
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", arn},
                                                  {"Tags", Tags({{"", "1"}})}})),
              "ValidationException");
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("DeleteTags", {{"ResourceArn", arn},
                                                     {"TagKeys", {"x", "aws:createdBy"}}}),
                                &message),
              "ValidationException");
    EXPECT_NE(message.find("'tagKeys.2.member'"), std::string::npos) << message;
    EXPECT_EQ(List(arn), before);
  }
  // At create too.
  Json spec = ApiWorld::ClusterSpec("reserved");
  spec["Tags"] = Tags({{"aws:x", "1"}});
  EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("CreateCluster", spec)), "ValidationException");
  EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("CreateComputeQuota",
                                    {{"Name", "q2"},
                                     {"ClusterArn", cluster_arn_},
                                     {"ComputeQuotaConfig", Json::object()},
                                     {"ComputeQuotaTarget", {{"TeamName", "team-b"}}},
                                     {"Tags", Tags({{"aws:x", "1"}})}})),
            "ValidationException");
  EXPECT_TRUE(absl::IsNotFound(w_.store->cluster("reserved").status()));
}

TEST_F(TagsTest, UnknownForeignAndDeletedArnsAreResourceNotFound) {
  const std::vector<std::string> unknown = {
      std::string(kArnPrefix) + "cluster/zzzzzzzzzzzz",
      std::string(kArnPrefix) + "cluster-scheduler-config/zzzzzzzzzzzz",
      std::string(kArnPrefix) + "compute-quota/zzzzzzzzzzzz",
      // Another resource type, and our objects' ids under another type, region or account.
      std::string(kArnPrefix) + "training-job/my-job",
      std::string(kArnPrefix) + "compute-quota/" + policy_arn_.substr(policy_arn_.rfind('/') + 1),
      "arn:aws:sagemaker:eu-west-1:123456789012:" + quota_arn_.substr(quota_arn_.rfind(':') + 1),
      "arn:aws:sagemaker:us-west-2:000000000000:" + cluster_arn_.substr(cluster_arn_.rfind(':') + 1),
      std::string(kArnPrefix) + "cluster",
  };
  for (const std::string& arn : unknown) {
    SCOPED_TRACE(arn);
    for (const auto& [op, in] :
         std::vector<std::pair<std::string, Json>>{
             {"ListTags", {{"ResourceArn", arn}}},
             {"AddTags", {{"ResourceArn", arn}, {"Tags", Tags({{"k", "v"}})}}},
             {"DeleteTags", {{"ResourceArn", arn}, {"TagKeys", {"k"}}}}}) {
      std::string message;
      EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm(op, in), &message), "ResourceNotFound") << op;
      EXPECT_NE(message.find(arn), std::string::npos) << op << ": " << message;
    }
    EXPECT_TRUE(w_.store->tags(arn)->empty());
  }
  // Deleted governance objects: their tags went with them, and their ARNs are unknown.
  const std::string quota_id = quota_arn_.substr(quota_arn_.rfind('/') + 1);
  ASSERT_TRUE(w_.Sm("DeleteComputeQuota", {{"ComputeQuotaId", quota_id}}).ok());
  EXPECT_TRUE(w_.store->tags(quota_arn_)->empty());
  EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("ListTags", {{"ResourceArn", quota_arn_}})),
            "ResourceNotFound");
  EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("AddTags", {{"ResourceArn", quota_arn_},
                                                {"Tags", Tags({{"k", "v"}})}})),
            "ResourceNotFound");
  EXPECT_TRUE(w_.store->tags(quota_arn_)->empty());
  // A deleted cluster takes its own and its policy's tags.
  w_.EraseCluster("tagged");
  for (const std::string& arn : {cluster_arn_, policy_arn_}) {
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("ListTags", {{"ResourceArn", arn}})), "ResourceNotFound");
    EXPECT_TRUE(w_.store->tags(arn)->empty()) << arn;
  }
}

TEST_F(TagsTest, ListTagsPagesAlikeOnEveryArn) {
  for (const std::string& arn : Arns()) {
    SCOPED_TRACE(arn);
    ASSERT_TRUE(w_.Sm("DeleteTags", {{"ResourceArn", arn},
                                     {"TagKeys", {"env", "owner", "tier", "team"}}})
                    .ok());
    Json all = Json::array();
    for (int i = 0; i < 50; ++i) all.push_back({{"Key", "k" + std::to_string(10 + i)}, {"Value", "v"}});
    ASSERT_TRUE(w_.Sm("AddTags", {{"ResourceArn", arn}, {"Tags", all}}).ok());
    auto page = w_.Sm("ListTags", {{"ResourceArn", arn}, {"MaxResults", 50}});
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ((*page)["Tags"], all);
    EXPECT_FALSE(page->contains("NextToken"));  // one page holds them all
    // A token resumes after the key it names.
    auto rest = w_.Sm("ListTags", {{"ResourceArn", arn}, {"NextToken", "k29"}});
    ASSERT_TRUE(rest.ok()) << rest.status();
    ASSERT_EQ((*rest)["Tags"].size(), 30u);
    EXPECT_EQ((*rest)["Tags"][0]["Key"], "k30");
    // MaxResults below the model's minimum (50) is the validator's.
    EXPECT_EQ(ApiWorld::ErrorOf(w_.Sm("ListTags", {{"ResourceArn", arn}, {"MaxResults", 10}})),
              "ValidationException");
  }
}

TEST_F(TagsTest, TheStoreRefusesTagsOnAnObjectThatIsGone) {
  store::WriteBatch b;
  b.tags.push_back({std::string(kArnPrefix) + "compute-quota/zzzzzzzzzzzz", {{"k", "v"}}, {}});
  EXPECT_TRUE(absl::IsFailedPrecondition(w_.store->commit(b).status()));
  EXPECT_TRUE(w_.store->tags(b.tags[0].resource_arn)->empty());
  store::WriteBatch ok;
  ok.tags.push_back({quota_arn_, {{"k", "v"}}, {}});
  EXPECT_TRUE(w_.store->commit(ok).ok());
}

}  // namespace
}  // namespace hf::api
