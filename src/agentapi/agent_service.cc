#include "hyperfleet/agentapi/agent_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "hyperfleet/agentapi/health_events.h"
#include "hyperfleet/agentapi/kubernetes_node_files.h"
#include "hyperfleet/agentapi/lifecycle_gate.h"
#include "hyperfleet/agentapi/node_records.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;
namespace is = model::instance_status;
namespace ls = model::lifecycle_state;

template <typename Message>
http::HttpResponse Json(int status, const Message& body) {
  http::HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = Encode(body);
  return r;
}

http::HttpResponse Error(int status, absl::string_view message, std::string reason = "") {
  return Json(status, ErrorBody{std::string(message), std::move(reason)});
}

http::HttpResponse Ok() { return Json(200, json::object()); }

/// Decodes `body` as a Message and hands it to `handler`; 400 naming the member when it
/// does not match.
template <typename Message, typename Handler>
http::HttpResponse WithMessage(std::string_view body, Handler&& handler) {
  auto message = Parse<Message>(body);
  if (!message.ok()) return Error(400, message.status().message());
  return handler(*message);
}

/// The controller agent's Slurm view as the planner reads it.
std::vector<model::SlurmNodeState> ToModel(const std::vector<SlurmNode>& nodes) {
  std::vector<model::SlurmNodeState> out;
  out.reserve(nodes.size());
  for (const auto& e : nodes) {
    model::SlurmNodeState& n = out.emplace_back();
    n.name = e.name;
    n.state = e.state;
    n.reason = e.reason;
    n.alloc_cpus = e.alloc_cpus;
    if (e.reason_time > 0) n.reason_time = FromEpochSeconds(e.reason_time);
  }
  return out;
}

/// HTTP status for a Status from the store or bundle source.
int HttpStatusOf(const Status& s) {
  if (absl::IsNotFound(s)) return 404;
  if (absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s)) return 409;
  return 503;
}

/// The value of `name` in an application/x-www-form-urlencoded query, percent-decoded.
std::optional<std::string> QueryValue(std::string_view query, std::string_view name) {
  for (auto& param : ParseQueryLenient(query)) {
    if (param.name == name) return std::move(param.value);
  }
  return std::nullopt;
}

int64_t NowMs(const Clock& clock) {
  return static_cast<int64_t>(ToEpochSeconds(clock.now()) * 1000);
}

}  // namespace

std::string ClusterLogGroup(const model::Cluster& cluster) {
  return absl::StrCat("/aws/sagemaker/Clusters/", cluster.name, "/", cluster.id);
}

std::string LifecycleLogStream(const model::Node& node) {
  return absl::StrCat("LifecycleConfig/", node.group, "/", node.instance_id);
}

AgentService::AgentService(store::Store& store, bundle::BundleSource& bundles,
                           const NodeTokens& tokens, NodeStatusCache& cache, LogSink logs,
                           std::function<void(const std::string&)> on_change,
                           const Clock& clock, IdSource& ids, Options options)
    : store_(store), bundles_(bundles), tokens_(tokens), cache_(cache), logs_(std::move(logs)),
      on_change_(std::move(on_change)), clock_(clock), ids_(ids), options_(options),
      params_(bundles, clock), files_(store, clock) {}

void AgentService::setSlurmJobsHandler(SlurmJobsHandler handler) {
  std::lock_guard lock(mu_);
  slurm_jobs_handler_ = std::move(handler);
}

void AgentService::touch(const std::string& instance_id) {
  const auto gap = cache_.touch(instance_id);
  // A late heartbeat is the first sign of a node in trouble (or of an overloaded host).
  if (gap && *gap > std::chrono::seconds(3 * options_.heartbeat_seconds)) {
    spdlog::warn("node {}: heartbeat after {:.1f} s of silence", instance_id,
                 std::chrono::duration<double>(*gap).count());
  }
}

