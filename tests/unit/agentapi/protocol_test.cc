// The agent protocol's messages (agentapi/protocol.h): what the version 0 agent sent still
// decodes, encoding keeps every member, and the decoding rules (strict where a mistake must
// be refused, lenient where a report must not cost a heartbeat, entry by entry for commands).
#include "hyperfleet/agentapi/protocol.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "unit/agentapi/protocol_fixtures.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
using fixtures::V0Messages;

// Decodes v0 message `name` as T and encodes it again.
template <typename T>
json RoundTrip(const std::string& name, T* decoded = nullptr) {
  auto m = Decode<T>(V0Messages().at(name));
  EXPECT_TRUE(m.ok()) << name << ": " << m.status();
  if (!m.ok()) return json();
  EXPECT_EQ(m->version, 0) << name << " carries no version: it predates the typed protocol";
  if (decoded != nullptr) *decoded = *m;
  return json(*m);
}

TEST(ProtocolTest, VersionZeroMessagesDecodeAndEncodeWithEveryMember) {
  const json& v0 = V0Messages();
  const std::vector<std::pair<std::string, json>> encoded = {
      {"register", RoundTrip<RegisterRequest>("register")},
      {"lifecycle_started", RoundTrip<LifecycleReport>("lifecycle_started")},
      {"lifecycle_succeeded", RoundTrip<LifecycleReport>("lifecycle_succeeded")},
      {"lifecycle_failed", RoundTrip<LifecycleReport>("lifecycle_failed")},
      {"logs", RoundTrip<LogBatch>("logs")},
      {"heartbeat", RoundTrip<HeartbeatRequest>("heartbeat")},
      {"heartbeat_slurm_controller", RoundTrip<HeartbeatRequest>("heartbeat_slurm_controller")},
  };
  for (const auto& [name, j] : encoded) {
    // Every member the old message had, with the same value, and the version it came with.
    json expected = v0.at(name);
    expected["version"] = 0;
    EXPECT_EQ(j, expected) << name;
  }
}

TEST(ProtocolTest, VersionZeroHeartbeatReadsAsTypes) {
  HeartbeatRequest hb;
  RoundTrip<HeartbeatRequest>("heartbeat_slurm_controller", &hb);
  EXPECT_EQ(hb.files_revision, 5);
  ASSERT_TRUE(hb.health.has_value());
  EXPECT_EQ(hb.health->verdict, "warning");
  EXPECT_GT(hb.health->checked_at, 1.7e9);
  ASSERT_FALSE(hb.health->findings.empty());
  EXPECT_EQ(hb.health->findings[0].check, "disk:/");
  ASSERT_TRUE(hb.slurm_nodes.has_value());
  ASSERT_EQ(hb.slurm_nodes->size(), 2u);
  EXPECT_EQ((*hb.slurm_nodes)[1].state, "down*");
  EXPECT_EQ((*hb.slurm_nodes)[1].reason, "Hyperfleet: a|b");
  ASSERT_TRUE(hb.slurm_jobs.has_value());
  ASSERT_EQ(hb.slurm_jobs->jobs.size(), 2u);
  EXPECT_EQ(hb.slurm_jobs->jobs[0].id, 12u);
  EXPECT_EQ(hb.slurm_jobs->jobs[0].mark, "hyperfleet-governed");
  EXPECT_EQ(hb.slurm_jobs->jobs[0].nodes, 2);
  EXPECT_EQ(hb.slurm_jobs->jobs[1].mark, "");
  EXPECT_EQ(hb.slurm_jobs->partitions.at("dev"),
            (std::vector<std::string>{"ip-10-1-0-3", "ip-10-1-0-4"}));
  LifecycleReport failed;
  RoundTrip<LifecycleReport>("lifecycle_failed", &failed);
  EXPECT_EQ(failed.state, kFailed);
  EXPECT_EQ(failed.reason, "exit");
  EXPECT_EQ(failed.exit_code, 3);
}

