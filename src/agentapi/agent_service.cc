#include "hyperfleet/agentapi/agent_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/slurm/slurm_config.h"

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

/// Decodes `body` as a Message and hands it to `handler`; 400 naming the member when it
/// does not match.
template <typename Message, typename Handler>
http::HttpResponse WithMessage(std::string_view body, Handler&& handler) {
  auto message = Parse<Message>(body);
  if (!message.ok()) return Error(400, message.status().message());
  return handler(*message);
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

/// "/tmp/<bucket>/<prefix>/", where HyperPod puts a node's lifecycle bundle.
std::string BundleDirectory(const bundle::S3Location& loc) {
  std::string dir = absl::StrCat("/tmp/", loc.bucket, "/", loc.prefix);
  if (dir.back() != '/') dir.push_back('/');
  return dir;
}

std::string LifecycleFailureMessage(const model::Cluster& c, const model::Node& n,
                                    const std::string& reason, const std::string& detail) {
  // HyperPod's wording, with what went wrong and where the output is.
  std::string head = reason == "timeout" ? "Lifecycle scripts execution timed out"
                                         : "Lifecycle scripts did not run successfully";
  return absl::StrCat(head, ": ", detail.empty() ? "no detail reported" : detail,
                      ". Ensure the scripts exist in the provided S3 path, are accessible, and "
                      "run without errors. See CloudWatch logs (log group ",
                      ClusterLogGroup(c), ", log stream ", LifecycleLogStream(n),
                      ") for lifecycle script execution details.");
}

}  // namespace

std::string ClusterLogGroup(const model::Cluster& cluster) {
  return absl::StrCat("/aws/sagemaker/Clusters/", cluster.name, "/", cluster.id);
}

std::string LifecycleLogStream(const model::Node& node) {
  return absl::StrCat("LifecycleConfig/", node.group, "/", node.instance_id);
}

json ResourceConfig(const model::Cluster& cluster, const std::vector<model::Node>& nodes) {
  json groups = json::array();
  for (const auto& g : cluster.groups) {
    std::vector<const model::Node*> members;
    for (const auto& n : nodes) {
      if (n.group == g.name && n.status != is::kShuttingDown && !n.private_ip.empty()) {
        members.push_back(&n);
      }
    }
    std::sort(members.begin(), members.end(), [](const model::Node* a, const model::Node* b) {
      if (a->launch_time != b->launch_time) return a->launch_time < b->launch_time;
      return a->instance_id < b->instance_id;
    });
    json instances = json::array();
    int index = 0;
    for (const auto* n : members) {
      instances.push_back({{"InstanceName", absl::StrCat(g.name, "-", ++index)},
                           {"InstanceId", n->instance_id},
                           {"AgentIpAddress", n->private_ip},
                           {"CustomerIpAddress", n->private_ip},
                           {"InstanceLabel", nullptr}});
    }
    groups.push_back({{"Name", g.name},
                      {"InstanceType", g.instance_type},
                      {"Instances", instances.empty() ? json(nullptr) : instances}});
  }
  return json{{"ClusterConfig", {{"ClusterArn", cluster.arn}, {"ClusterName", cluster.name}}},
              {"ClusterType", "Slurm"},
              {"InstanceGroups", groups}};
}

AgentService::AgentService(store::Store& store, bundle::BundleSource& bundles,
                           const NodeTokens& tokens, LogSink logs,
                           std::function<void(const std::string&)> on_change,
                           const Clock& clock, IdSource& ids, Options options)
    : store_(store), bundles_(bundles), tokens_(tokens), logs_(std::move(logs)),
      on_change_(std::move(on_change)), clock_(clock), ids_(ids), options_(options) {}

std::map<std::string, SystemTime> AgentService::lastSeen() const {
  std::lock_guard lock(mu_);
  return last_seen_;
}

void AgentService::touch(const std::string& instance_id) {
  const SystemTime now = clock_.now();
  std::lock_guard lock(mu_);
  if (!cluster_of_.count(instance_id)) return;  // forgotten while its request ran
  auto [it, fresh] = last_seen_.try_emplace(instance_id, now);
  if (!fresh) {
    // A late heartbeat is the first sign of a node in trouble (or of an overloaded host).
    const Duration gap = now - it->second;
    if (gap > std::chrono::seconds(3 * options_.heartbeat_seconds)) {
      spdlog::warn("node {}: heartbeat after {:.1f} s of silence", instance_id,
                   std::chrono::duration<double>(gap).count());
    }
    it->second = now;
  }
}

