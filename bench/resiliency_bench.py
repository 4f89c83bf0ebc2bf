#!/usr/bin/env python3
"""Node recovery benchmark on real local nodes (its targets, on this machine):

  - detection latency: fault -> the control plane's event naming it (Dead / Unresponsive);
  - recovery latency: detection -> the replacement idle (or running the job) in Slurm;
  - resume latency: detection -> the interrupted job running again (requeued, same job id).

For each cluster size in --sizes (controller + workers from examples/lifecycle/) and each
fault in --faults (kill: SIGKILL a worker's whole sandbox; freeze: SIGSTOP every process of
a worker), --repeats faults are injected into a job spanning every worker
(`sbatch --requeue -N <workers> --wrap 'srun sleep 3600'`). Prints one line per fault and
the median and maximum per (size, fault). Targets on 2 cores: dead node detected <= 3 s,
hung node <= 15 s; replacement idle in Slurm <= 10 s after detection; job running again
<= 15 s after detection.

Needs root and the node image (scripts/setup builds it).
Usage: bench/resiliency_bench.py [--sizes 3,20] [--faults kill,freeze] [--repeats 3]
                                 [--binary build/bin/hyperfleet]
"""
import argparse
import calendar
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

TARGETS = {"kill": 3.0, "freeze": 15.0}  # detection, seconds
RECOVERY_TARGET = 10.0
RESUME_TARGET = 15.0


