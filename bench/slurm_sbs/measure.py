"""What a run measures on Slurm: sdiag samples, the jobcomp records, usage against
Slurm-Gov's caps, and the figures of the run (analyse)."""
import os
import re
import threading
import time

from .common import dist, epoch, log, proc_cpu_s, proc_rss_mib


class SdiagSampler(threading.Thread):
    """Runs `sdiag` every `period` s; keeps the parsed samples."""

    def __init__(self, slurm, period=10.0):
        super().__init__(daemon=True)
        self.slurm, self.period = slurm, period
        self.samples = []
        self.stop_event = threading.Event()

    @staticmethod
    def parse(text):
        out, section = {}, "general"
        for line in text.split("\n"):
            if line.startswith("Main schedule statistics"):
                section = "main"
            elif line.startswith("Backfilling stats"):
                section = "bf"
            elif line.startswith("Remote Procedure Call") or line.startswith("Latency"):
                section = "rpc"
            m = re.match(r"\s*([A-Za-z][A-Za-z /()]*?):\s+(\d+)\s*$", line)
            if m and section != "rpc":
                out[f"{section}.{m.group(1).strip()}"] = int(m.group(2))
        return out

    def sample(self):
        r = self.slurm.run(["sdiag"], check=False, timeout=30)
        if r.returncode == 0:
            s = self.parse(r.stdout)
            s["t"] = time.time()
            ctld = self.slurm.pid("slurmctld")
            s["ctld_cpu_s"] = proc_cpu_s(ctld) if ctld else None
            s["ctld_rss_mib"] = proc_rss_mib(ctld) if ctld else None
            s["slurmd_rss_mib"] = sum(proc_rss_mib(p) or 0 for p in self.slurm.slurmd_pids())
            self.samples.append(s)

    def run(self):
        while not self.stop_event.wait(self.period):
            try:
                self.sample()
            except Exception as e:  # a slow sdiag must not end the run
                log(f"sdiag failed: {e}")


def parse_jobcomp(path):
    """{job name: [record dicts]} from a jobcomp/filetxt log (key=value per line)."""
    recs = {}
    if not os.path.exists(path):
        return recs
    with open(path) as f:
        for line in f:
            kv = dict(re.findall(r"(\w+)=(\S*)", line))
            if "Name" in kv:
                recs.setdefault(kv["Name"], []).append(kv)
    return recs


def cap_in_window(log, lo, hi):
    """The highest cap of a cap log ([(wall time, cap)], time-ordered, first at 0) in force
    at any time of [lo, hi]."""
    best = None
    for t, cap in log:
        if t <= lo:
            best = cap
        elif t <= hi:
            best = cap if best is None else max(best, cap)
    return best if best is not None else log[0][1]


def quota_check(recs, limits, cap_log, slack_s=2.0):
    """Over-admission against Slurm-Gov's caps, from jobcomp records (1 s resolution).

    For every partition and sub-account of `limits` (SlurmCluster.gov_limits; the
    sub-account is the (team, type) as a whole, cap nominal + borrow limit): the peak vCPUs
    of the runs that overlapped, and how many run starts took usage above the cap in force
    at the start. Caps come from `cap_log` (SlurmCluster.cap_log, keyed by QOS or
    sub-account name; quota events change them); near a change (± slack_s wall seconds,
    the records' resolution plus the change's own time) the higher cap counts. Usage above
    a lowered cap by runs that started before is not an excess (decreases never evict).
    Ends are applied before starts of the same second; runs that start and end within one
    second are left out. Returns {"starts_over_cap": n, "teams_over_cap": n,
    "worst": [(key, peak, cap in force at the peak)]}."""
    logs = {}
    part_key = {}
    for (team, tname), lim in limits.items():
        for tier in ("g", "o"):
            if tier in lim:
                logs[lim[tier][0]] = cap_log[lim[tier][0]]
                part_key[lim[tier][0]] = (team, tname)
        logs[(team, tname)] = cap_log[lim["account"][0]]
    events = {}
    for rs in recs.values():
        for r in rs:
            part = r.get("Partition")
            st, en = epoch(r.get("StartTime")), epoch(r.get("EndTime"))
            if part not in logs or r.get("NodeCnt", "0") == "0" or not st or not en or en <= st:
                continue
            cpus = int(r.get("ProcCnt", "0") or 0)
            for key in (part, part_key[part]):
                events.setdefault(key, []).extend([(en, 0, -cpus), (st, 1, cpus)])
    over, teams_over, worst = 0, 0, []
    for key, evs in events.items():
        use = peak = n = 0
        peak_cap = logs[key][0][1]
        for t, _kind, d in sorted(evs):
            use += d
            if d <= 0:
                continue
            cap = cap_in_window(logs[key], t - slack_s, t + 1 + slack_s)
            if use > cap:
                n += 1
            if use > peak:
                peak, peak_cap = use, cap
        if isinstance(key, str):
            over += n
        elif n:
            teams_over += 1
        worst.append((key if isinstance(key, str) else "/".join(key), peak, peak_cap))
    worst.sort(key=lambda w: w[1] / max(1, w[2]), reverse=True)
    return {"starts_over_cap": over, "teams_over_cap": teams_over, "worst": worst[:5]}


