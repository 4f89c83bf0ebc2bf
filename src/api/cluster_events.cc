// ListClusterEvents and DescribeClusterEvent.
#include "absl/strings/str_cat.h"
#include "cluster_request.h"
#include "hyperfleet/api/cluster_operations.h"
#include "request_time.h"

namespace hf::api {

using Json = nlohmann::json;
using cluster_request::ReadPage;
using cluster_request::Str;
using cluster_request::WithNextToken;

nlohmann::json ClusterOperations::eventSummary(const model::Cluster& c, const model::Event& e,
                                               bool details) const {
  Json s = {{"EventId", e.id},
            {"ClusterArn", c.arn},
            {"ClusterName", c.name},
            {"ResourceType", e.resource_type},
            {"EventTime", ToEpochSeconds(e.time)},
            {"EventLevel", e.level},
            {"Description", e.description}};
  if (!e.group.empty()) s["InstanceGroupName"] = e.group;
  if (!e.instance_id.empty()) s["InstanceId"] = e.instance_id;
  if (details && e.metadata.is_object()) s["EventDetails"] = {{"EventMetadata", e.metadata}};
  return s;
}

StatusOr<nlohmann::json> ClusterOperations::listClusterEvents(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  store::EventQuery q;
  q.after = RequestTimestamp(in, "EventTimeAfter");
  q.before = RequestTimestamp(in, "EventTimeBefore");
  q.group = Str(in, "InstanceGroupName");
  q.instance_id = Str(in, "NodeId");
  q.resource_type = Str(in, "ResourceType");
  ReadPage(in, q);
  HF_ASSIGN_OR_RETURN(auto page, store_.listEvents(c.id, q));
  Json events = Json::array();
  for (const auto& e : page.items) events.push_back(eventSummary(c, e, false));
  return WithNextToken({{"Events", std::move(events)}}, page.next_token);
}

StatusOr<nlohmann::json> ClusterOperations::describeClusterEvent(const Json& in) {
  HF_ASSIGN_OR_RETURN(auto c, store_.cluster(Str(in, "ClusterName")));
  HF_ASSIGN_OR_RETURN(auto e, store_.event(c.id, Str(in, "EventId")));
  return Json{{"EventDetails", eventSummary(c, e, true)}};
}

}  // namespace hf::api
