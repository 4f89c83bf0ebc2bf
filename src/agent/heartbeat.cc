#include "heartbeat.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hyperfleet/agent/node_files.h"

namespace hf::agent {

Heartbeat::Heartbeat(const AgentOptions& options, const std::atomic<bool>& stop, Sleep sleep,
                     std::vector<std::unique_ptr<HeartbeatHook>> hooks)
    : options_(options),
      stop_(stop),
      sleep_(sleep),
      hooks_(std::move(hooks)),
      client_(options, sleep) {}

void Heartbeat::Run(int heartbeat_seconds, int64_t files_revision) {
  const std::chrono::milliseconds interval = std::chrono::seconds(std::max(1, heartbeat_seconds));
  // After applying new files, confirm them at once (once in a row: never a busy loop).
  bool report_now = false;
  bool reported_early = false;
  for (;;) {
    const bool early = report_now && !reported_early;
    if (!early && !sleep_(interval)) break;
    if (stop_) break;
    reported_early = early;
    report_now = false;
    for (auto& hook : hooks_) {
      // Reported once the hook's work on them is done (e.g. Slurm reloaded): the control
      // plane then lets the nodes the new slurm.conf names start their slurmd.
      if (auto confirmed = hook->TakeConfirmed()) {
        files_revision = *confirmed;
        report_now = true;
      }
    }
    agentapi::HeartbeatRequest request;
    request.files_revision = files_revision;
    for (auto& hook : hooks_) hook->Fill(request);
    if (stop_) break;
    auto result = client_.Post(agentapi::kHeartbeatPath, request);
    if (!result.ok()) {
      spdlog::warn("heartbeat failed: {}", std::string(result.status().message()));
      continue;
    }
    auto response = agentapi::Parse<agentapi::HeartbeatResponse>(*result);
    if (!response.ok()) {
      spdlog::error("heartbeat: {}", std::string(response.status().message()));
      continue;
    }
    for (auto& hook : hooks_) hook->Take(*response);
    if (response->files) {
      if (auto confirm = ApplyFiles(*response, files_revision)) {
        files_revision = *confirm;
        report_now = true;
      }
    } else if (response->files_revision) {
      files_revision = *response->files_revision;
    }
  }
}

std::optional<int64_t> Heartbeat::ApplyFiles(const agentapi::HeartbeatResponse& response,
                                             int64_t files_revision) {
  for (auto& hook : hooks_) {
    if (!hook->ReadyForFiles()) return std::nullopt;  // the files come again until confirmed
  }
  const std::vector<agentapi::NodeFile>& files = *response.files;
  if (!WriteNodeFiles(options_.root, files).ok()) return std::nullopt;
  spdlog::info("updated {} node files", files.size());
  const int64_t revision = response.files_revision.value_or(files_revision);
  bool now = true;
  for (auto& hook : hooks_) now = hook->FilesWritten(revision, files) && now;
  if (now && response.files_revision) return revision;
  return std::nullopt;
}

}  // namespace hf::agent
