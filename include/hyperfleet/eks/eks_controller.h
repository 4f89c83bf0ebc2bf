#pragma once
// Brings each stored EKS cluster's control plane to what its record says, through
// eks::ControlPlanes: PlanEksCluster() decides (pure, table-tested), EksController runs it on
// a thread (ensure/remove/status calls, compare-and-swap commits). After a server restart the
// first pass re-ensures the control planes of CREATING and ACTIVE clusters (the real
// ControlPlanes re-adopts running ones).
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/store/store.h"

namespace hf::eks {

/// How long a cluster may stay CREATING while its control plane reports kFailed before it
/// becomes FAILED (until then each pass retries ensure()).
inline constexpr Duration kCreateDeadline = std::chrono::minutes(20);

/// What one pass does for one cluster.
struct EksDecision {
  bool ensure = false;                    ///< ControlPlanes::ensure(its spec)
  bool remove = false;                    ///< ControlPlanes::remove(its name)
  std::optional<store::EksCluster> write; ///< the record to commit (CAS on its revision)
  bool erase = false;                     ///< delete the record (and its access entries)
  bool operator==(const EksDecision&) const = default;
};

/// The decision for cluster `c` whose control plane is `observed` at `now`:
///   CREATING: absent -> ensure; starting -> nothing; ready -> ACTIVE with endpoint, CA and
///             served version; failed -> ensure again, FAILED (with its message) once
///             kCreateDeadline has passed since createdAt.
///   ACTIVE:   absent or failed -> ensure (re-adoption after a restart); ready -> commit only
///             when endpoint, CA or served version changed; starting -> nothing.
///   DELETING: anything but absent -> remove; absent -> erase the record.
///   FAILED:   nothing (DeleteCluster is the way out).
EksDecision PlanEksCluster(const store::EksCluster& c, const ControlPlaneStatus& observed,
                           SystemTime now);

/// The thread that applies PlanEksCluster to every stored EKS cluster.
class EksController {
 public:
  struct Options {
    /// Every cluster is looked at this often, and at once after wake().
    Duration interval = std::chrono::seconds(1);
    /// The token webhook's URL prefix; the cluster's name is appended
    /// (e.g. "http://127.0.0.1:8080/eks/v1/authenticate/"). Empty: no webhook.
    std::string token_webhook_prefix;
  };

  EksController(store::Store& store, ControlPlanes& planes, const Clock& clock,
                Options options);
  ~EksController();

  /// Starts the thread. Call once.
  void start();
  /// Stops and joins the thread. Idempotent.
  void stop();
  /// Asks for a pass soon (after an API write).
  void wake();
  /// One pass over every stored cluster, synchronously (tests; the thread calls it too).
  /// Errors: the store's list; per-cluster failures are logged and retried next pass.
  Status runOnce();

 private:
  /// Applies the decision for one cluster.
  Status reconcile(const store::EksCluster& c);

  store::Store& store_;
  ControlPlanes& planes_;
  const Clock& clock_;
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::map<std::string, std::string> last_error_;  ///< per cluster, under mu_: what was logged
  std::thread thread_;
};

}  // namespace hf::eks