StatusOr<AgentService::Caller> AgentService::authenticate(const http::HttpRequest& request) {
  auto auth = request.header("Authorization");
  constexpr std::string_view kScheme = "HyperfleetNode ";
  if (!auth || auth->substr(0, kScheme.size()) != kScheme) {
    return absl::PermissionDeniedError("missing Authorization: HyperfleetNode <instance-id>:<token>");
  }
  std::string_view cred = auth->substr(kScheme.size());
  auto colon = cred.find(':');
  if (colon == std::string_view::npos) {
    return absl::PermissionDeniedError("malformed node credentials");
  }
  std::string instance_id(cred.substr(0, colon));
  if (!tokens_.verify(instance_id, cred.substr(colon + 1))) {
    return absl::PermissionDeniedError("wrong token for instance " + instance_id);
  }
  std::string cluster_id;
  {
    std::lock_guard lock(mu_);
    auto it = cluster_of_.find(instance_id);
    if (it != cluster_of_.end()) cluster_id = it->second;
  }
  if (cluster_id.empty()) {
    // Only callers with a valid token get here, so this scan cannot be driven by strangers.
    HF_ASSIGN_OR_RETURN(auto clusters, store_.allClusters());
    for (const auto& c : clusters) {
      auto node = store_.node(c.id, instance_id);
      if (node.ok()) {
        cluster_id = c.id;
        break;
      }
    }
    if (cluster_id.empty()) {
      return absl::PermissionDeniedError("instance " + instance_id + " is not part of a cluster");
    }
    std::lock_guard lock(mu_);
    cluster_of_[instance_id] = cluster_id;
  }
  Caller caller;
  auto cluster = store_.clusterById(cluster_id);
  auto node = cluster.ok() ? store_.node(cluster_id, instance_id) : cluster.status();
  if (!node.ok()) {
    if (absl::IsNotFound(node.status())) {
      std::lock_guard lock(mu_);
      cluster_of_.erase(instance_id);
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
    if (path == kRegisterPath) {
      return WithMessage<RegisterRequest>(body, [&](const auto& m) { return registerNode(*caller, m); });
    }
    if (path == kHeartbeatPath) {
      return WithMessage<HeartbeatRequest>(body, [&](const auto& m) { return heartbeat(*caller, m); });
    }
    if (path == kLogsPath) {
      return WithMessage<LogBatch>(body, [&](const auto& m) { return appendLogs(*caller, m); });
    }
    if (path == kLifecyclePath) {
      return WithMessage<LifecycleReport>(body, [&](const auto& m) { return lifecycle(*caller, m); });
    }
    return Error(404, "no such agent resource: POST " + path);
  } catch (const std::exception& e) {
    spdlog::error("agent request {} {}: {}", request.method, request.target, e.what());
    return Error(400, std::string("bad request: ") + e.what());
  }
}

StatusOr<AgentService::NodeFiles> AgentService::nodeFiles(const Caller& caller) {
  NodeFiles out;
  HF_ASSIGN_OR_RETURN(out.nodes, store_.nodes(caller.cluster.id));
  const auto& nodes = out.nodes;
  std::vector<NodeFile>& files = out.files;
  auto add = [&](const std::string& path, const json& content) {
    files.push_back({path, 0600, content.dump(2) + "\n"});
  };
  add("/opt/ml/config/resource_config.json", ResourceConfig(caller.cluster, nodes));
  const json& lcc = caller.node.lifecycle;
  if (lcc.is_object()) {
    json life{{"S3Uri", lcc.value("SourceS3Uri", "")}, {"OnCreate", lcc.value("OnCreate", "")}};
    if (lcc.contains("OnInitComplete")) life["OnInitComplete"] = lcc["OnInitComplete"];
    add("/opt/ml/config/life_cycle_config.json", life);
    // provisioning_parameters.json travels with the scripts; HyperPod also puts a copy here.
    auto params = provisioningParameters(lcc.value("SourceS3Uri", ""));
    if (params) add("/opt/ml/config/provisioning_parameters.json", *params);
    // On the controller, slurm.conf as HyperPod's cluster agent writes it before the
    // lifecycle scripts run (they wait for it); refreshed as the cluster changes.
    auto roles = slurm::SlurmRolesOf(caller.cluster, params.value_or(json()));
    if (roles.ok()) {
      out.controller_group = roles->controller_group;
      std::lock_guard lock(mu_);
      controller_group_[caller.cluster.id] = roles->controller_group;
    }
    if (!roles.ok() && params && params->is_object() &&
        (params->contains("controller_group") || params->contains("worker_groups") ||
         params->contains("login_group"))) {
      out.roles_error = std::string(roles.status().message());
    }
    if (roles.ok() && roles->controller_group == caller.node.group) {
      auto conf = slurm::RenderSlurmConf(caller.cluster, nodes, *roles,
                                         model::InstanceCatalog::Embedded());
      if (!conf.ok()) {
        spdlog::debug("no slurm.conf for cluster {} yet: {}", caller.cluster.name,
                      std::string(conf.status().message()));
      }
      if (conf.ok()) {
        files.push_back({"/opt/slurm/etc/slurm.conf", 0644, *conf});
        out.slurm_conf = std::move(*conf);
        auto gres = slurm::RenderGresConf(caller.cluster, nodes, *roles,
                                          model::InstanceCatalog::Embedded());
        if (gres.ok()) {
          files.push_back({"/opt/slurm/etc/gres.conf", 0644, *gres});
        }
        // slurm.conf names it (JobSubmitPlugins=lua): task governance holds jobs with it.
        files.push_back({"/opt/slurm/etc/job_submit.lua", 0644, slurm::RenderJobSubmitLua()});
      }
    }
  }
  // gres.conf names NVIDIA's device files: slurmd's drop-in makes stand-ins where there are
  // none (a local node), or a GPU instance type registers INVALID_REG.
  if (const auto* spec = model::InstanceCatalog::Embedded().find(caller.node.instance_type);
      spec != nullptr && spec->accelerator_kind == model::AcceleratorKind::kNvidiaGpu &&
      spec->accelerator_count > 0) {
    files.push_back({std::string(slurm::kEmulatedGpusDropInPath), 0644,
                     slurm::RenderEmulatedGpusDropIn(spec->accelerator_count)});
  }
  add("/opt/ml/config/host_agent.json",
      json{{"ClusterArn", caller.cluster.arn}, {"InstanceId", caller.node.instance_id},
           {"InstanceGroupName", caller.node.group}});
  // 53 bits: an integer every JSON reader (and the agent's int64) keeps exactly. The hash of
  // the files' JSON, as before the typed protocol, so that a restart of an upgraded control
  // plane does not send every node its files again.
  out.revision =
      std::hash<std::string>{}(json(files).dump()) & ((uint64_t{1} << 53) - 1);
  return out;
}

std::optional<std::string> AgentService::lifecycleWait(const Caller& caller,
                                                       const NodeFiles& files) {
  if (files.controller_group.empty() || caller.node.group == files.controller_group) {
    return std::nullopt;
  }
  bool controller_ready = false;
  bool named = false;
  for (const auto& n : files.nodes) {
    if (n.group != files.controller_group || n.status == is::kFailure ||
        n.status == is::kShuttingDown || n.lifecycle_state != ls::kSucceeded) {
      continue;
    }
    controller_ready = true;
    std::lock_guard lock(mu_);
    auto it = applied_slurm_conf_.find(n.instance_id);
    if (it != applied_slurm_conf_.end() && !caller.node.hostname.empty() &&
        absl::StrContains(it->second, "NodeName=" + caller.node.hostname + " ")) {
      named = true;
    }
  }
  if (!controller_ready) {
    return "the lifecycle scripts of the controller group " + files.controller_group +
           " have not succeeded yet (Slurm's controller starts first)";
  }
  if (!named) return "the Slurm controller has not loaded a slurm.conf naming this node yet";
  return std::nullopt;
}

std::optional<json> AgentService::provisioningParameters(const std::string& source_uri) {
  const SystemTime now = clock_.now();
  {
    std::lock_guard lock(mu_);
    auto it = params_cache_.find(source_uri);
    if (it != params_cache_.end() && now - it->second.first < kParamsCacheTtl) {
      return it->second.second;
    }
  }
  // Read at most once per TTL per bundle: heartbeats of every node ask for it.
  std::optional<json> value;
  auto loc = bundle::ParseS3Uri(source_uri);
  if (loc.ok()) {
    auto text = bundles_.read(*loc, "provisioning_parameters.json");
    if (text.ok() && text->size() <= kMaxParamsBytes) {
      json parsed = json::parse(*text, nullptr, false);
      if (!parsed.is_discarded()) value = std::move(parsed);
    }
  }
  std::lock_guard lock(mu_);
  params_cache_[source_uri] = {now, value};
  return value;
}

http::HttpResponse AgentService::registerNode(const Caller& caller, const RegisterRequest&) {
  touch(caller.node.instance_id);
  auto files = nodeFiles(caller);
  if (!files.ok()) return Error(HttpStatusOf(files.status()), files.status().message());
  if (files->slurm_conf) {
    // The agent writes these files before anything else (its lifecycle scripts included).
    std::lock_guard lock(mu_);
    applied_slurm_conf_[caller.node.instance_id] = *files->slurm_conf;
  }
  const json& lcc = caller.node.lifecycle;
  RegisterResponse out;
  LifecycleSpec& lifecycle = out.lifecycle;
  const bool done = caller.node.lifecycle_state == ls::kSucceeded ||
                    caller.node.lifecycle_state == ls::kFailed;
  if (!files->roles_error.empty() && caller.node.lifecycle_state.empty()) {
    // The bundle says Slurm but its roles are wrong: the control plane writes no slurm.conf
    // and orders nothing. Say so where the user looks (the node's lifecycle log).
    spdlog::warn("cluster {}: provisioning_parameters.json: {}", caller.cluster.name,
                 files->roles_error);
    log(caller, {{static_cast<int64_t>(ToEpochSeconds(clock_.now()) * 1000),
                  "[SageMaker] provisioning_parameters.json gives no Slurm roles, so no "
                  "slurm.conf is written and no node waits for the controller: " +
                      files->roles_error}});
  }
  std::optional<std::string> wait;
  // A failed cluster's nodes wait for nothing (its controller will not come).
  const bool failed_cluster = caller.cluster.status == model::cluster_status::kFailed;
  if (lcc.is_object() && !done && caller.node.status != is::kShuttingDown &&
      caller.node.lifecycle_state != ls::kStarted && !failed_cluster) {
    wait = lifecycleWait(caller, *files);
  }
  if (wait) {
    lifecycle.wait = true;
    lifecycle.wait_reason = *wait;
    lifecycle.retry_ms = options_.lifecycle_wait_retry_ms;
    // Registered and held back: not an agent that never starts (see the agent-start timeout).
    if (Status s = markWaiting(caller, *wait); !s.ok()) {
      return Error(HttpStatusOf(s), s.message());
    }
  } else if (lcc.is_object() && !done && caller.node.status != is::kShuttingDown &&
             !failed_cluster) {
    // An unusable SourceS3Uri still runs: the bundle listing then fails with the reason,
    // which the agent reports as the node's failure.
    auto loc = bundle::ParseS3Uri(lcc.value("SourceS3Uri", ""));
    lifecycle.run = true;
    lifecycle.source_s3_uri = lcc.value("SourceS3Uri", "");
    lifecycle.on_create = lcc.value("OnCreate", "");
    lifecycle.on_init_complete = lcc.value("OnInitComplete", "");
    lifecycle.directory = loc.ok() ? BundleDirectory(*loc) : "/tmp/lifecycle-scripts/";
    lifecycle.timeout_seconds = options_.lifecycle_timeout_seconds;
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
  out.files_revision = static_cast<int64_t>(files->revision);
  out.files = std::move(files->files);
  // The GPUs the instance type has, for the agent's GPU count check (a node with fewer is
  // rebooted, as HyperPod does).
  if (const auto* spec = model::InstanceCatalog::Embedded().find(caller.node.instance_type);
      spec != nullptr && spec->accelerator_kind == model::AcceleratorKind::kNvidiaGpu) {
    out.expected_gpus = static_cast<unsigned>(spec->accelerator_count);
  }
  return Json(200, out);
}

Status AgentService::markWaiting(const Caller& caller, const std::string& reason) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto node = store_.node(caller.cluster.id, caller.node.instance_id);
    if (!node.ok()) return node.status();
    if (!node->lifecycle_state.empty()) return absl::OkStatus();
    model::Node updated = *node;
    updated.lifecycle_state = ls::kWaiting;
    store::WriteBatch batch;
    batch.nodes.push_back({updated, node->revision, false});
    auto committed = store_.commit(batch);
    if (committed.ok()) {
      log(caller, {{static_cast<int64_t>(ToEpochSeconds(clock_.now()) * 1000),
                    "[SageMaker] Waiting to run the lifecycle scripts: " + reason}});
    }
    if (committed.ok() || !absl::IsFailedPrecondition(committed.status())) {
      return committed.status();
    }
  }
  return absl::UnavailableError("the node record kept changing; retry");
}

