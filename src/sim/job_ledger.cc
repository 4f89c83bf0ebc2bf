#include "hyperfleet/sim/job_ledger.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace hf::sim {

const char* ToString(Loss l) {
  static constexpr const char* kNames[] = {
      "checkpoint", "rework",  "detection", "localization", "wait_node", "restart",
      "fail_slow",  "sdc_rollback", "planned", "human", "idle"};
  return kNames[static_cast<int>(l)];
}

StopClass StopClassOf(DetectClass c) { return static_cast<StopClass>(static_cast<int>(c)); }

const char* ToString(StopClass c) {
  static constexpr const char* kNames[] = {"D1", "D2", "D3", "D4", "D5", "planned"};
  return kNames[static_cast<int>(c)];
}

JobLedger::JobLedger(CheckpointPolicy policy) : policy_(policy) {
  if (!(policy_.interval_min > 0)) throw std::invalid_argument("interval_min must be > 0");
  if (policy_.cost_min < 0 || policy_.persist_window_min < 0) {
    throw std::invalid_argument("cost_min and persist_window_min must be >= 0");
  }
}

void JobLedger::AddSegment(double start, double end, double work) {
  if (!(end > start) || !(work > 0)) return;
  segments_.push_back(Segment{start, end, work / (end - start)});
}

void JobLedger::DropWork(double work) {
  while (work > 1e-12 && !segments_.empty()) {
    Segment& s = segments_.back();
    const double have = s.density * (s.end - s.start);
    if (have <= work) {
      work -= have;
      segments_.pop_back();
    } else {
      s.end -= work / s.density;
      work = 0;
    }
  }
}

void JobLedger::Advance(double t) {
  if (t < now_) throw std::invalid_argument("JobLedger: time went backwards");
  double dt = t - now_;
  if (!running_) {
    loss_[static_cast<int>(phase_)] += dt;
    now_ = t;
    return;
  }
  const double tau = policy_.interval_min, delta = policy_.cost_min, f = factor_;
  const bool async = policy_.persist_window_min > 0;
  double work = 0;
  // The persist window of an async checkpoint elapses with wall time.
  auto elapse = [&](double piece) {
    if (pending_work_ > 0) {
      persist_left_ -= piece;
      if (persist_left_ <= 0) {
        since_durable_ -= pending_work_;
        pending_work_ = 0;
        post_in_since_ = std::min(post_in_since_, since_durable_);
      }
    }
  };
  auto complete_checkpoint = [&] {
    if (pending_work_ > 0) since_durable_ -= pending_work_;  // the previous one is durable
    pending_work_ = 0;
    persist_left_ = 0;
    // A checkpoint taken after a silent corruption is durable but bad: a later fault restarts
    // from it, the corruption's detection rolls back past it (rb_pre_, rb_post_).
    if (async) {
      pending_work_ = since_durable_;
      persist_left_ = policy_.persist_window_min;
    } else {
      since_durable_ = 0;
    }
    post_in_since_ = std::min(post_in_since_, since_durable_);
    cycle_work_ = 0;
    stall_done_ = 0;
  };
  auto do_work = [&](double w) {
    work += w;
    cycle_work_ += w;
    since_durable_ += w;
    if (corrupt_) {
      rb_post_ += w;
      post_in_since_ += w;
    }
  };
  const double cycle_wall = tau * f + delta;
  while (dt > 1e-12) {
    if (cycle_work_ >= tau - 1e-12) {  // in the stall
      const double r = delta - stall_done_;
      if (dt < r) {
        stall_done_ += dt;
        loss_[static_cast<int>(Loss::kCheckpoint)] += dt;
        elapse(dt);
        dt = 0;
        break;
      }
      loss_[static_cast<int>(Loss::kCheckpoint)] += r;
      elapse(r);
      dt -= r;
      complete_checkpoint();
      continue;
    }
    if (cycle_work_ == 0 && dt >= cycle_wall) {
      // Whole cycles in bulk: the state after each completion is periodic.
      const double k = std::floor(dt / cycle_wall);
      if (pending_work_ > 0) since_durable_ -= pending_work_;
      pending_work_ = 0;
      persist_left_ = 0;
      work += k * tau;
      loss_[static_cast<int>(Loss::kCheckpoint)] += k * delta;
      if (async) {
        since_durable_ = k == 1 ? since_durable_ + tau : tau;
        pending_work_ = since_durable_;
        persist_left_ = policy_.persist_window_min;
      } else {
        since_durable_ = 0;
      }
      if (corrupt_) {
        rb_post_ += k * tau;
        post_in_since_ = since_durable_;  // all of it done after the corruption
      }
      dt -= k * cycle_wall;
      continue;
    }
    const double need = (tau - cycle_work_) * f;  // wall to finish this cycle's work
    const double piece = std::min(dt, need);
    do_work(piece >= need ? tau - cycle_work_ : piece / f);
    if (piece >= need) cycle_work_ = tau;
    elapse(piece);
    dt -= piece;
  }
  loss_[static_cast<int>(Loss::kFailSlow)] += work * (f - 1.0);
  productive_ += work;
  AddSegment(now_, t, work);
  now_ = t;
}