StatusOr<AgentService::Caller> AgentService::authenticate(const http::HttpRequest& request) {
  auto auth = request.header("Authorization");
  const std::string_view scheme = kAuthorizationScheme;
  if (!auth || auth->substr(0, scheme.size()) != scheme) {
    return absl::PermissionDeniedError("missing Authorization: HyperfleetNode <instance-id>:<token>");
  }
  std::string_view cred = auth->substr(scheme.size());
  auto colon = cred.find(':');
  if (colon == std::string_view::npos) {
    return absl::PermissionDeniedError("malformed node credentials");
  }
  std::string instance_id(cred.substr(0, colon));
  if (!tokens_.verify(instance_id, cred.substr(colon + 1))) {
    return absl::PermissionDeniedError("wrong token for instance " + instance_id);
  }
  std::string cluster_id = cache_.clusterOf(instance_id).value_or("");
  if (cluster_id.empty()) {
    // Only callers with a valid token get here, so this scan cannot be driven by strangers.
    HF_ASSIGN_OR_RETURN(auto clusters, store_.allClusters());
    for (const auto& c : clusters) {
      if (store_.node(c.id, instance_id).ok()) {
        cluster_id = c.id;
        break;
      }
    }
    if (cluster_id.empty()) {
      return absl::PermissionDeniedError("instance " + instance_id + " is not part of a cluster");
    }
    cache_.track(instance_id, cluster_id);
  }
  Caller caller;
  auto cluster = store_.clusterById(cluster_id);
  auto node = cluster.ok() ? store_.node(cluster_id, instance_id) : cluster.status();
  if (!cluster.ok() && absl::IsNotFound(cluster.status())) {
    files_.forget(cluster_id);
    forgetJoins(cluster_id);
  }
  if (!node.ok()) {
    if (absl::IsNotFound(node.status())) {
      cache_.untrack(instance_id);
      forgetJoins(cluster_id, instance_id);
      return absl::PermissionDeniedError("instance " + instance_id + " no longer exists");
    }
    return node.status();
  }
  caller.cluster = std::move(*cluster);
  caller.node = std::move(*node);
  return caller;
}

http::HttpResponse AgentService::handle(http::HttpRequest&& request) {
  try {
    auto caller = authenticate(request);
    if (!caller.ok()) {
      const int code = absl::IsPermissionDenied(caller.status()) ? 403 : 503;
      return Error(code, caller.status().message());
    }
    const std::string path(request.path());
    if (request.method == "GET") {
      if (path == kBundlePath) return listBundle(*caller);
      if (path == kBundleFilePath) return readBundle(*caller, request.query());
      return Error(404, "no such agent resource: GET " + path);
    }
    if (request.method != "POST") return Error(405, "method not allowed");
    const std::string_view body = request.body;
    const Caller& c = *caller;
    if (path == kRegisterPath) {
      return WithMessage<RegisterRequest>(body, [&](const auto& m) { return registerNode(c, m); });
    }
    if (path == kHeartbeatPath) {
      return WithMessage<HeartbeatRequest>(body, [&](const auto& m) { return heartbeat(c, m); });
    }
    if (path == kLogsPath) {
      return WithMessage<LogBatch>(body, [&](const auto& m) { return appendLogs(c, m); });
    }
    if (path == kLifecyclePath) {
      return WithMessage<LifecycleReport>(body, [&](const auto& m) { return lifecycle(c, m); });
    }
    return Error(404, "no such agent resource: POST " + path);
  } catch (const std::exception& e) {
    spdlog::error("agent request {} {}: {}", request.method, request.target, e.what());
    return Error(400, std::string("bad request: ") + e.what());
  }
}

void AgentService::forgetJoins(const std::string& cluster_id, const std::string& instance_id) {
  std::lock_guard lock(mu_);
  if (!instance_id.empty()) {
    joins_.erase({cluster_id, instance_id});
    return;
  }
  std::erase_if(joins_, [&](const auto& kv) { return kv.first.first == cluster_id; });
}

StatusOr<eks::NodeJoin> AgentService::nodeJoin(const Caller& caller,
                                               const std::string& eks_name) {
  const std::pair<std::string, std::string> key{caller.cluster.id, caller.node.instance_id};
  const SteadyTime now = clock_.monotonic();
  {
    std::lock_guard lock(mu_);
    if (auto it = joins_.find(key); it != joins_.end()) {
      if (it->second.join) return *it->second.join;
      // Registrations and heartbeats of a waiting node do not each ask a control plane that
      // is not up.
      if (now - it->second.asked < std::chrono::milliseconds(options_.lifecycle_wait_retry_ms)) {
        return it->second.error;
      }
    }
  }
  // Outside the lock: it may ask the apiserver. Two at once ask twice; nodeJoin is idempotent.
  auto join = options_.control_planes->nodeJoin(
      eks_name, model::KubernetesNodeName(caller.node.instance_id));
  std::lock_guard lock(mu_);
  Join& kept = joins_[key];
  kept.asked = now;
  if (join.ok()) {
    kept.join = *join;
  } else if (!kept.join) {
    kept.error = join.status();
    spdlog::debug("node {}: no join to EKS cluster {} yet: {}", caller.node.instance_id,
                  eks_name, std::string(join.status().message()));
  }
  return join;
}