std::map<std::string, HealthReport> AgentService::lastHealth() const {
  std::lock_guard lock(mu_);
  return health_;
}

model::ClusterHealthView AgentService::clusterHealth(const std::string& cluster_id) const {
  model::ClusterHealthView view;
  const SystemTime now = clock_.now();
  std::lock_guard lock(mu_);
  for (const auto& [instance, cluster] : cluster_of_) {
    if (cluster != cluster_id) continue;
    model::NodeLiveness& l = view.nodes[instance];
    if (auto it = last_seen_.find(instance); it != last_seen_.end()) l.last_heard = it->second;
    if (auto it = health_.find(instance); it != health_.end()) l.health = json(it->second);
  }
  const Duration fresh =
      std::max<Duration>(std::chrono::seconds(3 * options_.heartbeat_seconds), std::chrono::seconds(5));
  if (auto it = slurm_view_.find(cluster_id);
      it != slurm_view_.end() && now - it->second.first <= fresh) {
    view.slurm_nodes = it->second.second;
  }
  if (auto it = controller_group_.find(cluster_id); it != controller_group_.end()) {
    view.controller_group = it->second;
  }
  return view;
}

void AgentService::setSlurmJobsHandler(SlurmJobsHandler handler) {
  std::lock_guard lock(mu_);
  slurm_jobs_handler_ = std::move(handler);
}

