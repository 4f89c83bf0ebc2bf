#pragma once
// An in-process provider whose instances exist only as records: they become Running
// `boot_delay` after launch and disappear `terminate_delay` after terminate, measured on
// the injected clock. It persists its records to a JSON file (when given one, before each
// list() that follows a change) so that a restarted control plane re-adopts its instances,
// as it would real machines.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/provider/provider.h"

namespace hf::provider {

/// The `fake` provider. Thread-safe.
class FakeProvider final : public Provider {
 public:
  struct Options {
    Duration boot_delay = std::chrono::milliseconds(200);
    Duration terminate_delay = std::chrono::milliseconds(100);
    std::string state_file;  ///< where records persist; empty = memory only
  };

  /// Loads `options.state_file` when it exists. Errors: Internal for an unreadable file.
  static StatusOr<std::unique_ptr<FakeProvider>> Create(const Clock& clock, Options options);

  // hf::provider::Provider
  std::string_view name() const override { return "fake"; }
  Status launch(const InstanceSpec& spec) override;
  Status terminate(std::string_view instance_id) override;
  /// Boots the instance again: Pending for boot_delay, then Running with a later boot_time.
  Status reboot(std::string_view instance_id) override;
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id) override;

  /// Test knob: the next `count` launches in instance group `group` fail to boot with
  /// `message` (any group when `group` is empty).
  void failNextLaunchesForTest(const std::string& group, int count, const std::string& message);
  /// Test knob: the instance vanishes at once, as a machine that died.
  void killForTest(const std::string& instance_id);
  /// Number of records (any cluster, any state).
  size_t sizeForTest() const;

 private:
  struct Record {
    InstanceSpec spec;
    SystemTime launched{};
    std::optional<SystemTime> terminated;
    std::string failure;  // non-empty: boot fails with this message
    std::string private_ip;
  };

  FakeProvider(const Clock& clock, Options options) : clock_(clock), options_(std::move(options)) {}
  Status load();
  Status loadFrom(const nlohmann::json& state);  // may throw json::exception
  Status saveLocked();
  void expireLocked(SystemTime now);

  const Clock& clock_;
  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Record> records_;  // by instance id
  std::map<std::string, std::pair<int, std::string>> fail_next_;  // group -> (count, message)
  unsigned next_ip_ = 0;
  bool dirty_ = false;  // records changed since the last save
};

}  // namespace hf::provider