StatusOr<NodeFilesCache::Result> AgentService::nodeFiles(const Caller& caller,
                                                         std::optional<int64_t> agent_revision,
                                                         std::optional<Status>* join) {
  std::optional<json> params;
  if (caller.node.lifecycle.is_object()) {
    params = params_.get(caller.node.lifecycle.value("SourceS3Uri", ""));
  }
  std::vector<NodeFile> kubernetes;
  const std::string eks_name = caller.cluster.eksClusterName();
  if (!eks_name.empty() && options_.control_planes != nullptr) {
    auto joined = nodeJoin(caller, eks_name);
    if (joined.ok()) kubernetes = KubernetesNodeFiles(caller.cluster, caller.node, *joined,
                                                        options_.registry_port);
    if (join != nullptr) *join = joined.status();
  }
  HF_ASSIGN_OR_RETURN(NodeFilesCache::Result out,
                      files_.get(caller.cluster, caller.node, params, agent_revision, kubernetes));
  if (!out.controller_group.empty()) {
    cache_.setControllerGroup(caller.cluster.id, out.controller_group);
  }
  return out;
}

http::HttpResponse AgentService::registerNode(const Caller& caller, const RegisterRequest&) {
  touch(caller.node.instance_id);
  std::optional<Status> join;
  auto files = nodeFiles(caller, std::nullopt, &join);
  if (!files.ok()) return Error(HttpStatusOf(files.status()), files.status().message());
  if (files->slurm) {
    // The agent writes these files before anything else (its lifecycle scripts included).
    if (Status s = recordApplied(caller, files->slurm->slurm_conf_nodes); !s.ok()) {
      return Error(HttpStatusOf(s), s.message());
    }
  }
  if (!files->roles_error.empty() && caller.node.lifecycle_state.empty()) {
    // The bundle says Slurm but its roles are wrong: the control plane writes no slurm.conf
    // and orders nothing. Say so where the user looks (the node's lifecycle log).
    spdlog::warn("cluster {}: provisioning_parameters.json: {}", caller.cluster.name,
                 files->roles_error);
    log(caller, {{NowMs(clock_),
                  "[SageMaker] provisioning_parameters.json gives no Slurm roles, so no "
                  "slurm.conf is written and no node waits for the controller: " +
                      files->roles_error}});
  }
  RegisterResponse out;
  out.lifecycle =
      LifecyclePlan(caller.cluster, caller.node, files->snapshot->nodes, files->controller_group,
                    options_.lifecycle_timeout_seconds, options_.lifecycle_wait_retry_ms);
  if (join) {
    // An EKS node: held until it can join its cluster's control plane, then its units.
    KubernetesStart start = PlanKubernetesStart(caller.cluster, caller.node,
                                                std::move(out.lifecycle), *join,
                                                options_.lifecycle_wait_retry_ms);
    out.lifecycle = std::move(start.lifecycle);
    out.start_units = std::move(start.start_units);
  }
  if (out.lifecycle.wait) {
    // Registered and held back: not an agent that never starts (see the agent-start timeout).
    if (Status s = markWaiting(caller, out.lifecycle.wait_reason); !s.ok()) {
      return Error(HttpStatusOf(s), s.message());
    }
  }
  // A node held back registers every second: log its first registration only.
  spdlog::log(caller.node.lifecycle_state == ls::kWaiting ? spdlog::level::debug
                                                          : spdlog::level::info,
              "node {} ({} in {}) registered", caller.node.instance_id, caller.node.group,
              caller.cluster.name);
  out.cluster_id = caller.cluster.id;
  out.cluster_name = caller.cluster.name;
  out.group = caller.node.group;
  out.instance_id = caller.node.instance_id;
  out.instance_type = caller.node.instance_type;
  out.heartbeat_seconds = options_.heartbeat_seconds;
  out.files_revision = files->revision;
  out.files = std::move(files->files);
  // The GPUs the instance type has, for the agent's GPU count check (a node with fewer is
  // rebooted, as HyperPod does).
  if (const auto* spec = model::InstanceCatalog::Embedded().find(caller.node.instance_type);
      spec != nullptr && spec->accelerator_kind == model::AcceleratorKind::kNvidiaGpu) {
    out.expected_gpus = static_cast<unsigned>(spec->accelerator_count);
  }
  return Json(200, out);
}

