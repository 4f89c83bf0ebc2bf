#pragma once
// The `ssh` provider: every instance is a registered machine (MachineInventory) reached only
// over ssh (hf::ssh::Run). launch() takes a machine through hf_pool's Allocate (a ready hot
// spare first), provisions it over ssh (the machine's apt for missing packages, the AMI layer
// in its machine mode, the node binary copied and checked by SHA-256, the node's identity,
// the agent unit enabled and started); terminate() cleans the machine and releases it to the
// pool; terminateNow() (a dead machine) quarantines it with the reason. A loop keeps each
// type's hot spares (PlanSpares) and checks them at intervals. Records live under
// <data_dir>/ssh/ and are re-adopted after a restart. docs/ssh-provider.md.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/pool/machine_pool.h"
#include "hyperfleet/provider/machine_inventory.h"
#include "hyperfleet/provider/provider.h"
#include "hyperfleet/ssh/ssh_client.h"

namespace hf::provider {

/// Something the ssh provider tells the cluster's event log (typed; the server turns it
/// into a cluster event).
struct SshProviderEvent {
  enum class Kind {
    kSpareTaken,        ///< a hot spare became node `instance_id`
    kMachineQuarantined,///< the machine of `instance_id` went to quarantine
  };
  Kind kind;
  std::string cluster_id;
  std::string group;  ///< the instance group of instance_id
  std::string instance_id;
  std::string machine_id;
  std::string message;  ///< e.g. "hot spare m-… (10.250.0.12) took node i-…"
};

/// The `ssh` provider. Thread-safe; launch() and terminate() record intent and return, worker
/// threads do the ssh work; the destructor joins them (machines keep running).
class SshProvider final : public Provider {
 public:
  /// Runs one remote command (hf::ssh::Run's signature); tests inject a fake.
  using SshRunner = std::function<StatusOr<hf::ssh::SshResult>(
      const hf::ssh::SshTarget&, std::string_view command, std::string_view input, Duration timeout)>;

  struct Options {
    std::string data_dir;                  ///< records under <data_dir>/ssh/
    MachineInventory* inventory = nullptr; ///< not owned; required
    /// The node binary copied to every machine (build/bin/hyperfleet-node when built).
    std::string node_binary;
    /// The agent endpoint as machines reach it ("https://10.250.0.1:9443", or http), and the
    /// SHA-256 fingerprint of its certificate (HF_AGENT_CERT_SHA256), empty for http.
    std::string agent_url;
    std::string agent_cert_sha256;
    /// Agent token of an instance (agent.env's HF_AGENT_TOKEN).
    std::function<std::string(std::string_view instance_id)> agent_token;
    std::string region = "us-west-2";
    /// Lemon rule etc. for ssh machines; spare_target is read from the inventory each pass.
    /// Default lemon_failures 1: a machine whose node died without a clean shutdown goes to
    /// quarantine at once (no hands to repair it); an operator returns it.
    pool::PoolPolicy policy = DefaultPolicy();
    /// Time limit of one ssh step (the base script may install packages).
    Duration step_timeout = std::chrono::minutes(20);
    /// Attempts of a step whose ssh connection failed (exit 255, timeout) before the instance
    /// fails naming the step.
    int step_attempts = 3;
    Duration retry_delay = std::chrono::seconds(2);
    /// How long a reboot may take until ssh answers with a new boot id.
    Duration reboot_timeout = std::chrono::minutes(10);
    /// Period of the spare loop (PlanSpares, spare and return checks, hosts blocks).
    Duration spare_interval = std::chrono::seconds(30);
    /// A spare whose / has less free space than this fails its check.
    long long min_disk_free_kib = 1 << 20;
    SshRunner ssh_run;  ///< empty = hf::ssh::Run
    /// Serve the cluster's shared /fsx to every node from <data_dir>/ssh/clusters/<id>/fsx
    /// (sshfs over the provider's ssh; skipped on a machine with its own /fsx mount).
    bool shared_fsx = true;
    /// The text of provisioning_parameters.json in the lifecycle bundle at a
    /// LifeCycleConfig.SourceS3Uri (NotFound when the bundle has none). When it names
    /// fsx_dns_name and fsx_mountname the default /fsx is skipped: the lifecycle scripts
    /// mount FSx (fsx_plan.h). Empty = not read (the default /fsx).
    std::function<StatusOr<std::string>(std::string_view source_s3_uri)> provisioning_parameters;
    /// How long provisioning waits for that mount before the instance fails.
    Duration fsx_timeout = std::chrono::seconds(60);
    /// Receives spare and quarantine events; may be empty.
    std::function<void(const SshProviderEvent&)> on_event;
    const Clock* clock = nullptr;  ///< empty = the system clock
  };

  /// lemon_failures 1 (see Options::policy), return checks on.
  static pool::PoolPolicy DefaultPolicy();

  /// Checks the options (inventory, node binary readable, agent URL), makes <data_dir>/ssh,
  /// re-adopts the records of an earlier run and starts the spare loop. Errors:
  /// InvalidArgument naming the option; FailedPrecondition for an unreadable node binary.
  static StatusOr<std::unique_ptr<SshProvider>> Create(const Options& options);
  ~SshProvider() override;

  std::string_view name() const override { return "ssh"; }
  /// Errors: InvalidArgument for empty or path-like ids.
  Status launch(const InstanceSpec& spec) override;
  Status terminate(std::string_view instance_id) override;
  /// `systemctl reboot` over ssh, then waits until ssh answers with a new boot id.
  /// NotFound (unknown), FailedPrecondition (not running).
  Status reboot(std::string_view instance_id) override;
  /// No cleanup (the machine is dead or hung): the machine goes to quarantine with the
  /// reason and the record is dropped.
  Status terminateNow(std::string_view instance_id) override;
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id) override;
  bool runsLifecycleScripts() const override { return true; }

  /// Runs one pass of the spare loop now and waits for the work it started (tests).
  void runSparePassForTest();
  /// Waits until no worker runs (tests).
  void waitIdleForTest();

  class Impl;  ///< src/provider/ssh/ssh_provider_impl.h

 private:
  explicit SshProvider(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hf::provider