TEST(ProtocolTest, MessagesOfThisVersionRoundTrip) {
  RegisterResponse r;
  r.cluster_id = "abcdefabcdef";
  r.instance_id = "i-1";
  r.heartbeat_seconds = 2;
  r.expected_gpus = 4;
  r.files_revision = 42;
  r.files = {{"/opt/ml/config/a.json", 0600, "{}\n"}, {"/opt/slurm/etc/slurm.conf", 0644, "x"}};
  r.lifecycle.run = true;
  r.lifecycle.source_s3_uri = "s3://b/p/";
  r.lifecycle.on_create = "on_create.sh";
  r.lifecycle.directory = "/tmp/b/p/";
  r.start_units = {"containerd.service", "kubelet.service"};
  auto back = Parse<RegisterResponse>(Encode(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->version, kProtocolVersion);

  HeartbeatResponse h;
  h.files_revision = 7;
  h.time = 1767225600.5;
  h.slurm_marks = {{"ip-a", "down", "Hyperfleet: x"}};
  h.governance = Governance{{"team-a"}, {{"high-priority", 100}}};
  h.slurm_job_actions = {{12, "release"}};
  auto hb = Parse<HeartbeatResponse>(Encode(h));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(*hb, h);
}

// The wire shapes of docs/nodes.md: members that are only there when set.
TEST(ProtocolTest, OptionalMembersAreLeftOutWhenUnset) {
  LifecycleSpec wait;
  wait.wait = true;
  wait.wait_reason = "controller first";
  EXPECT_EQ(json(wait), json::parse(R"({"run": false, "wait": true,
                                        "wait_reason": "controller first", "retry_ms": 1000})"));
  EXPECT_EQ(json(LifecycleSpec{}), json::parse(R"({"run": false})"));
  LifecycleReport started;
  started.state = kStarted;
  started.script = "on_create.sh";
  EXPECT_EQ(json(started),
            json::parse(R"({"version": 1, "state": "Started", "script": "on_create.sh"})"));
  HeartbeatResponse empty;
  EXPECT_EQ(json(empty), json::parse(R"({"version": 1})"));
  RegisterResponse cpu;
  EXPECT_FALSE(json(cpu).contains("expected_gpus"));
  // No units to start: no "start_units", as before the member existed; absent reads as none.
  EXPECT_FALSE(json(cpu).contains("start_units"));
  auto old = Parse<RegisterResponse>(R"({"cluster_id": "c-1", "lifecycle": {"run": false}})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->start_units.empty());
}

TEST(ProtocolTest, ReportsThatMustNotCostAHeartbeatAreLenient) {
  // A bad health report, a revision that is no integer, a jobs report without jobs: the
  // heartbeat itself still counts.
  auto hb = Parse<HeartbeatRequest>(
      R"({"files_revision": "7", "health": "bad", "slurm_jobs": {"partitions": {}}})");
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_FALSE(hb->files_revision.has_value());
  EXPECT_FALSE(hb->health.has_value());
  EXPECT_FALSE(hb->slurm_jobs.has_value());
  // Jobs the governance cannot read are left out one by one, as members of other types.
  hb = Parse<HeartbeatRequest>(R"({"slurm_jobs": {"jobs": [{"id": -1}, {"account": "a"}, 7,
      {"id": 3, "account": 5, "nodes": 2.0, "state": "RUNNING"}],
      "partitions": {"dev": ["a", 1], "bad": "x"}}})");
  ASSERT_TRUE(hb.ok()) << hb.status();
  ASSERT_EQ(hb->slurm_jobs->jobs.size(), 1u);
  EXPECT_EQ(hb->slurm_jobs->jobs[0].id, 3u);
  EXPECT_EQ(hb->slurm_jobs->jobs[0].account, "");
  EXPECT_EQ(hb->slurm_jobs->jobs[0].nodes, 2);
  EXPECT_EQ(hb->slurm_jobs->partitions,
            (std::map<std::string, std::vector<std::string>>{{"dev", {"a"}}}));
}

