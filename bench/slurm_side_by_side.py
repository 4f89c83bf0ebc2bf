#!/usr/bin/env python3
"""Replays a governance trace on a real Slurm 22.05 controller, for a ratio against our engine.

Design and results: bench/README.md ("Slurm side-by-side"). Outside CI, run as root. Needs Debian's slurmctld,
slurmd, slurm-client and munge (plus slurmdbd and mariadb-server for --profile gov), which it
does not install (see bench/README.md, "Slurm side-by-side").

What it does:
  1. `governance_trace_dump` writes the seeded trace (tier, seed) as JSONL and runs the same
     trace through our engine in virtual time (decisions per engine CPU-second, cycle
     latency, makespan, submit-to-first-admission waits), FairShare Disabled and Enabled.
  2. It starts its own munged (own key and socket), slurmctld (port 7817) and one stock
     slurmd per node on 127.0.0.1 (node i on port 27001 + i), with its own SLURM_CONF and
     state, spool and log directories under <workdir>/<profile>-<tier>. No other Slurm or
     munged on the machine is touched. Not FrontEnd mode as first planned: Debian's
     slurm-wlm-emulator binaries are FrontEnd builds linked against the distribution's
     non-FrontEnd libslurmfull, whose slurm.conf reader stops at `FrontendName` ("without
     Slurm being configured/built with the --enable-front-end option"). One slurmd per node
     costs ~7.5 MiB each, so tier S (200 nodes) fits and tier M (10,000) does not.
  3. The cluster is the trace's: one partition per instance type with the trace's node
     counts, CPUs and memory per node as the instance's. Accelerators are not a GRES: every
     trace job's vCPU and memory are its accelerator fraction of the node, so packing by vCPU
     is packing by accelerator.
  4. Profile `fifo` (Slurm-FIFO, no database): each trace submit becomes, at its
     time-compressed instant, `sbatch --wrap "sleep <runtime/compression>"` in its
     instance type's partition, whole-node gangs `-N <count> --exclusive`, sub-node jobs
     `-n 1 -c <vcpu> --mem=<MiB>`, priority = the job's priority-class weight (strict
     priority, FCFS within a class), time limit = its true runtime rounded up to whole
     minutes (helps backfill). Trace cancels become `scancel --state=PENDING`. Quotas,
     borrowing, fair share, preemption and the quota churn are not modelled.
     Profile `gov` (Slurm-Gov): its own MariaDB (own datadir, socket and port) and
     slurmdbd (own port), one account per team (fair share), a sub-account per (team,
     type) capped at nominal + borrow limit, one QOS per class (priority), and per (team,
     type) a guaranteed partition (partition QOS capped at nominal) and an opportunistic
     one (preempted by requeue) over the type's nodes: partition-priority preemption is
     reclaim. The daemons run under argv[0] "slurmctld" / "slurmd" (see
     SlurmCluster.start). Jobs above nominal + borrow limit are not submitted. The trace's
     quota events (upserts, Disabled, deletions) are replayed at their compressed instants
     as `sacctmgr modify` of the same caps and fair share (SlurmCluster.apply_quota); jobs
     left pending above their team's final caps are cancelled once the submissions end.
  5. Measures: `sdiag` every 10 s (main and backfill cycle times, queue length), slurmctld
     CPU seconds and RSS from /proc/<pid>/stat and status, per-job submit/start/end from
     jobcomp/filetxt (gov: also peak usage against every cap, from the same records); then
     prints the ratios against the engine on the same trace.

Always stops its daemons on exit (also on Ctrl-C / SIGTERM / SIGHUP): cancels its jobs, then
stops the slurmds, slurmctld (slurmdbd, MariaDB) and munged by the pids it started.

This file is the command line and the steps in order; the pieces are in bench/slurm_sbs/.

Usage: python3 bench/slurm_side_by_side.py --tier S --compression 1000
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from slurm_sbs.cluster import SlurmCluster
from slurm_sbs.common import check_prerequisites, log, proc_cpu_s, slurmds_cpu_s
from slurm_sbs.measure import SdiagSampler, analyse
from slurm_sbs.measure import cap_in_window, quota_check  # noqa: F401 (tests/bench use them)
from slurm_sbs.report import report
from slurm_sbs.workload import load_trace, replay
from slurm_sbs.workload import sbatch_argv  # noqa: F401 (tests/bench use it)


def parse_args():
    """The command line; --workdir becomes the run's own <workdir>/<profile>-<tier>."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tier", default="S", choices=["S", "M"])
    ap.add_argument("--profile", default="fifo", choices=["fifo", "gov"],
                    help="fifo: Slurm-FIFO, no database; gov: Slurm-Gov (slurmdbd + MariaDB, "
                    "accounts, QOS, partition-priority preemption)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workloads", type=int, default=-1, help="override the tier's count")
    ap.add_argument("--nodes", type=int, default=-1, help="override the tier's node count")
    ap.add_argument("--teams", type=int, default=-1, help="override the tier's team count")
    ap.add_argument("--compression", type=float, default=0,
                    help="trace seconds per wall second (0: fit the trace into --target-wall)")
    ap.add_argument("--target-wall", type=float, default=600,
                    help="wall seconds of the submission phase when --compression is 0")
    ap.add_argument("--max-wall", type=float, default=1800, help="hard limit of the replay")
    ap.add_argument("--workers", type=int, default=4, help="concurrent sbatch processes")
    ap.add_argument("--build-dir", default="build-sbs")
    ap.add_argument("--workdir", default="/tmp/hf-slurm-sbs",
                    help="root of the run directories (<workdir>/<profile>-<tier>)")
    ap.add_argument("--db-port", type=int, default=7819, help="MariaDB (profile gov)")
    ap.add_argument("--dbd-port", type=int, default=7820, help="slurmdbd (profile gov)")
    ap.add_argument("--ctld-port", type=int, default=7817)
    ap.add_argument("--slurmd-port", type=int, default=7818)
    ap.add_argument("--node-port-base", type=int, default=27001,
                    help="slurmd of node i listens on this port + i")
    # The planned parameters plus per-partition depths: without them the main scheduler and a
    # 1 s backfill pass never reach the small partitions' jobs behind a long p5 backlog.
    ap.add_argument("--sched-params", default="defer,batch_sched_delay=0,"
                    "sched_min_interval=100000,default_queue_depth=1000,"
                    "partition_job_depth=250,bf_interval=1,bf_continue,bf_max_job_test=5000,"
                    "bf_max_job_part=500,max_rpc_cnt=64")
    ap.add_argument("--engine-check", type=int, default=None,
                    help="invariant checker in the engine run (default: on for S, off for M)")
    args = ap.parse_args()
    args.workdir = os.path.join(args.workdir, f"{args.profile}-{args.tier}")
    return args


