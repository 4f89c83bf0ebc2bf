#!/usr/bin/env python3
"""Real-node benchmark of the local provider (its targets, on this machine):

  - CreateCluster -> InService with a trivial lifecycle script, for each size in --sizes
    (targets on 2 cores: 3 nodes <= 5 s, 20 <= 15 s, 100 <= 60 s; node image already built);
  - memory per idle node: PSS of every process in the node (its systemd, journald, agent, ...)
    summed from /proc/<pid>/smaps_rollup (target <= 16 MiB);
  - CPU of an idle node agent over --idle-seconds (target <= 0.5% of a core).

Needs root and the node image (scripts/setup builds it). Prints one line per figure.
Usage: bench/nodes_bench.py [--sizes 3,20,100] [--idle-seconds 30] [--binary build/bin/hyperfleet]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import harness  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def node_processes(init_pid):
    """Host pids of every process in the node's PID namespace (the node's init included)."""
    ns = pid_ns(init_pid)
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and pid_ns(int(p)) == ns]


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def init_pid_of(data_dir, instance_id):
    """The node's systemd: the only child of its systemd-nspawn, found under its supervisor."""
    node_dir = os.path.join(data_dir, "local", "nodes", instance_id)
    with open(os.path.join(node_dir, "supervisor.pid")) as f:
        supervisor = int(f.read().strip())
    frontier = [supervisor]
    while frontier:
        pid = frontier.pop()
        for child in _children(pid):
            if comm(child) == "systemd" and pid_ns(child) != pid_ns(os.getpid()):
                return child
            frontier.append(child)
    raise RuntimeError(f"no systemd found under supervisor {supervisor}")


def _children(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="3,20,100")
    ap.add_argument("--idle-seconds", type=float, default=30)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("nodes_bench: needs root (the local provider creates namespaces and mounts)")

    server = harness.Server(provider="local", extra_args=["--max-instances-per-cluster", "1000"])
    bucket = os.path.join(server.data_dir, "s3", "bench", "lcs")
    os.makedirs(bucket)
    with open(os.path.join(bucket, "on_create.sh"), "w") as f:
        f.write("#!/bin/bash\necho ok from $(hostname)\n")
    server.start()
    env = harness.aws_env(server.endpoint)
    import boto3
    sm = boto3.session.Session().client(
        "sagemaker", endpoint_url=server.endpoint, region_name=harness.REGION,
        aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY)
    try:
        print(f"machine: {os.cpu_count()} CPUs; node image built; server {server.endpoint}")
        last_cluster = None
        for size in [int(s) for s in args.sizes.split(",")]:
            name = f"bench-{size}"
            t0 = time.monotonic()
            sm.create_cluster(ClusterName=name, InstanceGroups=[{
                "InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge",
                "InstanceCount": size,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bench/lcs/", "OnCreate": "on_create.sh"},
                "ExecutionRole": "arn:aws:iam::123456789012:role/Bench"}])
            status = None
            while time.monotonic() - t0 < 900:
                status = sm.describe_cluster(ClusterName=name)["ClusterStatus"]
                if status in ("InService", "Failed"):
                    break
                time.sleep(0.1)
            elapsed = time.monotonic() - t0
            print(f"create_to_inservice nodes={size} seconds={elapsed:.1f} status={status}",
                  flush=True)
            if status != "InService":
                sys.exit("nodes_bench: " + sm.describe_cluster(ClusterName=name).get(
                    "FailureMessage", "cluster did not become InService"))
            if last_cluster:
                sm.delete_cluster(ClusterName=last_cluster)
            last_cluster = name

        # Idle figures on the last cluster: let boot-time work settle first.
        nodes = sm.list_cluster_nodes(ClusterName=last_cluster, MaxResults=100)[
            "ClusterNodeSummaries"]
        time.sleep(5)
        sample = nodes[: min(len(nodes), 10)]
        pss = []
        agents = []
        for n in sample:
            init = init_pid_of(server.data_dir, n["InstanceId"])
            procs = node_processes(init)
            pss.append(sum(pss_kib(p) for p in procs) / 1024)
            agents += [p for p in procs if comm(p) == "hyperfleet"]
        print(f"idle_node_pss_mib mean={sum(pss) / len(pss):.1f} max={max(pss):.1f} "
              f"nodes_sampled={len(pss)} (node processes: systemd, journald, agent, ...)")
        before = {p: cpu_ticks(p) for p in agents}
        time.sleep(args.idle_seconds)
        used = [(cpu_ticks(p) - before[p]) / CLK_TCK for p in agents]
        pct = [100 * u / args.idle_seconds for u in used]
        print(f"idle_agent_cpu_percent mean={sum(pct) / len(pct):.3f} max={max(pct):.3f} "
              f"agents={len(pct)} window_s={args.idle_seconds:.0f}")
    finally:
        # Nodes outlive their server by design: delete every cluster before stopping it.
        try:
            for c in sm.list_clusters()["ClusterSummaries"]:
                sm.delete_cluster(ClusterName=c["ClusterName"])
            harness.wait_until(lambda: not sm.list_clusters()["ClusterSummaries"], timeout=600,
                               interval=0.5, what="clusters deleted")
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
