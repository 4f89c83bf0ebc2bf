#include "cluster_setup.h"

#include <thread>

namespace api_bench {
namespace {

int SumCounts(const Json& describe, const char* member) {
  int n = 0;
  for (const auto& g : describe.value("InstanceGroups", Json::array())) n += g.value(member, 0);
  return n;
}

// CreateCluster with o.nodes nodes in groups of at most kMaxGroupSize.
bool CreateCluster(SyncClient& client, const Options& o, const std::string& name,
                   Steady::time_point t0) {
  Json groups = Json::array();
  const int count = (o.nodes + kMaxGroupSize - 1) / kMaxGroupSize;
  for (int g = 0; g < count; ++g) {
    const int size = o.nodes / count + (g < o.nodes % count ? 1 : 0);
    groups.push_back({{"InstanceGroupName", "group-" + std::to_string(g + 1)},
                      {"InstanceType", "ml.c5.xlarge"},
                      {"InstanceCount", size},
                      {"LifeCycleConfig",
                       {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "on_create.sh"}}},
                      {"ExecutionRole", "arn:aws:iam::123456789012:role/R"}});
  }
  Json body = {{"ClusterName", name}, {"InstanceGroups", groups}};
  auto created = client.call("CreateCluster", body.dump());
  if (created.status != 200) {
    Log("api_bench: CreateCluster failed: %d %s %s", created.status, created.error.c_str(),
        created.body.c_str());
    return false;
  }
  Log("api_bench: CreateCluster %s (%d nodes in %d groups) accepted in %.3f s", name.c_str(),
      o.nodes, count, SecondsSince(t0));
  return true;
}

}  // namespace

ClusterInfo SetUpCluster(const Options& o, const Target& target) {
  ClusterInfo info;
  info.name = o.cluster_name;
  SyncClient client(target);
  auto existing = client.call("DescribeCluster", DescribeBody(info.name));
  const auto t0 = Steady::now();
  if (existing.status == 200) {
    Log("api_bench: cluster %s exists; reusing it", info.name.c_str());
  } else if (!CreateCluster(client, o, info.name, t0)) {
    return info;
  }
  const auto deadline = t0 + std::chrono::seconds(o.create_timeout_s);
  auto last_report = Steady::now();
  for (;;) {
    auto d = client.call("DescribeCluster", DescribeBody(info.name));
    if (d.status == 200) {
      Json j = Json::parse(d.body, nullptr, false);
      const std::string status = j.is_object() ? j.value("ClusterStatus", "") : "";
      if (status == "InService") {
        info.nodes = SumCounts(j, "TargetCount");
        info.describe_body = d.body;
        if (existing.status != 200) info.create_seconds = SecondsSince(t0);
        break;
      }
      if (status == "Failed" || status == "Deleting") {
        Log("api_bench: cluster is %s: %s", status.c_str(), d.body.c_str());
        return info;
      }
      if (SecondsSince(last_report) >= 5) {
        last_report = Steady::now();
        Log("api_bench:   %s after %.0f s: %d/%d nodes running", status.c_str(),
            SecondsSince(t0), SumCounts(j, "CurrentCount"), SumCounts(j, "TargetCount"));
      }
    } else {
      Log("api_bench: DescribeCluster while waiting: %d %s %s", d.status, d.error.c_str(),
          d.body.substr(0, 300).c_str());
      if (d.status != 0 && d.status < 500) return info;
    }
    if (Steady::now() >= deadline) {
      Log("api_bench: cluster not InService after %d s (--create-timeout)", o.create_timeout_s);
      return info;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto page = client.call("ListClusterNodes", ListNodesBody(info.name, ""));
  if (page.status != 200) {
    Log("api_bench: ListClusterNodes failed: %d %s", page.status, page.body.c_str());
    return info;
  }
  info.page_body = page.body;
  info.ok = true;
  return info;
}

}  // namespace api_bench