void AgentService::setSlurmMarks(const std::string& cluster_id,
                                 std::vector<model::SlurmMark> marks) {
  std::lock_guard lock(mu_);
  if (marks.empty()) {
    slurm_marks_.erase(cluster_id);
  } else {
    slurm_marks_[cluster_id] = std::move(marks);
  }
}

void AgentService::forget(const std::string& cluster_id,
                          const std::vector<std::string>& instance_ids, bool cluster_gone) {
  std::lock_guard lock(mu_);
  auto drop = [this](const std::string& id) {
    last_seen_.erase(id);
    health_.erase(id);
    applied_slurm_conf_.erase(id);
    cluster_of_.erase(id);
  };
  for (const auto& id : instance_ids) drop(id);
  if (!cluster_gone) return;
  std::vector<std::string> members;
  for (const auto& [instance, cluster] : cluster_of_) {
    if (cluster == cluster_id) members.push_back(instance);
  }
  for (const auto& id : members) drop(id);
  slurm_view_.erase(cluster_id);
  slurm_marks_.erase(cluster_id);
  controller_group_.erase(cluster_id);
}

std::pair<size_t, size_t> AgentService::trackedForTest() const {
  std::lock_guard lock(mu_);
  std::set<std::string> instances, clusters;
  for (const auto& [k, v] : last_seen_) instances.insert(k);
  for (const auto& [k, v] : health_) instances.insert(k);
  for (const auto& [k, v] : applied_slurm_conf_) instances.insert(k);
  for (const auto& [k, v] : cluster_of_) instances.insert(k);
  for (const auto& [k, v] : slurm_view_) clusters.insert(k);
  for (const auto& [k, v] : slurm_marks_) clusters.insert(k);
  for (const auto& [k, v] : controller_group_) clusters.insert(k);
  return {instances.size(), clusters.size()};
}