TEST(ProtocolTest, MalformedMessagesAreRefusedNamingTheMember) {
  auto nodes = Parse<HeartbeatRequest>(R"({"slurm_nodes": [{"name": "a", "state": "idle"},
                                                           {"name": "b", "state": 3}]})");
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nodes.status().message(), "slurm_nodes[1]: state must be a string");
  EXPECT_EQ(Parse<HeartbeatRequest>(R"({"slurm_nodes": {}})").status().message(),
            "slurm_nodes must be an array");
  EXPECT_EQ(Parse<LogBatch>(R"({"events": "x"})").status().message(), "events must be an array");
  EXPECT_EQ(Parse<LogBatch>(R"({"events": [{"timestamp": 1}]})").status().message(),
            "each event needs a string message");
  EXPECT_EQ(Parse<LifecycleReport>(R"({"state": "Failed", "reason": 3})").status().message(),
            "reason must be a string");
  EXPECT_EQ(Parse<RegisterResponse>(R"({"files": [{"mode": 420}]})").status().message(),
            "files[0]: a file has no path");
  EXPECT_EQ(Parse<RegisterResponse>(R"({"heartbeat_seconds": "1"})").status().message(),
            "heartbeat_seconds must be an integer");
  EXPECT_EQ(Parse<RegisterResponse>(R"({"start_units": "kubelet.service"})").status().message(),
            "start_units must be an array");
  EXPECT_EQ(Parse<HeartbeatRequest>("{not json").status().message(), "the body is not JSON");
  EXPECT_EQ(Parse<HeartbeatRequest>("[]").status().message(),
            "the heartbeat must be a JSON object");
  // An empty body is an empty message.
  EXPECT_TRUE(Parse<RegisterRequest>("").ok());
}

TEST(ProtocolTest, CommandsThatDoNotMatchAreSkippedOneByOne) {
  auto r = Parse<HeartbeatResponse>(R"({
      "slurm_marks": [{"node": "ip-a", "action": "down", "reason": "r"}, {"node": 1}, 5],
      "slurm_job_actions": [{"job": 12, "action": 5}, {"job": "13", "action": "release"},
                            {"job": 14, "action": "release"}, [1]],
      "governance": {"accounts": [3, "team-a"],
                     "qos": [{"name": 5}, {"name": "a", "priority": "high"},
                             {"name": "b", "priority": 1e30}, {"name": "c", "priority": 20}]},
      "time": "noon"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->slurm_marks, (std::vector<SlurmMark>{{"ip-a", "down", "r"}}));
  EXPECT_EQ(r->slurm_job_actions, (std::vector<SlurmJobAction>{{14, "release"}}));
  ASSERT_TRUE(r->governance.has_value());
  EXPECT_EQ(r->governance->accounts, (std::vector<std::string>{"team-a"}));
  EXPECT_EQ(r->governance->qos, (std::vector<GovernanceQos>{{"c", 20}}));
  EXPECT_FALSE(r->time.has_value());
  // Files are not commands to skip: a malformed file refuses the response.
  EXPECT_FALSE(Parse<HeartbeatResponse>(R"({"files": [{"path": 1}]})").ok());
}