def prepare_workdir(args):
    """Checks what the run needs (slurmd count, Debian's programs, governance_trace_dump, no
    slurmctld of ours still running) and empties the run's directory; exits when something
    is missing. Returns the path of governance_trace_dump."""
    if args.nodes > 2000 or (args.nodes < 0 and args.tier == "M"):
        sys.exit("one slurmd per node (~7.5 MiB, one process each): use --nodes <= 2000")
    missing = check_prerequisites(args.profile)
    if missing:
        sys.exit("missing: " + ", ".join(missing) + "\ninstall: apt-get install slurmctld "
                 "slurmd slurm-client munge [slurmdbd mariadb-server] (see bench/README.md)")
    dump = os.path.join(args.build_dir, "bin", "governance_trace_dump")
    if not os.access(dump, os.X_OK):
        sys.exit(f"{dump} not found: ninja -C {args.build_dir} governance_trace_dump")
    pidfile = os.path.join(args.workdir, "slurmctld.pid")
    if os.path.exists(pidfile):
        try:
            with open(pidfile) as f:
                os.kill(int(f.read().strip()), 0)
            sys.exit(f"a slurmctld of {args.workdir} is still running (pid file {pidfile})")
        except (ValueError, ProcessLookupError):
            pass
    if os.path.exists(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)
    return dump