StatusOr<bool> AgentService::updateNode(
    const Caller& caller,
    const std::function<bool(model::Node&, std::vector<model::EventText>&)>& change) {
  return UpdateNodeRecord(store_, clock_, ids_, caller.cluster.id, caller.node.instance_id,
                          change);
}

Status AgentService::markWaiting(const Caller& caller, const std::string& reason) {
  auto wrote = updateNode(caller, [](model::Node& n, std::vector<model::EventText>&) {
    if (!n.lifecycle_state.empty()) return false;
    n.lifecycle_state = ls::kWaiting;
    return true;
  });
  if (!wrote.ok()) return wrote.status();
  if (*wrote) {
    log(caller, {{NowMs(clock_), "[SageMaker] Waiting to run the lifecycle scripts: " + reason}});
  }
  return absl::OkStatus();
}

Status AgentService::recordApplied(const Caller& caller, const std::vector<std::string>& names) {
  if (caller.node.slurm_conf_nodes == names) return absl::OkStatus();  // the common case
  auto wrote = updateNode(caller, [&](model::Node& n, std::vector<model::EventText>&) {
    if (n.slurm_conf_nodes == names) return false;
    n.slurm_conf_nodes = names;
    return true;
  });
  return wrote.status();
}

http::HttpResponse AgentService::heartbeat(const Caller& caller, const HeartbeatRequest& body) {
  touch(caller.node.instance_id);
  if (body.health) recordHealth(caller, ToModelHealth(*body.health));
  auto files = nodeFiles(caller, body.files_revision);
  if (!files.ok()) return Error(HttpStatusOf(files.status()), files.status().message());
  const bool controller =
      !files->controller_group.empty() && files->controller_group == caller.node.group;
  if (controller && body.slurm_nodes) {
    cache_.setSlurmView(caller.cluster.id, ToModel(*body.slurm_nodes));
  }
  HeartbeatResponse out;
  out.files_revision = files->revision;
  // The agent compares its clock with ours (health check "clock").
  out.time = ToEpochSeconds(clock_.now());
  if (controller) {
    for (const auto& m : cache_.slurmMarks(caller.cluster.id)) {
      out.slurm_marks.push_back({m.node, m.action, m.reason});
    }
    governance(caller, body, out);
  }
  if (body.files_revision != out.files_revision) {
    out.files = std::move(files->files);
  } else if (files->slurm) {
    // The agent reports a revision once it has written its files and reloaded Slurm.
    if (Status s = recordApplied(caller, files->slurm->slurm_conf_nodes); !s.ok()) {
      return Error(HttpStatusOf(s), s.message());
    }
  }
  return Json(200, out);
}

void AgentService::governance(const Caller& caller, const HeartbeatRequest& body,
                              HeartbeatResponse& out) {
  // Task governance: the controller's job report in, job actions and governed accounts out.
  SlurmJobsHandler jobs;
  {
    std::lock_guard lock(mu_);
    jobs = slurm_jobs_handler_;
  }
  if (!jobs) return;
  if (auto answer = jobs(caller.cluster.id, body.slurm_jobs ? &*body.slurm_jobs : nullptr)) {
    out.governance = std::move(answer->governance);
    out.slurm_job_actions = std::move(answer->slurm_job_actions);
  }
}

void AgentService::recordHealth(const Caller& caller, const model::HealthReport& health) {
  const auto before = cache_.recordHealth(caller.node.instance_id, health);
  if (!before) return;  // forgotten meanwhile
  store::WriteBatch batch;
  std::string verdict_change;
  for (auto& e : HealthEvents(caller.node, *before, health)) {
    if (e.level != "Warn") verdict_change = e.description;
    batch.events.push_back(
        model::MakeEvent(ids_.eventId(), caller.cluster.id, clock_.now(), std::move(e)));
  }
  if (batch.events.empty()) return;
  if (auto s = store_.commit(batch); !s.ok()) {
    spdlog::warn("health event for {}: {}", caller.node.instance_id,
                 std::string(s.status().message()));
  }
  if (!verdict_change.empty()) {
    const bool fault = health.verdict == model::HealthSeverity::kSoftFault ||
                       health.verdict == model::HealthSeverity::kHardFault;
    spdlog::log(fault ? spdlog::level::warn : spdlog::level::info, "{}", verdict_change);
  }
}