namespace {
bool IsFault(const std::string& verdict) {
  return verdict == "soft_fault" || verdict == "hard_fault";
}
}  // namespace

void AgentService::recordHealth(const Caller& caller, const HealthReport& health) {
  const std::string& verdict = health.verdict;
  std::string before;
  HealthReport before_report;
  {
    std::lock_guard lock(mu_);
    if (!cluster_of_.count(caller.node.instance_id)) return;  // forgotten meanwhile
    auto it = health_.find(caller.node.instance_id);
    if (it != health_.end()) {
      before = it->second.verdict;
      before_report = it->second;
    }
    health_[caller.node.instance_id] = health;
  }
  // Each service the agent restarted (a killed slurmd) is an event, once per restart.
  auto restarts = [](const HealthReport& report) {
    std::set<std::string> out;
    for (const auto& f : report.findings) {
      if (absl::StrContains(f.message, "restarted by the agent")) out.insert(f.message);
    }
    return out;
  };
  const std::set<std::string> seen = restarts(before_report);
  store::WriteBatch restart_events;
  for (const auto& message : restarts(health)) {
    if (seen.count(message)) continue;
    restart_events.events.push_back(model::MakeEvent(
        ids_.eventId(), caller.cluster.id, clock_.now(),
        {"Instance", "Warn", absl::StrCat("Instance ", caller.node.instance_id, ": ", message),
         caller.node.group, caller.node.instance_id,
         json{{"Instance", {{"NodeLogicalId", caller.node.logical_id}}}}}));
  }
  if (!restart_events.empty()) {
    if (auto s = store_.commit(restart_events); !s.ok()) {
      spdlog::warn("health event for {}: {}", caller.node.instance_id,
                   std::string(s.status().message()));
    }
  }
  if (IsFault(verdict) == IsFault(before) && (verdict == before || !IsFault(verdict))) return;
  // What failed, in the agent's words.
  std::vector<std::string> failing;
  for (const auto& f : health.findings) {
    if (IsFault(f.severity)) failing.push_back((f.check.empty() ? "?" : f.check) + ": " + f.message);
  }
  std::string description;
  if (IsFault(verdict)) {
    description = absl::StrCat("Instance ", caller.node.instance_id, " failed its health checks (",
                               verdict == "hard_fault" ? "hardware fault, replace"
                                                       : "soft fault, reboot",
                               "): ", absl::StrJoin(failing, "; "));
  } else {
    description = absl::StrCat("Instance ", caller.node.instance_id,
                               " passes its health checks again");
  }
  store::WriteBatch batch;
  batch.events.push_back(model::MakeEvent(
      ids_.eventId(), caller.cluster.id, clock_.now(),
      {"Instance", IsFault(verdict) ? "Error" : "Info", description, caller.node.group,
       caller.node.instance_id,
       json{{"Instance", {{"NodeLogicalId", caller.node.logical_id}}}}}));
  if (auto s = store_.commit(batch); !s.ok()) {
    spdlog::warn("health event for {}: {}", caller.node.instance_id,
                 std::string(s.status().message()));
  }
  spdlog::log(IsFault(verdict) ? spdlog::level::warn : spdlog::level::info, "{}", description);
}