def run_engine(args, dump):
    """Step 1: the trace and the engine's figures on it (governance_trace_dump). Returns
    (trace, engine figures, compression)."""
    trace_path = os.path.join(args.workdir, "trace.jsonl")
    engine_path = os.path.join(args.workdir, "engine.json")
    check = args.engine_check if args.engine_check is not None else int(args.tier == "S")
    cmd = [dump, "--tier", args.tier, "--seed", str(args.seed), "--out", trace_path,
           "--engine-out", engine_path, "--modes", "fcfs,fair", "--check", str(check)]
    for opt in ("workloads", "nodes", "teams"):
        if getattr(args, opt) >= 0:
            cmd += [f"--{opt}", str(getattr(args, opt))]
    log("engine: " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    trace = load_trace(trace_path)
    with open(engine_path) as f:
        engine = json.load(f)
    horizon_s = max(e["t_ms"] for e in trace["events"]) / 1000.0
    compression = args.compression or max(1.0, horizon_s / args.target_wall)
    log(f"trace: {sum(1 for e in trace['events'] if e['kind'] == 'submit')} submits over "
        f"{horizon_s / 3600:.1f} h; compression x{compression:.0f} "
        f"(submission ~{horizon_s / compression:.0f} s wall)")
    return trace, engine, compression


def measure_slurm(slurm, args, trace, compression):
    """Steps 2 to 5 on a started cluster: samples sdiag, replays the trace, drains the queue
    and returns the Slurm figures (analyse, plus the CPU of slurmdbd and MariaDB and what
    the driver cancelled)."""
    sampler = SdiagSampler(slurm)
    sampler.sample()
    ctld = slurm.pid("slurmctld")
    cpu0 = proc_cpu_s(ctld)
    slurmd_cpu0 = slurmds_cpu_s(slurm)
    sampler.start()
    db0 = {n: proc_cpu_s(slurm.pid(n)) or 0 for n in ("slurmdbd", "mariadbd")}
    sub = replay(slurm, trace, compression, args.workers, args.max_wall, args.profile)
    log(f"submitted {sub['submitted']} ({len(sub['rejected'])} rejected) in "
        f"{sub['submit_wall_s']:.0f} s; lateness p50 {sub['lateness_s']['p50']:.2f} s "
        f"p99 {sub['lateness_s']['p99']:.2f} s; draining")
    drained, never_fit, unrunnable = drain(slurm, args, trace, sub)
    end_wall = time.time()
    time.sleep(1)  # MinJobAge, and the last jobcomp records
    sampler.stop_event.set()
    sampler.sample()
    ctld_cpu = proc_cpu_s(ctld) - cpu0
    slurmd_cpu = slurmds_cpu_s(slurm) - slurmd_cpu0
    db_cpu = {n: (proc_cpu_s(slurm.pid(n)) or 0) - db0[n] for n in db0 if slurm.pid(n)}
    out = analyse(slurm, trace, sub, sampler.samples, ctld_cpu, slurmd_cpu, compression,
                  drained, end_wall)
    out["db_cpu_s"] = db_cpu
    out["never_fit_cancelled"] = never_fit
    if args.profile == "gov":
        out["above_final_caps_cancelled"] = unrunnable
    return out


def drain(slurm, args, trace, sub):
    """Waits until the queue is empty (or --max-wall after the replay's start), cancelling the
    jobs that can never start. Returns (drained, never-fit cancelled, above final caps
    cancelled)."""
    deadline = time.monotonic() - sub["submit_wall_s"] + args.max_wall
    drained = False
    never_fit = unrunnable = 0
    submits = {f"j{e['id']}": e for e in trace["events"] if e["kind"] == "submit"}
    types = {t["name"]: t for t in trace["cluster"]["types"]}
    while time.monotonic() < deadline:
        r = slurm.run(["squeue", "-h", "-o", "%i|%t|%r|%j"], check=False, timeout=60)
        if r.returncode == 0 and not r.stdout.strip():
            drained = True
            break
        # Gangs larger than their partition pend forever (Slurm's never-fit): end them.
        # Gov: so do jobs above their team's final caps (shrunk, Disabled or deleted).
        stuck, capped = [], []
        for f in (line.split("|") for line in r.stdout.split("\n")):
            if len(f) < 4 or f[1] != "PD":
                continue
            if f[2] == "PartitionNodeLimit":
                stuck.append(f[0])
            elif (args.profile == "gov" and f[3] in submits
                  and not slurm.runnable(submits[f[3]], types)):
                capped.append(f[0])
        if stuck or capped:
            never_fit += len(stuck)
            unrunnable += len(capped)
            slurm.run(["scancel"] + stuck + capped, check=False, timeout=60)
        time.sleep(2)
    return drained, never_fit, unrunnable


def main():
    args = parse_args()
    dump = prepare_workdir(args)
    trace, engine, compression = run_engine(args, dump)
    slurm = SlurmCluster(args.workdir, trace["cluster"], args.ctld_port, args.slurmd_port,
                         args.node_port_base, args.sched_params, args.profile,
                         trace["quotas"], compression, args.db_port, args.dbd_port)

    def on_signal(signum, _frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    result = {"tier": args.tier, "seed": args.seed, "compression": compression,
              "profile": args.profile, "workloads": args.workloads, "engine": engine}
    try:
        slurm.write_config()
        slurm.start()
        log(f"slurm up: {slurm.conf} (slurmctld pid {slurm.pid('slurmctld')}, "
            f"{len(slurm.slurmd_pids())} slurmd)")
        result["slurm"] = measure_slurm(slurm, args, trace, compression)
    finally:
        slurm.stop()
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)
    report(result)


if __name__ == "__main__":
    main()
