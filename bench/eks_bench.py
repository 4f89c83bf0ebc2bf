#!/usr/bin/env python3
"""Benchmark of EKS clusters (issue 17, part one: the control planes). Starts `hyperfleet
server --provider fake` with a fresh data dir and, through boto3's EKS client:

  1. CreateCluster -> ACTIVE, `--runs` times one after another (each deleted before the next):
     seconds until DescribeCluster says ACTIVE (polled every 0.1 s: the control plane's
     etcd, kube-apiserver, controller-manager and scheduler start and /readyz answers);
  2. two clusters created at once: seconds until both are ACTIVE;
  3. the resident memory (VmRSS) of each process of one idle control plane (etcd,
     kube-apiserver, kube-controller-manager, kube-scheduler, the supervisor), after 10 s;
  4. DeleteCluster -> gone (ListClusters no longer lists it; every process ended).
Prints figures; asserts no timing. Needs the Kubernetes binaries of scripts/kubernetes and
etcd (scripts/setup --eks).

Usage: bench/eks_bench.py [--runs 3] [--binary build/bin/hyperfleet]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

ROLE = "arn:aws:iam::123456789012:role/eks-bench"
VPC = {"subnetIds": ["subnet-0bench"]}


def processes_under(directory):
    """{pid: (name, VmRSS in KiB)} of processes whose working directory is below
    `directory`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if not (cwd + "/").startswith(directory.rstrip("/") + "/"):
                continue
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            rss = int(fields.get("VmRSS", "0 kB").split()[0])
            found[int(pid)] = (fields["Name"].strip(), rss)
        except (OSError, KeyError, ValueError):
            continue
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="sequential CreateCluster -> ACTIVE")
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "build", "bin", "hyperfleet"))
    args = ap.parse_args()
    os.environ["HYPERFLEET_BIN"] = os.path.abspath(args.binary)
    import boto3  # noqa: E402
    import harness  # noqa: E402  (reads HYPERFLEET_BIN)

    print(f"Kubernetes binaries: {harness.kubernetes_bin()}", flush=True)
    with harness.Server(provider="fake") as server:
        eks = boto3.session.Session().client(
            "eks", endpoint_url=server.endpoint, region_name=harness.REGION,
            aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY)
        eks_dir = os.path.join(server.data_dir, "eks")

        def create(name):
            eks.create_cluster(name=name, roleArn=ROLE, resourcesVpcConfig=VPC,
                               accessConfig={"authenticationMode": "API"})

        def active(name):
            status = eks.describe_cluster(name=name)["cluster"]["status"]
            if status == "FAILED":
                sys.exit(f"{name} FAILED")
            return status == "ACTIVE"

        def delete_and_wait(name):
            t0 = time.monotonic()
            eks.delete_cluster(name=name)
            harness.wait_until(lambda: name not in eks.list_clusters()["clusters"],
                               timeout=120, interval=0.1, what=f"{name} gone")
            gone = time.monotonic() - t0
            left = processes_under(os.path.join(eks_dir, name))
            return gone, left

        try:
            times = []
            for i in range(args.runs):
                name = f"bench-{i}"
                t0 = time.monotonic()
                create(name)
                harness.wait_until(lambda: active(name), timeout=300, interval=0.1,
                                   what=f"{name} ACTIVE")
                times.append(time.monotonic() - t0)
                print(f"CreateCluster -> ACTIVE, run {i + 1}: {times[-1]:.1f} s", flush=True)
                if i < args.runs - 1:
                    gone, left = delete_and_wait(name)
                    print(f"DeleteCluster -> gone: {gone:.1f} s; processes left: {len(left)}",
                          flush=True)
            print(f"CreateCluster -> ACTIVE: median {statistics.median(times):.1f} s, "
                  f"max {max(times):.1f} s over {len(times)} runs")

            t0 = time.monotonic()
            create("pair-a")
            create("pair-b")
            harness.wait_until(lambda: active("pair-a") and active("pair-b"), timeout=300,
                               interval=0.1, what="both ACTIVE")
            print(f"two clusters created at once -> both ACTIVE: {time.monotonic() - t0:.1f} s")

            idle = f"bench-{args.runs - 1}"
            time.sleep(10)  # idle: a measured settling time, not synchronization
            procs = processes_under(os.path.join(eks_dir, idle))
            total = 0
            for pid, (name, rss) in sorted(procs.items(), key=lambda p: -p[1][1]):
                print(f"  idle control plane {idle}: {name:24} {rss / 1024:7.1f} MiB")
                total += rss
            print(f"idle control plane memory: {total / 1024:.0f} MiB in {len(procs)} processes")

            for name in (idle, "pair-a", "pair-b"):
                gone, left = delete_and_wait(name)
                print(f"DeleteCluster {name} -> gone: {gone:.1f} s; processes left: {len(left)}")
        finally:
            for c in eks.list_clusters()["clusters"]:
                eks.delete_cluster(name=c)
            harness.wait_until(lambda: not eks.list_clusters()["clusters"], timeout=120,
                               interval=0.2, what="every cluster gone")


if __name__ == "__main__":
    main()