void JobLedger::Run(double t) {
  Advance(t);
  if (running_) return;
  if (has_stop_) {
    interruptions_.push_back(Interruption{stop_at_, t - stop_at_, stop_cls_});
    has_stop_ = false;
  }
  running_ = true;
  cycle_work_ = stall_done_ = since_durable_ = pending_work_ = persist_left_ = post_in_since_ = 0;
}

void JobLedger::SetSlowdown(double t, double factor) {
  Advance(t);
  factor_ = std::max(1.0, factor);
}

void JobLedger::Corrupt(double t) {
  Advance(t);
  if (!running_ || corrupt_) return;
  corrupt_ = true;
  rb_pre_ = since_durable_;
  rb_post_ = 0;
  post_in_since_ = 0;
}

void JobLedger::RollBack() {
  const double lost = rb_pre_ + rb_post_;
  loss_[static_cast<int>(Loss::kSdcRollback)] += rb_post_;
  loss_[static_cast<int>(Loss::kRework)] += rb_pre_;
  productive_ -= lost;
  DropWork(lost);
  corrupt_ = false;
  rb_pre_ = rb_post_ = post_in_since_ = since_durable_ = 0;
}

void JobLedger::Stop(double t, StopClass cls, Loss phase) {
  Advance(t);
  phase_ = phase;
  if (cls == StopClass::kD5 && corrupt_) {
    RollBack();
  } else if (running_ && cls != StopClass::kPlanned) {
    const double lost = since_durable_;
    loss_[static_cast<int>(Loss::kRework)] += lost;
    productive_ -= lost;
    DropWork(lost);
    if (corrupt_) {  // the part of it done after the corruption is no longer to roll back
      rb_post_ -= post_in_since_;
      rb_pre_ -= std::min(rb_pre_, lost - post_in_since_);
      post_in_since_ = 0;
    }
  }
  if (!running_) return;
  running_ = false;
  has_stop_ = true;
  stop_at_ = t;
  stop_cls_ = cls;
}

void JobLedger::Phase(double t, Loss phase) {
  Advance(t);
  if (!running_) phase_ = phase;
}

void JobLedger::Finish(double t) {
  Advance(t);
  if (corrupt_) RollBack();  // corrupted work never found is still not productive
  end_ = t;
  if (!running_ && has_stop_) {
    interruptions_.push_back(Interruption{stop_at_, t - stop_at_, stop_cls_});
    has_stop_ = false;
  }
  running_ = false;
  phase_ = Loss::kIdle;
}

double JobLedger::MinWindowEttr(double window_min) const {
  const double span = end_ - start_;
  if (span <= window_min) return span > 0 ? productive_ / span : 1.0;
  // The window's work is piecewise linear in its start a: the minimum lies where a or
  // a + window meets a segment boundary. Both candidate lists are ascending, so two cursors
  // walk the segments once.
  std::vector<double> bounds;
  bounds.reserve(2 * segments_.size() + 2);
  bounds.push_back(start_);
  for (const Segment& s : segments_) {
    bounds.push_back(s.start);
    bounds.push_back(s.end);
  }
  bounds.push_back(end_);
  std::vector<double> cand(bounds.size() * 2);
  for (size_t i = 0; i < bounds.size(); ++i) {
    cand[i] = bounds[i];
    cand[bounds.size() + i] = bounds[i] - window_min;
  }
  std::inplace_merge(cand.begin(), cand.begin() + static_cast<long>(bounds.size()), cand.end());
  // P(x), work done in [start_, x], for non-decreasing x.
  struct Cursor {
    const std::vector<Segment>& seg;
    size_t i = 0;
    double before = 0;  // work of segments [0, i)
    double At(double x) {
      while (i < seg.size() && seg[i].end <= x) {
        before += seg[i].density * (seg[i].end - seg[i].start);
        ++i;
      }
      if (i < seg.size() && seg[i].start < x) return before + seg[i].density * (x - seg[i].start);
      return before;
    }
  };
  Cursor lo{segments_}, hi{segments_};
  double best = 1e300;
  for (double a : cand) {
    a = std::clamp(a, start_, end_ - window_min);
    best = std::min(best, (hi.At(a + window_min) - lo.At(a)) / window_min);
  }
  return best;
}

}  // namespace hf::sim