def analyse(slurm, trace, sub, samples, ctld_cpu, slurmd_cpu, compression, drained, end_wall):
    recs = parse_jobcomp(slurm.jobcomp)
    submits = {f"j{e['id']}": e for e in trace["events"] if e["kind"] == "submit"}
    waits, by_class, starts, ends = [], {}, [], []
    states = {}
    cancelled_pending = 0
    for name, rs in recs.items():
        e = submits.get(name)
        if e is None:
            continue
        for r in rs:
            states[r.get("JobState")] = states.get(r.get("JobState"), 0) + 1
        # A job cancelled while pending has a record with StartTime = the cancel and no nodes.
        ran = [r for r in rs if epoch(r.get("StartTime")) and r.get("NodeCnt", "0") != "0"]
        first = min(ran, key=lambda r: epoch(r["StartTime"]), default=None)
        if first is None:
            cancelled_pending += 1
            continue
        st, sb = epoch(first["StartTime"]), epoch(first.get("SubmitTime"))
        if st is None or sb is None or st <= 0:
            continue
        starts.append(st)
        w = (st - sb) * compression  # trace seconds
        waits.append(w)
        by_class.setdefault(e["class"], []).append(w)
        for r in ran:
            en = epoch(r.get("EndTime"))
            if en:
                ends.append(en)
    last = samples[-1] if samples else {}
    main_means = [s["main.Mean cycle"] for s in samples if "main.Mean cycle" in s]
    out = {
        "drained": drained,
        "submission": {k: v for k, v in sub.items() if k != "rejected"},
        "rejected": len(sub["rejected"]),
        "rejected_examples": sub["rejected"][:5],
        "jobs_started": len(starts),
        "cancelled_pending": cancelled_pending,
        "jobcomp_states": states,
        "ctld_cpu_s": ctld_cpu,
        "slurmd_cpu_s": slurmd_cpu,
        "ctld_rss_mib_max": max((s.get("ctld_rss_mib") or 0) for s in samples) if samples else 0,
        "slurmd_rss_mib_max": max((s.get("slurmd_rss_mib") or 0) for s in samples)
        if samples else 0,
        "started_per_ctld_cpu_s": len(starts) / ctld_cpu if ctld_cpu else 0,
        "wall_s": end_wall - sub["t0_wall"],
        "started_per_wall_s": len(starts) / (end_wall - sub["t0_wall"]),
        "makespan_s": ((max(ends) - sub["t0_wall"]) * compression) if ends else 0,
        "wait_s": dist(waits),
        "wait_s_by_class": {c: dist(v) for c, v in by_class.items()},
        "sdiag_main": {"mean_cycle_us": last.get("main.Mean cycle"),
                       "max_cycle_us": last.get("main.Max cycle"),
                       "total_cycles": last.get("main.Total cycles"),
                       "mean_of_sampled_means_us": sum(main_means) / len(main_means)
                       if main_means else None,
                       "max_last_queue_length": max((s.get("main.Last queue length") or 0)
                                                    for s in samples) if samples else 0},
        "sdiag_backfill": {"mean_cycle_us": last.get("bf.Mean cycle"),
                           "max_cycle_us": last.get("bf.Max cycle"),
                           "total_cycles": last.get("bf.Total cycles"),
                           "total_backfilled": last.get(
                               "bf.Total backfilled jobs (since last slurm start)")},
        "sdiag_samples": len(samples),
    }
    if slurm.limits:
        out["quota"] = quota_check(recs, slurm.limits, slurm.cap_log)
        out["over_cap_not_submitted"] = sub.get("over_cap", 0)
        out["preempted_runs"] = states.get("PREEMPTED", 0) + states.get("REQUEUED", 0)
    return out
