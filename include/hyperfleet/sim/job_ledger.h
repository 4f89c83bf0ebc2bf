#pragma once
// One synchronous training job's accounting, shared by both engines. The engine reports state
// changes (running, stopped, recovery phases, slowdowns, corruption); the ledger accounts the
// wall time between them in closed form (no per-step or per-checkpoint events), with Daly's
// semantics: periodic checkpoints of cost δ after every τ minutes of work, a failure loses the
// work since the last durable checkpoint. Minutes throughout.
#include <array>
#include <vector>

#include "hyperfleet/sim/fguf.h"

namespace hf::sim {

/// Where non-productive wall time goes (FGUF-1's loss breakdown, plus planned and human).
enum class Loss {
  kCheckpoint,    ///< checkpoint stalls (δ), including those of work later lost
  kRework,        ///< work since the last durable checkpoint, lost by a stop
  kDetection,     ///< fault → detected (the job is stalled or, for SDC, computing garbage)
  kLocalization,  ///< finding the node(s) at fault
  kWaitNode,      ///< waiting for a replacement (swap, provision, repaired queue)
  kRestart,       ///< restart: scheduling, init, checkpoint load
  kFailSlow,      ///< the slowdown share of slow periods: wall − work while running slowly
  kSdcRollback,   ///< work computed after a silent corruption, rolled back
  kPlanned,       ///< planned interruptions (their checkpoint and restart)
  kHuman,         ///< waiting for a person's fix
  kIdle,          ///< the job cannot run (no nodes left) and is not recovering either
};
inline constexpr int kLossCount = 11;
/// snake_case name ("checkpoint", "rework", ...).
const char* ToString(Loss l);

/// Checkpoint policy of the job.
struct CheckpointPolicy {
  double interval_min = 60;        ///< τ: work minutes between checkpoints (> 0)
  double cost_min = 0;             ///< δ: blocking stall per checkpoint
  double persist_window_min = 0;   ///< async: durable this long after the stall ends
};

/// Why the job stopped, for per-class MTTR.
enum class StopClass { kD1, kD2, kD3, kD4, kD5, kPlanned };
inline constexpr int kStopClassCount = 6;
StopClass StopClassOf(DetectClass c);
const char* ToString(StopClass c);

/// One interruption: stop → running again.
struct Interruption {
  double stop_min = 0;
  double downtime_min = 0;  ///< wall time until the job ran again (recovery incl. detection)
  StopClass cls = StopClass::kD1;
};

/// The ledger of one job over [0, horizon]. Call in non-decreasing time order.
class JobLedger {
 public:
  explicit JobLedger(CheckpointPolicy policy);

  /// The job (re)starts computing at `t` from a durable checkpoint (a fresh cycle).
  void Run(double t);
  /// Step time × `factor` (≥ 1) from `t` on, running or not (kept for the next Run).
  void SetSlowdown(double t, double factor);
  /// Silent corruption at `t` while running: checkpoints from now on are bad. The corruption
  /// outlives other stops and restarts (they restart from a bad checkpoint) until a kD5 stop
  /// detects it; the work kept since `t` is then charged to kSdcRollback, the work before it
  /// since the last good checkpoint to kRework.
  void Corrupt(double t);
  /// The job stops at `t` (a fault at `t` of class `cls`; for SDC, at its detection): work
  /// since the last checkpoint becomes rework (kD5 with a corruption: the roll-back above);
  /// the wall time from `t` is charged to `phase` until the next Phase/Run. kPlanned: a
  /// checkpoint is taken first (no rework). A stop while already stopped only changes the
  /// phase and counts no interruption (kD5 still rolls back a corruption).
  void Stop(double t, StopClass cls, Loss phase);
  /// From `t`, recovery time is charged to `phase` (stopped only).
  void Phase(double t, Loss phase);
  /// Closes the accounting at `t` (the horizon); the job is stopped afterwards.
  void Finish(double t);

  bool running() const { return running_; }
  /// The loss wall time is charged to while stopped.
  Loss phase() const { return phase_; }
  /// A silent corruption is pending (not yet rolled back).
  bool corrupt() const { return corrupt_; }
  /// Work (productive minutes at full speed) done and kept so far; valid after Finish.
  double productive_min() const { return productive_; }
  double wall_min() const { return end_ - start_; }
  const std::array<double, kLossCount>& losses() const { return loss_; }
  const std::vector<Interruption>& interruptions() const { return interruptions_; }
  /// Minimum over windows [a, a + window] in [0, end] of productive work / window (ByteRobust's
  /// 1-hour sliding-window ETTR, window = 60). Running stretches are counted at their mean
  /// work density (τ / (τ·f + δ)). 1 when the run is shorter than the window.
  double MinWindowEttr(double window_min = 60) const;

 private:
  struct Segment {
    double start, end, density;  // work minutes per wall minute over [start, end)
  };
  void Advance(double t);  // account [now_, t) in the current state
  void AddSegment(double start, double end, double work);
  void DropWork(double work);  // rework: remove the last `work` minutes of segments
  void RollBack();             // a detected corruption: rb_pre_ + rb_post_ are lost

  CheckpointPolicy policy_;
  double start_ = 0, now_ = 0, end_ = 0;
  bool running_ = false;
  bool corrupt_ = false;
  double factor_ = 1.0;
  Loss phase_ = Loss::kIdle;
  // Within a run: position in the checkpoint cycle and what a stop would lose.
  double cycle_work_ = 0;      // work done in the current cycle (0..τ)
  double stall_done_ = 0;      // > 0: in the stall, this much of δ done
  double since_durable_ = 0;   // work since the last durable checkpoint
  double pending_work_ = 0;    // async: work of the checkpoint still persisting
  double persist_left_ = 0;    // async: persist-window minutes left
  double rb_pre_ = 0;         // corruption: work before it since the last good checkpoint
  double rb_post_ = 0;        // corruption: work kept since it (across restarts)
  double post_in_since_ = 0;  // the part of since_durable_ done after the corruption
  double productive_ = 0;
  bool has_stop_ = false;  // stopped by Stop (not yet running again)
  double stop_at_ = 0;
  StopClass stop_cls_ = StopClass::kD1;
  std::array<double, kLossCount> loss_{};
  std::vector<Interruption> interruptions_;
  std::vector<Segment> segments_;
};

}  // namespace hf::sim
