#pragma once
// Simulated time for the product engine: a Clock that moves only when the driver sets it,
// and the queue of the simulator's own events in that time.
#include <atomic>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "hyperfleet/common/clock.h"

namespace hf::sim::product {

/// A settable clock: now() and monotonic() read the same simulated instant. Thread-safe (an
/// atomic), although the product engine runs on one thread.
class SimClock final : public Clock {
 public:
  explicit SimClock(SystemTime start) : nanos_(start.time_since_epoch().count()) {}
  SystemTime now() const override { return SystemTime(Duration(nanos_.load())); }
  SteadyTime monotonic() const override { return SteadyTime(Duration(nanos_.load())); }
  /// Moves to `t`; never backwards (a precondition: the driver's events are in time order).
  void set(SystemTime t) {
    if (t.time_since_epoch().count() > nanos_.load()) nanos_ = t.time_since_epoch().count();
  }

 private:
  std::atomic<int64_t> nanos_;
};

/// The simulator's events in time order; events at the same instant run in the order they
/// were scheduled (a sequence number breaks ties), so a run is deterministic.
class EventQueue {
 public:
  using Action = std::function<void()>;
  void schedule(SystemTime at, Action action) {
    heap_.push(Entry{at, seq_++, std::move(action)});
  }
  bool empty() const { return heap_.empty(); }
  /// Time of the next event; SystemTime::max() when none.
  SystemTime next() const { return heap_.empty() ? SystemTime::max() : heap_.top().at; }
  /// Removes the next event and returns its action. Precondition: !empty().
  Action pop() {
    Action a = std::move(const_cast<Entry&>(heap_.top()).action);
    heap_.pop();
    return a;
  }
  uint64_t scheduled() const { return seq_; }

 private:
  struct Entry {
    SystemTime at;
    uint64_t seq;
    Action action;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  uint64_t seq_ = 0;
};

/// Minutes (hf_sim's unit) as a Duration.
inline Duration Minutes(double m) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::ratio<60>>(m));
}
/// A Duration in minutes.
inline double ToMinutes(Duration d) {
  return std::chrono::duration<double, std::ratio<60>>(d).count();
}

}  // namespace hf::sim::product