// The exact text of each message with every member set, as the hand-written codecs before
// the member lists wrote it (keys, members left out when unset, nesting): a misspelt or
// dropped key in protocol.cc's Members fails here.
TEST(ProtocolTest, EveryMessageEncodesToItsWireText) {
  RegisterResponse r;
  r.cluster_id = "c-1";
  r.cluster_name = "ml";
  r.group = "workers";
  r.instance_id = "i-1";
  r.instance_type = "ml.g5.8xlarge";
  r.heartbeat_seconds = 5;
  r.expected_gpus = 1;
  r.files_revision = 7;
  r.files = {{"/etc/a", 0640, "x"}};
  r.lifecycle.run = true;
  r.lifecycle.source_s3_uri = "s3://b/p/";
  r.lifecycle.on_create = "c.sh";
  r.lifecycle.directory = "/tmp/b/p/";
  r.lifecycle.timeout_seconds = 60;
  r.start_units = {"kubelet.service"};
  EXPECT_EQ(Encode(r),
            R"({"cluster_id":"c-1","cluster_name":"ml","expected_gpus":1,"files":[{"content":"x",)"
            R"("mode":416,"path":"/etc/a"}],"files_revision":7,"group":"workers",)"
            R"("heartbeat_seconds":5,"instance_id":"i-1","instance_type":"ml.g5.8xlarge",)"
            R"("lifecycle":{"directory":"/tmp/b/p/","on_create":"c.sh","on_init_complete":"",)"
            R"("run":true,"source_s3_uri":"s3://b/p/","timeout_seconds":60},)"
            R"("start_units":["kubelet.service"],"version":1})");
  HeartbeatResponse h;
  h.files_revision = 7;
  h.time = 12.5;
  h.files = std::vector<NodeFile>{};
  h.slurm_marks = {{"ip-a", "down", "why"}};
  h.governance = Governance{{"team-a"}, {{"inference-priority", 3}}};
  h.slurm_job_actions = {{12, "release"}};
  EXPECT_EQ(Encode(h),
            R"({"files":[],"files_revision":7,"governance":{"accounts":["team-a"],"qos":)"
            R"([{"name":"inference-priority","priority":3}]},"slurm_job_actions":[{"action":)"
            R"("release","job":12}],"slurm_marks":[{"action":"down","node":"ip-a","reason":)"
            R"("why"}],"time":12.5,"version":1})");
  HeartbeatRequest q;
  q.files_revision = 7;
  q.health = HealthReport{"ok", "none", 1.5, 2, {{"disk", "ok", "none", "fine"}}};
  q.slurm_nodes = std::vector<SlurmNode>{{"ip-a", "idle", 2, "", 0}};
  q.slurm_jobs = SlurmJobsReport{
      {{3, "team-a", "", "dev", 2, "PENDING", 10, "None", "hyperfleet-held"}},
      {{"dev", {"ip-a"}}}};
  EXPECT_EQ(Encode(q),
            R"({"files_revision":7,"health":{"action":"none","checked_at":1.5,"duration_ms":2,)"
            R"("findings":[{"action":"none","check":"disk","message":"fine","severity":"ok"}],)"
            R"("verdict":"ok"},"slurm_jobs":{"jobs":[{"account":"team-a","id":3,"mark":)"
            R"("hyperfleet-held","nodes":2,"partition":"dev","qos":"","reason":"None","state":)"
            R"("PENDING","submit_time":10.0}],"partitions":{"dev":["ip-a"]}},"slurm_nodes":)"
            R"([{"alloc_cpus":2,"name":"ip-a","reason":"","reason_time":0.0,"state":"idle"}],)"
            R"("version":1})");
  EXPECT_EQ(Encode(LifecycleReport{1, "Failed", "c.sh", "exit", 3, "m"}),
            R"({"exit_code":3,"message":"m","reason":"exit","script":"c.sh","state":"Failed",)"
            R"("version":1})");
  EXPECT_EQ(Encode(LogBatch{1, "LifecycleConfig", {{5, "a"}, {std::nullopt, "b"}}}),
            R"({"events":[{"message":"a","timestamp":5},{"message":"b"}],)"
            R"("stream":"LifecycleConfig","version":1})");
  EXPECT_EQ(Encode(BundleListing{1, {{"c.sh", 4}}}),
            R"({"files":[{"key":"c.sh","size":4}],"version":1})");
  EXPECT_EQ(Encode(ErrorBody{"no", "empty"}), R"({"error":"no","reason":"empty"})");
  EXPECT_EQ(Encode(RegisterRequest{1, "boot"}), R"({"boot_id":"boot","version":1})");
  // Unset members are left out.
  EXPECT_EQ(Encode(HeartbeatResponse{}), R"({"version":1})");
  EXPECT_EQ(Encode(ErrorBody{"no", ""}), R"({"error":"no"})");
  EXPECT_EQ(Encode(LifecycleReport{1, "Started", "c.sh", "", std::nullopt, ""}),
            R"({"script":"c.sh","state":"Started","version":1})");
}

TEST(ProtocolTest, FileModesAreNumbersOrOctalStrings) {
  auto f = Parse<NodeFile>(R"({"path": "/a", "mode": "0640", "content": "x"})");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->mode, 0640u);
  EXPECT_EQ(Parse<NodeFile>(R"({"path": "/a", "mode": 420})")->mode, 0644u);
  EXPECT_EQ(Parse<NodeFile>(R"({"path": "/a"})")->mode, 0600u);
  EXPECT_EQ(Parse<NodeFile>(R"({"path": "/a", "mode": "rw"})").status().message(),
            "bad mode for /a");
}

TEST(ProtocolTest, BytesThatAreNotUtf8AreReplacedNotThrown) {
  LogBatch batch;
  batch.events.push_back({1, std::string("bad \xff byte")});
  std::string text;
  ASSERT_NO_THROW(text = Encode(batch));
  auto back = Parse<LogBatch>(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->events[0].message, "bad \xEF\xBF\xBD byte");
}

}  // namespace
}  // namespace hf::agentapi
