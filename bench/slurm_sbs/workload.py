"""The trace on Slurm: loading the JSONL trace, one trace submit as sbatch arguments, and the
replay that submits, cancels and (gov) changes quotas at the time-compressed instants."""
import concurrent.futures
import json
import math
import threading
import time

from .common import QUOTA_EVENTS, SHORT, dist, job_cpus, log


def load_trace(path):
    trace = {"events": [], "quotas": []}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            k = j["kind"]
            if k == "cluster":
                trace["cluster"] = j
            elif k == "quota":
                trace["quotas"].append(j)
            elif k in ("submit", "cancel") or k in QUOTA_EVENTS:
                trace["events"].append(j)
    return trace


def sbatch_argv(job, compression, cluster_types, profile="fifo", limits=None):
    """sbatch arguments for one trace submit (see the module docstring).

    Profile gov: the team's partitions for the job's type whose cap can hold the job (from
    SlurmCluster.gov_limits); None when there is none, i.e. the job can never run under
    Slurm-Gov's limits (a job cannot span the guaranteed and opportunistic partitions)."""
    part = SHORT.get(job["type"], job["type"].split(".")[1])
    run_s = job["runtime_ms"] / 1000.0 / compression
    minutes = max(1, math.ceil((run_s + 5) / 60))
    argv = ["sbatch", "--parsable", "-J", f"j{job['id']}", "-o", "/dev/null",
            "-e", "/dev/null", f"--time={minutes}", "--chdir=/tmp"]
    if profile == "gov":
        # Starts in whichever partition can run it first; borrowed runs get requeued.
        need = job_cpus(job, cluster_types)
        lim = (limits or {}).get((job["team"], job["type"]), {})
        parts = [lim[k][0] for k in ("g", "o") if k in lim and lim[k][1] >= need]
        if not parts:
            return None
        argv += ["-p", ",".join(parts), f"--account={lim['account'][0]}",
                 f"--qos={job['class']}", "--requeue"]
    else:
        argv += ["-p", part, f"--priority={job['prio']}", "--no-requeue"]
    pp = job.get("per_pod")
    if pp:
        t = cluster_types[job["type"]]
        cpus = max(1, pp["vcpu_milli"] // 1000)
        # vCPU and memory are the accelerator fraction of the node (no GRES; see write_config).
        argv += ["-N", "1", "-n", "1", "-c", str(min(cpus, t["vcpus"])),
                 f"--mem={max(1, pp['memory_mib'])}"]
    else:
        argv += ["-N", str(job["count"]), "--exclusive"]
    argv += ["--wrap", f"sleep {run_s:.3f}"]
    return argv


def replay(slurm, trace, compression, workers, max_wall_s, profile="fifo"):
    """Submits the trace's jobs at their compressed times; returns submission figures."""
    cluster_types = {t["name"]: t for t in trace["cluster"]["types"]}
    prio = {c["name"]: c["weight"] for c in trace["cluster"]["priority_classes"]}
    jobs = {}            # trace id -> future of the Slurm job id (or None if rejected)
    lateness = []        # s between a submit's compressed instant and sbatch's return
    rejected = []
    over_cap = []        # gov: trace ids above every cap of their team (never submitted)
    lock = threading.Lock()
    qstats = {"applied": 0, "calls": 0, "failed": [], "skipped": set(), "apply_s": [],
              "lateness_s": []}
    # One thread: quota events apply in trace order, and never hold up the sbatch workers.
    qpool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def apply_quota(ev, due):
        t = time.monotonic()
        try:
            res = slurm.apply_quota(ev)
        except Exception as e:  # counted, and the replay goes on
            with lock:
                qstats["failed"].append((ev["kind"], ev["team"], str(e)[:200]))
            return
        done = time.monotonic()
        with lock:
            qstats["applied"] += 1
            qstats["calls"] += res["calls"]
            qstats["skipped"].update(res["skipped"])
            qstats["apply_s"].append(done - t)
            qstats["lateness_s"].append(done - due)

    def quota(ev, due):
        qpool.submit(apply_quota, ev, due)

    def submit(job, due):
        argv = sbatch_argv(job, compression, cluster_types, profile, slurm.limits)
        if argv is None:
            with lock:
                over_cap.append(job["id"])
            return None
        r = slurm.run(argv, check=False, timeout=120)
        with lock:
            lateness.append(time.monotonic() - due)
            if r.returncode != 0:
                rejected.append((job["id"], r.stderr.strip()[:200]))
                return None
        return r.stdout.strip().split(";")[0]

    def cancel(fut):
        jid = fut.result()
        if jid:
            slurm.run(["scancel", "--state=PENDING", jid], check=False, timeout=60)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    t0 = time.monotonic()
    t0_wall = time.time()
    cancels = 0
    try:
        _submit_all(trace, pool, jobs, submit, cancel, t0, compression, max_wall_s, prio,
                    quota if profile == "gov" else None)
        cancels = sum(1 for ev in trace["events"] if ev["kind"] == "cancel" and ev["id"] in jobs)
    except BaseException:
        # Ctrl-C / SIGTERM: no more sbatch or sacctmgr after the daemons stop.
        pool.shutdown(wait=False, cancel_futures=True)
        qpool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    qpool.shutdown(wait=True)
    out = {"t0_wall": t0_wall, "submit_wall_s": time.monotonic() - t0,
           "submitted": sum(1 for f in jobs.values() if f.result()),
           "rejected": rejected, "over_cap": len(over_cap), "cancels": cancels,
           "lateness_s": dist(lateness)}
    if profile == "gov":
        out["quota_events"] = {
            "in_trace": sum(1 for ev in trace["events"] if ev["kind"] in QUOTA_EVENTS),
            "applied": qstats["applied"], "sacctmgr_calls": qstats["calls"],
            "failed": len(qstats["failed"]), "failed_examples": qstats["failed"][:5],
            "skipped_parts": sorted(qstats["skipped"]),
            "apply_s": dist(qstats["apply_s"]), "apply_s_total": sum(qstats["apply_s"]),
            "lateness_s": dist(qstats["lateness_s"])}
    return out


def _submit_all(trace, pool, jobs, submit, cancel, t0, compression, max_wall_s, prio,
                quota=None):
    """Queues each trace event on `pool` at its compressed instant; quota events go to
    `quota(event, due)` (skipped when it is None)."""
    for ev in trace["events"]:
        if ev["kind"] in QUOTA_EVENTS and quota is None:
            continue
        due = t0 + ev["t_ms"] / 1000.0 / compression
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        if time.monotonic() - t0 > max_wall_s:
            log("max wall time reached during submission; stopping the replay")
            break
        if ev["kind"] == "submit":
            ev["prio"] = prio.get(ev["class"], 0)
            jobs[ev["id"]] = pool.submit(submit, ev, due)
        elif ev["kind"] == "cancel" and ev["id"] in jobs:
            pool.submit(cancel, jobs[ev["id"]])
        elif ev["kind"] in QUOTA_EVENTS:
            quota(ev, due)