class Fleet:
    def __init__(self, binary, workers):
        self.binary = binary
        self.server = harness.Server(provider="local",
                                     extra_args=["--heartbeat-interval", "1"])
        shutil.copytree(os.path.join(REPO, "examples", "lifecycle"),
                        os.path.join(self.server.data_dir, "s3", "bench", "lcs"))
        self.server.start()
        self.env = harness.aws_env(self.server.endpoint)
        self.name = f"resiliency-{workers}"
        spec = harness.cluster_spec(self.name, [("controller", "ml.c5.xlarge", 1),
                                                ("workers", "ml.c5.xlarge", workers)])
        for g in spec["InstanceGroups"]:
            g["LifeCycleConfig"]["SourceS3Uri"] = "s3://bench/lcs/"
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        t0 = time.time()
        arn = self.aws("sagemaker", "create-cluster", "--cli-input-json", f"file://{f.name}")
        os.unlink(f.name)
        self.cluster_id = arn["ClusterArn"].rsplit("/", 1)[1]
        status = harness.wait_until(
            lambda: self.describe()["ClusterStatus"] in ("InService", "Failed") and
            self.describe()["ClusterStatus"], timeout=900, interval=1, what="InService")
        if status != "InService":
            raise SystemExit(f"cluster {self.name}: {self.describe().get('FailureMessage')}")
        print(f"# {self.name}: 1 controller + {workers} workers InService in "
              f"{time.time() - t0:.1f} s", flush=True)

    def aws(self, *args):
        out = subprocess.run(["aws", "--endpoint-url", self.server.endpoint, "--output", "json",
                              *args], env=self.env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def describe(self):
        return self.aws("sagemaker", "describe-cluster", "--cluster-name", self.name)

    def nodes(self):
        out, token = [], None
        while True:
            args = ["sagemaker", "list-cluster-nodes", "--cluster-name", self.name]
            if token:
                args += ["--next-token", token]
            page = self.aws(*args)
            out += page["ClusterNodeSummaries"]
            token = page.get("NextToken")
            if not token:
                return out

    def controller(self):
        return next(n["InstanceId"] for n in self.nodes() if n["InstanceGroupName"] == "controller")

    def on_controller(self, command):
        target = f"sagemaker-cluster:{self.cluster_id}_controller-{self.controller()}"
        r = subprocess.run([self.binary, "ssm", "start-session", "--endpoint-url",
                            self.server.endpoint, "--target", target, "--command", command],
                           env=self.env, capture_output=True, text=True, timeout=60)
        return r.stdout

    def hostnames(self, running_only=False):
        """{instance id: hostname} of the workers (Running ones only, if asked)."""
        out = {}
        for n in self.nodes():
            if n["InstanceGroupName"] != "workers":
                continue
            if running_only and n["InstanceStatus"]["Status"] != "Running":
                continue
            d = self.aws("sagemaker", "describe-cluster-node", "--cluster-name", self.name,
                         "--node-id", n["InstanceId"])["NodeDetails"]
            if d.get("PrivateDnsHostname"):
                out[n["InstanceId"]] = d["PrivateDnsHostname"].split(".")[0]
        return out

    def slurm_states(self):
        rows = {}
        for line in self.on_controller("sinfo -N -h -p dev -o '%N|%T'").split():
            name, state = line.split("|")
            rows[name] = state
        return rows

    def job_state(self, job):
        """(state, restarts) of a job from scontrol."""
        out = self.on_controller(f"scontrol show job {job} -o")
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        return fields.get("JobState"), int(fields.get("Restarts", "0"))

    def node_pids(self, iid):
        return harness.local_node_pids(self.server.data_dir, iid)

    def inject(self, fault, iid):
        sig = signal.SIGKILL if fault == "kill" else signal.SIGSTOP
        for _ in range(1 if fault == "kill" else 3):
            for pid in self.node_pids(iid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def detection_time(self, iid, since):
        kind = {"kill": "Dead", "freeze": "Unresponsive"}
        events = self.aws("sagemaker", "list-cluster-events", "--cluster-name", self.name,
                          "--sort-order", "Descending", "--max-results", "100")["Events"]
        for e in events:
            d = e.get("Description", "")
            if iid in d and any(d.startswith(k + " on instance") for k in kind.values()):
                t = e["EventTime"]
                t = float(t) if isinstance(t, (int, float)) else \
                    __import__("datetime").datetime.fromisoformat(t).timestamp()
                if t >= since - 1:
                    return t
        return None

    def close(self):
        try:
            self.aws("sagemaker", "delete-cluster", "--cluster-name", self.name)
            harness.wait_until(lambda: not any(c["ClusterName"] == self.name for c in self.aws(
                "sagemaker", "list-clusters")["ClusterSummaries"]), timeout=300, interval=1,
                what="cluster deleted")
        finally:
            self.server.stop()
            self.server.cleanup()


def event_times(fleet):
    """[(epoch seconds, description)] of the cluster's latest 100 events."""
    out = []
    for e in fleet.aws("sagemaker", "list-cluster-events", "--cluster-name", fleet.name,
                       "--sort-order", "Descending", "--max-results", "100")["Events"]:
        t = e["EventTime"]
        t = float(t) if isinstance(t, (int, float)) else \
            __import__("datetime").datetime.fromisoformat(t).timestamp()
        out.append((t, e.get("Description", "")))
    return out


def run_fault(fleet, workers, fault):
    """Injects one fault; returns (detection, recovery, resume) latencies in seconds, from
    the control plane's event times and Slurm's own job start time (no polling error)."""
    job = fleet.on_controller(
        f"sbatch --parsable --requeue -N {workers} -o /dev/null --wrap 'srun sleep 3600'").strip()
    harness.wait_until(lambda: fleet.job_state(job)[0] == "RUNNING", timeout=120, interval=0.5,
                       what=f"job {job} running")
    hosts = fleet.hostnames()
    iid = sorted(hosts)[len(hosts) // 2]
    t0 = time.time()
    fleet.inject(fault, iid)
    detected = harness.wait_until(lambda: fleet.detection_time(iid, t0), timeout=60,
                                  interval=0.2, what="detection")

    def replacement_running():
        new = None
        for t, d in event_times(fleet):
            if d.startswith(f"Replacing instance {iid} with "):
                new = d.split()[4]
        if new is None:
            return None
        for t, d in event_times(fleet):
            if d.startswith(f"Instance {new} is running in group"):
                return t
        return None
    # The replacement's lifecycle scripts succeed once Slurm shows it idle (the example
    # setup_slurmd.sh waits for that), so "is running" is when it is idle in Slurm.
    recovered = harness.wait_until(replacement_running, timeout=180, interval=1,
                                   what="the replacement running")

    def restarted():
        out = fleet.on_controller(f"scontrol show job {job} -o")
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        if fields.get("JobState") != "RUNNING" or int(fields.get("Restarts", "0")) < 1:
            return None
        return calendar.timegm(time.strptime(fields["StartTime"], "%Y-%m-%dT%H:%M:%S"))
    try:
        resumed = harness.wait_until(restarted, timeout=180, interval=1,
                                     what="the job running again")
    except AssertionError:
        # What a reader needs to see why, before the cluster is deleted.
        print(fleet.on_controller(f"scontrol show job {job}; sinfo -N; "
                                  "tail -n 80 /var/log/slurm/slurmctld.log"), flush=True)
        for t, d in event_times(fleet)[-30:]:
            print(f"event {t:.1f} {d}", flush=True)
        raise
    fleet.on_controller(f"scancel {job}")
    harness.wait_until(lambda: all(s == "idle" for s in fleet.slurm_states().values()),
                       timeout=120, interval=0.5, what="every node idle again")
    return detected - t0, recovered - detected, resumed - detected


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="3,20", help="cluster sizes (controller included)")
    p.add_argument("--faults", default="kill,freeze")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--binary", default=os.path.join(REPO, "build", "bin", "hyperfleet"))
    a = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (real nodes)")
    # Interrupted: still delete the cluster (nodes outlive the server otherwise).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("HYPERFLEET_BIN", os.path.abspath(a.binary))
    summary = []
    for size in [int(s) for s in a.sizes.split(",")]:
        workers = size - 1
        fleet = Fleet(os.path.abspath(a.binary), workers)
        try:
            for fault in a.faults.split(","):
                rows = []
                for k in range(a.repeats):
                    d, r, s = run_fault(fleet, workers, fault)
                    rows.append((d, r, s))
                    print(f"size {size:3d} {fault:6s} #{k + 1}: detection {d:5.1f} s, "
                          f"replacement idle {r:5.1f} s after, job running again "
                          f"{s:5.1f} s after", flush=True)
                summary.append((size, fault, rows))
        finally:
            fleet.close()
    print("\n# medians (max) in seconds; detection from the fault, the rest from detection")
    print(f"{'size':>4} {'fault':6} {'detection':>16} {'replacement idle':>18} "
          f"{'job running again':>18}  targets")
    for size, fault, rows in summary:
        cols = []
        for i in range(3):
            vals = [r[i] for r in rows]
            cols.append(f"{statistics.median(vals):6.1f} ({max(vals):5.1f})")
        ok = (max(r[0] for r in rows) <= TARGETS[fault] and
              max(r[1] for r in rows) <= RECOVERY_TARGET and
              max(r[2] for r in rows) <= RESUME_TARGET)
        print(f"{size:4d} {fault:6} {cols[0]:>16} {cols[1]:>18} {cols[2]:>18}  "
              f"{'PASS' if ok else 'MISS'} (<= {TARGETS[fault]:.0f} / {RECOVERY_TARGET:.0f} / "
              f"{RESUME_TARGET:.0f} s)")


if __name__ == "__main__":
    main()