http::HttpResponse AgentService::heartbeat(const Caller& caller, const HeartbeatRequest& body) {
  touch(caller.node.instance_id);
  if (body.health) recordHealth(caller, *body.health);
  auto files = nodeFiles(caller);
  if (!files.ok()) return Error(HttpStatusOf(files.status()), files.status().message());
  const bool controller =
      !files->controller_group.empty() && files->controller_group == caller.node.group;
  if (controller && body.slurm_nodes) {
    std::lock_guard lock(mu_);
    slurm_view_[caller.cluster.id] = {clock_.now(), ToModel(*body.slurm_nodes)};
  }
  HeartbeatResponse out;
  out.files_revision = static_cast<int64_t>(files->revision);
  // The agent compares its clock with ours (health check "clock").
  out.time = ToEpochSeconds(clock_.now());
  if (controller) {
    std::lock_guard lock(mu_);
    auto it = slurm_marks_.find(caller.cluster.id);
    if (it != slurm_marks_.end()) {
      for (const auto& m : it->second) out.slurm_marks.push_back({m.node, m.action, m.reason});
    }
  }
  // Task governance: the controller's job report in, job actions and governed accounts out.
  if (controller) {
    SlurmJobsHandler jobs;
    {
      std::lock_guard lock(mu_);
      jobs = slurm_jobs_handler_;
    }
    if (jobs) {
      if (auto answer = jobs(caller.cluster.id, body.slurm_jobs ? &*body.slurm_jobs : nullptr)) {
        out.governance = std::move(answer->governance);
        out.slurm_job_actions = std::move(answer->slurm_job_actions);
      }
    }
  }
  if (body.files_revision != out.files_revision) {
    out.files = std::move(files->files);
  } else if (files->slurm_conf) {
    // The agent reports a revision once it has written its files and reloaded Slurm.
    std::lock_guard lock(mu_);
    applied_slurm_conf_[caller.node.instance_id] = *files->slurm_conf;
  }
  return Json(200, out);
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
  const int64_t now_ms = ToEpochSeconds(clock_.now()) * 1000;
  for (const auto& e : body.events) lines.push_back({e.timestamp_ms.value_or(now_ms), e.message});
  log(caller, std::move(lines));
  return Json(200, json::object());
}