http::HttpResponse AgentService::listBundle(const Caller& caller) {
  auto loc = bundle::ParseS3Uri(caller.node.lifecycle.is_object()
                                    ? caller.node.lifecycle.value("SourceS3Uri", "")
                                    : std::string());
  if (!loc.ok()) return Error(409, loc.status().message());
  auto objects = bundles_.list(*loc);
  if (!objects.ok()) {
    // The agent reports `reason` as the lifecycle failure's kind.
    const Status& s = objects.status();
    const char* reason = absl::IsNotFound(s)             ? "empty"
                         : absl::IsFailedPrecondition(s) ? "unsafe-key"
                                                         : "download";
    return Error(HttpStatusOf(s), s.message(), reason);
  }
  BundleListing listing;
  for (const auto& o : *objects) listing.files.push_back({o.key, static_cast<uint64_t>(o.size)});
  return Json(200, listing);
}

http::HttpResponse AgentService::readBundle(const Caller& caller, std::string_view query) {
  auto key = QueryValue(query, "key");
  if (!key || key->empty()) return Error(400, "missing query parameter key");
  auto loc = bundle::ParseS3Uri(caller.node.lifecycle.is_object()
                                    ? caller.node.lifecycle.value("SourceS3Uri", "")
                                    : std::string());
  if (!loc.ok()) return Error(409, loc.status().message());
  auto data = bundles_.read(*loc, *key);
  if (!data.ok()) return Error(HttpStatusOf(data.status()), data.status().message());
  http::HttpResponse r;
  r.headers.emplace_back("Content-Type", "application/octet-stream");
  r.body = std::move(*data);
  return r;
}

void AgentService::log(const Caller& caller, std::vector<LogLine> lines) {
  if (!logs_ || lines.empty()) return;
  logs_(ClusterLogGroup(caller.cluster), LifecycleLogStream(caller.node), lines);
}

http::HttpResponse AgentService::appendLogs(const Caller& caller, const LogBatch& body) {
  std::vector<LogLine> lines;
  lines.reserve(body.events.size());
  const int64_t now_ms = NowMs(clock_);
  for (const auto& e : body.events) lines.push_back({e.timestamp_ms.value_or(now_ms), e.message});
  log(caller, std::move(lines));
  return Ok();
}

http::HttpResponse AgentService::lifecycle(const Caller& caller, const LifecycleReport& body) {
  const std::string& state = body.state;
  if (state != kStarted && state != kSucceeded && state != kFailed) {
    return Error(400, "state must be Started, Succeeded or Failed");
  }
  const std::string& reason = body.reason;
  const std::string& detail = body.message;
  // Record the result on the node, with its event. A retried report and a report after a
  // result change nothing: results are final.
  auto wrote = RecordLifecycleResult(store_, clock_, ids_, caller.cluster,
                                     caller.node.instance_id, state, reason, detail);
  if (!wrote.ok()) return Error(HttpStatusOf(wrote.status()), wrote.status().message());
  if (!*wrote) return Ok();
  // The platform's markers in the node's log stream, written once per transition.
  const int64_t now_ms = NowMs(clock_);
  if (state == kStarted) {
    log(caller, {{now_ms, "[SageMaker] Downloading lifecycle scripts"}});
  } else if (state == kSucceeded) {
    log(caller, {{now_ms, "[SageMaker] The lifecycle scripts succeeded."}});
  } else {
    log(caller, {{now_ms, "[SageMaker] " + (detail.empty() ? reason : detail)},
                 {now_ms, "[SageMaker] The lifecycle scripts failed."}});
  }
  spdlog::info("node {}: lifecycle scripts {}{}", caller.node.instance_id, state,
               detail.empty() ? "" : " (" + detail + ")");
  if (on_change_) on_change_(caller.cluster.id);
  return Ok();
}

}  // namespace hf::agentapi
