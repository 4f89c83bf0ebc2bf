#include "hyperfleet/provider/fake_provider.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"

namespace hf::provider {
namespace {

using nlohmann::json;

// Addresses in 10.1.0.0/16 in launch order, as a VPC subnet would hand them out.
std::string AddressFor(unsigned n) {
  return absl::StrCat("10.1.", (n / 250) % 250, ".", n % 250 + 4);
}

std::string HostnameFor(const std::string& ip) {
  std::string h = "ip-" + ip;
  for (char& c : h) {
    if (c == '.') c = '-';
  }
  return h;
}

}  // namespace

StatusOr<std::unique_ptr<FakeProvider>> FakeProvider::Create(const Clock& clock,
                                                             Options options) {
  auto p = std::unique_ptr<FakeProvider>(new FakeProvider(clock, std::move(options)));
  HF_RETURN_IF_ERROR(p->load());
  return p;
}

Status FakeProvider::launch(const InstanceSpec& spec) {
  std::lock_guard lock(mu_);
  if (records_.count(spec.instance_id)) return absl::OkStatus();  // idempotent
  Record r;
  r.spec = spec;
  r.launched = clock_.now();
  // A replacement asks for its predecessor's address (free again once it terminated).
  r.private_ip = spec.private_ip.empty() ? AddressFor(next_ip_++) : spec.private_ip;
  for (const std::string& key : {spec.group, std::string()}) {
    auto it = fail_next_.find(key);
    if (it != fail_next_.end() && it->second.first > 0) {
      r.failure = it->second.second;
      if (--it->second.first == 0) fail_next_.erase(it);
      break;
    }
  }
  records_.emplace(spec.instance_id, std::move(r));
  dirty_ = true;
  return absl::OkStatus();
}

Status FakeProvider::terminate(std::string_view instance_id) {
  std::lock_guard lock(mu_);
  auto it = records_.find(std::string(instance_id));
  if (it == records_.end() || it->second.terminated) return absl::OkStatus();
  it->second.terminated = clock_.now();
  dirty_ = true;
  return absl::OkStatus();
}

Status FakeProvider::reboot(std::string_view instance_id) {
  std::lock_guard lock(mu_);
  auto it = records_.find(std::string(instance_id));
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no instance ", std::string(instance_id)));
  }
  const SystemTime now = clock_.now();
  if (it->second.terminated || !it->second.failure.empty() ||
      now - it->second.launched < options_.boot_delay) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", std::string(instance_id), " is not running"));
  }
  it->second.launched = now;  // boots again, as long as at launch
  dirty_ = true;
  return absl::OkStatus();
}

StatusOr<std::vector<InstanceObservation>> FakeProvider::list(std::string_view cluster_id) {
  std::lock_guard lock(mu_);
  const SystemTime now = clock_.now();
  expireLocked(now);
  // Persist before reporting: whatever the controller acts on survives a crash. A launch or
  // terminate lost to a crash before this point is simply asked again (both are idempotent).
  if (dirty_) HF_RETURN_IF_ERROR(saveLocked());
  std::vector<InstanceObservation> out;
  for (const auto& [id, r] : records_) {
    if (r.spec.cluster_id != cluster_id) continue;
    InstanceObservation o;
    o.instance_id = id;
    o.cluster_id = r.spec.cluster_id;
    if (r.terminated) {
      o.state = InstanceState::kTerminating;
    } else if (now - r.launched < options_.boot_delay) {
      o.state = InstanceState::kPending;
    } else if (!r.failure.empty()) {
      o.state = InstanceState::kFailed;
      o.message = r.failure;
    } else {
      o.state = InstanceState::kRunning;
      o.boot_time = r.launched + std::chrono::duration_cast<SystemTime::duration>(options_.boot_delay);
    }
    if (o.state != InstanceState::kPending) {
      o.private_ip = r.private_ip;
      o.hostname = HostnameFor(r.private_ip);
    }
    out.push_back(std::move(o));
  }
  return out;
}

void FakeProvider::failNextLaunchesForTest(const std::string& group, int count,
                                           const std::string& message) {
  std::lock_guard lock(mu_);
  fail_next_[group] = {count, message};
}

void FakeProvider::killForTest(const std::string& instance_id) {
  std::lock_guard lock(mu_);
  records_.erase(instance_id);
  dirty_ = true;
}

size_t FakeProvider::sizeForTest() const {
  std::lock_guard lock(mu_);
  return records_.size();
}

void FakeProvider::expireLocked(SystemTime now) {
  bool changed = false;
  for (auto it = records_.begin(); it != records_.end();) {
    if (it->second.terminated && now - *it->second.terminated >= options_.terminate_delay) {
      it = records_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) dirty_ = true;
}

Status FakeProvider::load() {
  if (options_.state_file.empty()) return absl::OkStatus();
  auto text = ReadFile(options_.state_file);
  if (!text.ok()) return absl::OkStatus();  // first start
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    return absl::InternalError(
        absl::StrCat("fake provider state ", options_.state_file, " is not valid JSON"));
  }
  try {
    return loadFrom(j);
  } catch (const json::exception& e) {
    records_.clear();
    return absl::InternalError(absl::StrCat("fake provider state ", options_.state_file,
                                            " is malformed: ", e.what()));
  }
}

Status FakeProvider::loadFrom(const nlohmann::json& j) {
  next_ip_ = j.value("next_ip", 0u);
  for (const auto& r : j.value("instances", json::array())) {
    Record rec;
    rec.spec = ReadInstanceSpec(r);
    rec.launched = FromEpochSeconds(r.value("launched", 0.0));
    if (r.contains("terminated")) rec.terminated = FromEpochSeconds(r["terminated"].get<double>());
    rec.failure = r.value("failure", "");
    rec.private_ip = r.value("private_ip", "");
    if (!rec.spec.instance_id.empty()) records_.emplace(rec.spec.instance_id, std::move(rec));
  }
  return absl::OkStatus();
}

Status FakeProvider::saveLocked() {
  dirty_ = false;
  if (options_.state_file.empty()) return absl::OkStatus();
  json instances = json::array();
  for (const auto& [id, r] : records_) {
    json o = {{"launched", ToEpochSeconds(r.launched)},
              {"failure", r.failure},
              {"private_ip", r.private_ip}};
    WriteInstanceSpec(r.spec, o);
    if (r.terminated) o["terminated"] = ToEpochSeconds(*r.terminated);
    instances.push_back(std::move(o));
  }
  // Atomic: a crash leaves either the old or the new file, never half of one.
  return WriteFileAtomically(options_.state_file,
                             json{{"next_ip", next_ip_}, {"instances", instances}}.dump(), 0644);
}

}  // namespace hf::provider