http::HttpResponse AgentService::lifecycle(const Caller& caller, const LifecycleReport& body) {
  const std::string& state = body.state;
  if (state != kStarted && state != kSucceeded && state != kFailed) {
    return Error(400, "state must be Started, Succeeded or Failed");
  }
  const std::string& reason = body.reason;
  const std::string& detail = body.message;
  // The platform's markers in the node's log stream, written once per transition.
  auto markers = [&] {
    const int64_t now_ms = ToEpochSeconds(clock_.now()) * 1000;
    if (state == ls::kStarted) {
      log(caller, {{now_ms, "[SageMaker] Downloading lifecycle scripts"}});
    } else if (state == ls::kSucceeded) {
      log(caller, {{now_ms, "[SageMaker] The lifecycle scripts succeeded."}});
    } else {
      log(caller, {{now_ms, "[SageMaker] " + (detail.empty() ? reason : detail)},
                   {now_ms, "[SageMaker] The lifecycle scripts failed."}});
    }
  };
  // Record the result on the node (compare-and-swap; retried when the controller wrote
  // the same node in between).
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto node = store_.node(caller.cluster.id, caller.node.instance_id);
    if (!node.ok()) return Error(HttpStatusOf(node.status()), node.status().message());
    if (node->lifecycle_state == state) return Json(200, json::object());  // a retried report
    if (node->lifecycle_state == ls::kSucceeded || node->lifecycle_state == ls::kFailed) {
      return Json(200, json::object());  // results are final
    }
    model::Node updated = *node;
    updated.lifecycle_state = state;
    if (state == ls::kFailed) {
      updated.lifecycle_message = LifecycleFailureMessage(caller.cluster, updated, reason, detail);
    }
    store::WriteBatch batch;
    batch.nodes.push_back({updated, node->revision, false});
    std::string description = absl::StrCat("Instance lifecycle script execution for EC2InstanceId ",
                                           updated.instance_id, " has ", state);
    if (state == ls::kFailed && !detail.empty()) absl::StrAppend(&description, ": ", detail);
    batch.events.push_back(model::MakeEvent(
        ids_.eventId(), caller.cluster.id, clock_.now(),
        {"Instance", state == ls::kFailed ? "Error" : "Info", description, updated.group,
         updated.instance_id,
         json{{"Instance",
               {{"LcsExecutionState", state}, {"NodeLogicalId", updated.logical_id}}}}}));
    auto committed = store_.commit(batch);
    if (committed.ok()) {
      markers();
      spdlog::info("node {}: lifecycle scripts {}{}", updated.instance_id, state,
                   detail.empty() ? "" : " (" + detail + ")");
      if (on_change_) on_change_(caller.cluster.id);
      return Json(200, json::object());
    }
    if (!absl::IsFailedPrecondition(committed.status())) {
      return Error(503, committed.status().message());
    }
  }
  return Error(503, "the node record kept changing; retry");
}

}  // namespace hf::agentapi
