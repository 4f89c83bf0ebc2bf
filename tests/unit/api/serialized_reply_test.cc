// A reply a service serializes itself (JsonService::callSerialized: ListClusterNodes) is byte
// for byte what the handler's generic path writes for the same request: call()'s tree, pruned
// to the model's output shape, dumped. Nodes carry every kind of text a summary can hold
// (quotes, backslashes, control characters, UTF-8, invalid UTF-8, empty), each status, times
// with and without fractions, and pages walk every sort order and filter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api_world.h"
#include "hyperfleet/auth/sigv4.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
using testing::ApiWorld;

class SerializedReplyTest : public ::testing::Test {
 protected:
  /// Writes nodes with awkward texts into cluster "text" (two groups, 23 nodes).
  void WriteNodes() {
    ASSERT_TRUE(w_.Sm("CreateCluster", ApiWorld::ClusterSpec("text", 1)).ok());
    auto c = w_.store->cluster("text").value();
    const std::vector<std::string> texts = {
        "",        "plain",         "quote \" and \\ backslash", "tab\tnew\nline\r\x01\x1f",
        "del \x7f", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80", "bad \xff\xfe utf8",
        "cut \xe2\x9c", "lone \x80 continuation", "</script>/\\u0041"};
    const std::vector<model::InstanceStatus> statuses = {
        model::InstanceStatus::kRunning, model::InstanceStatus::kPending,
        model::InstanceStatus::kFailure, model::InstanceStatus::kShuttingDown};
    store::WriteBatch b;
    for (int k = 0; k < 23; ++k) {
      model::Node n;
      n.cluster_id = c.id;
      n.instance_id = absl::StrCat("i-0", 1000000000000000 + k);
      n.logical_id = absl::StrCat(k % 2 ? "workers-" : "gpu-", 100 + k);
      n.group = k % 2 ? "workers" : "gpu \"group\"";
      n.instance_type = "ml.c5.xlarge";
      n.status = statuses[k % statuses.size()];
      n.message = texts[k % texts.size()];
      n.hostname = k % 3 ? texts[(k + 3) % texts.size()] : "";
      // Whole seconds, microseconds, and three nodes at the same time (ties).
      const int64_t us = 1'764'650'000'000'000 + (k / 3) * 1'000'123 + (k % 2 ? 0 : 7);
      n.launch_time = SystemTime(std::chrono::microseconds(us));
      b.nodes.push_back({n, store::kMustNotExist, false});
    }
    ASSERT_TRUE(w_.store->commit(b).ok());
  }

  /// Compares both paths for one request; returns its NextToken ("" on the last page).
  std::string ExpectSame(Json in) {
    const Json pruned = w_.model->pruneInput("ListClusterNodes", std::move(in));
    auto tree = w_.clusters.call("ListClusterNodes", pruned);
    auto text = w_.clusters.callSerialized("ListClusterNodes", pruned);
    EXPECT_TRUE(text.has_value());
    if (!text) return "";
    EXPECT_EQ(tree.ok(), text->ok()) << pruned.dump();
    if (!tree.ok() || !text->ok()) {
      EXPECT_EQ(tree.status(), text->status());
      return "";
    }
    const Json want = w_.model->pruneOutput("ListClusterNodes", *tree);
    EXPECT_EQ(**text, want.dump(-1, ' ', false, Json::error_handler_t::replace)) << pruned.dump();
    return want.value("NextToken", "");
  }

  /// Walks every page of `in` with page size `size`; returns the number of pages.
  int Walk(Json in, int size) {
    in["ClusterName"] = "text";
    in["MaxResults"] = size;
    int pages = 0;
    for (std::string token;; ++pages) {
      if (!token.empty()) in["NextToken"] = token;
      token = ExpectSame(in);
      if (token.empty() || pages > 100) return pages + 1;
    }
  }

  ApiWorld w_;
};

TEST_F(SerializedReplyTest, ListClusterNodesPagesMatchThePrunedTree) {
  ASSERT_NO_FATAL_FAILURE(WriteNodes());
  EXPECT_EQ(Walk(Json::object(), 100), 1);
  EXPECT_EQ(Walk(Json::object(), 1), 23);
  EXPECT_EQ(Walk(Json::object(), 7), 4);
  for (const char* order : {"Ascending", "Descending"}) {
    for (const char* by : {"CREATION_TIME", "NAME"}) {
      Walk({{"SortOrder", order}, {"SortBy", by}}, 5);
    }
  }
  Walk({{"InstanceGroupNameContains", "gpu"}}, 4);
  Walk({{"InstanceGroupNameContains", "nothing"}}, 4);
  Walk({{"CreationTimeAfter", 1'764'650'003.5}, {"CreationTimeBefore", 1'764'650'006}}, 2);
}

TEST_F(SerializedReplyTest, ErrorsAreThoseOfTheTreePath) {
  ASSERT_NO_FATAL_FAILURE(WriteNodes());
  ExpectSame({{"ClusterName", "nosuchcluster"}});
  ExpectSame({{"ClusterName", "text"}, {"NextToken", "not-a-token"}});
}

TEST_F(SerializedReplyTest, TheHandlerSendsTheSerializedReply) {
  ASSERT_NO_FATAL_FAILURE(WriteNodes());
  constexpr char kKeyId[] = "AKIDSERIALIZEDTEST";
  constexpr char kSecret[] = "serialized-test-secret";
  ApiHandler handler{[&](std::string_view key) -> std::optional<std::string> {
                       if (key == kKeyId) return std::string(kSecret);
                       return std::nullopt;
                     },
                     w_.clock, w_.ids, ApiConfig{}};
  handler.addService(w_.clusters);
  const Json in = {{"ClusterName", "text"}, {"MaxResults", 10}};
  http::HttpRequest req;
  req.method = "POST";
  req.target = "/";
  req.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                 {"X-Amz-Target", "SageMaker.ListClusterNodes"}};
  req.body = in.dump();
  auth::SignSigV4(req, {kKeyId, kSecret}, "us-west-2", "sagemaker", "localhost", w_.clock.now());
  const http::HttpResponse res = handler.handle(std::move(req));
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(res.body, *w_.clusters.callSerialized("ListClusterNodes", in).value());
  EXPECT_EQ(Json::parse(res.body)["ClusterNodeSummaries"].size(), 10u);
  // dispatch() (the unit tests' and the fuzzer's entry) parses it back.
  EXPECT_EQ(w_.Sm("ListClusterNodes", in).value(), Json::parse(res.body));
  // No other operation is serialized.
  EXPECT_FALSE(w_.clusters.callSerialized("ListClusters", Json::object()).has_value());
}

}  // namespace
}  // namespace hf::api
