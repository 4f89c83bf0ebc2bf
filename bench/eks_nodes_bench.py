#!/usr/bin/env python3
"""Benchmark of HyperPod clusters orchestrated by EKS on real local nodes (issue 17). Starts
`hyperfleet server --provider local --heartbeat-interval 1` with a fresh data dir, creates
one EKS cluster, then `--runs` times:

  1. HyperPod CreateCluster (one group of `--nodes` instances, Orchestrator.Eks) -> InService,
     and -> every Node Ready and labelled by Hyperfleet (node-health-status=Schedulable, label
     and annotation, no taint);
  2. (first run) the memory of each idle node: its v1 memory cgroup (usage_in_bytes, which
     counts page cache, and memory.stat's total_rss) and the summed PSS of its processes
     (kubelet, containerd, systemd, the agent...), with kubelet's and containerd's RSS;
  3. a Deployment of `--nodes` pause pods, one per node (required pod anti-affinity, HyperPod's
     node selectors), until every pod runs;
  4. one node's sandbox killed (SIGKILL of every process, as e2e_eks_nodes does), then:
     detection, the controller's first event about the instance after the kill (its
     EventTime, taken at the controller's pass); the victim's Node labelled
     UnschedulablePendingReplacement with the NoSchedule taint (and when the server logged
     that its update returned); the replacement's Node registered, then Ready and labelled
     Schedulable; the victim's pod bound to it by the scheduler; every pod running again
     (the victim's pod can only run on the replacement: one pod per node);
  5. DeleteCluster -> gone.

Node and pod times are when a `kubectl get -w` watch started before the step delivered the
change, so polling costs nothing on the 2 cores. Prints figures (median and max over the
runs) and the load average; asserts no timing. `--smoke` is one run of 2 nodes.
Needs root, the EKS node image and the Kubernetes binaries (scripts/setup --eks).

Usage: sudo tests/e2e/python.sh bench/eks_nodes_bench.py [--runs 3] [--nodes 3]
       [--binary build/bin/hyperfleet]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

HEALTH = "sagemaker.amazonaws.com/node-health-status"
ANNOTATION = "hyperfleet/node-health-status"
ON_CREATE = "#!/bin/bash\nset -euo pipefail\necho bench > /etc/lifecycle-marker\n"
# With --kubelet-args: appended to the kubelet's flags by the lifecycle script, which runs
# before the kubelet starts (as a HyperPod user's script may), for experiments.
KUBELET_ENV = "/etc/hyperfleet/kubelet.env"


class Watch:
    """`kubectl get KIND -w -o json --output-watch-events`: every change with its arrival
    time (time.time()), and the objects as of each change."""

    def __init__(self, kubectl, kind, *selector):
        self.proc = subprocess.Popen(
            kubectl.argv("get", kind, "-w", "-o", "json", "--output-watch-events", *selector),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=kubectl.env)
        self.changes = []  # (arrival time, {name: object} after the change)
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        import harness  # tests/e2e, on sys.path
        state = {}
        for now, kind, obj in harness.watch_events(self.proc.stdout):
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = obj
            with self.cond:
                self.changes.append((now, dict(state)))
                self.cond.notify_all()

    def first(self, predicate, since, timeout, what):
        """The arrival time of the first change at or after `since` (time.time()) after which
        predicate({name: object}) holds; waits for it up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for at, state in self.changes[seen:]:
                    if at >= since and predicate(state):
                        return at
                seen = len(self.changes)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
                self.cond.wait(left)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Kubectl:
    def __init__(self, binary, kubeconfig, env):
        self.binary, self.kubeconfig, self.env = binary, kubeconfig, env

    def argv(self, *args):
        return [self.binary, "--kubeconfig", self.kubeconfig, *args]

    def __call__(self, *args, stdin=None):
        r = subprocess.run(self.argv(*args), env=self.env, input=stdin, capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout


def ready(node):
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in node["status"].get("conditions", []))


def health(node):
    """(label, annotation, NoSchedule taint values) of `node`'s health."""
    taints = [t.get("value") for t in node["spec"].get("taints", [])
              if t["key"] == HEALTH and t["effect"] == "NoSchedule"]
    return (node["metadata"].get("labels", {}).get(HEALTH),
            node["metadata"].get("annotations", {}).get(ANNOTATION), taints)


def schedulable(node):
    return ready(node) and health(node) == ("Schedulable", "Schedulable", [])


def deployment(name, replicas, group):
    """`replicas` pause pods pinned by HyperPod's selectors, at most one per node."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {HEALTH: "Schedulable",
                                 "sagemaker.amazonaws.com/instance-group-name": group},
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                 [{"labelSelector": {"matchLabels": labels},
                                                   "topologyKey": "kubernetes.io/hostname"}]}},
                "terminationGracePeriodSeconds": 0,
                # The pause image every node has: no registry needed.
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.6"}],
            }},
        },
    }


def node_memory(data_dir, iid, harness):
    """MiB figures of local node `iid`: cgroup usage, cgroup total_rss, summed PSS of its
    processes, and the RSS of its kubelet and containerd."""
    with open(os.path.join(data_dir, "local", "fleet-id")) as f:
        fleet = f.read().strip()
    cg = f"/sys/fs/cgroup/memory/hyperfleet/{fleet}/{iid}"
    with open(os.path.join(cg, "memory.usage_in_bytes")) as f:
        usage = int(f.read())
    with open(os.path.join(cg, "memory.stat")) as f:
        stat = dict(line.split() for line in f)
    pss, rss = 0, {}
    for pid in harness.local_node_pids(data_dir, iid):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            name = fields["Name"].strip()
            if name in ("kubelet", "containerd"):
                rss[name] = rss.get(name, 0) + int(fields["VmRSS"].split()[0])
        except (OSError, KeyError, ValueError):
            continue  # ended meanwhile
    mib = 1 << 20
    return {"cgroup usage": usage / mib, "cgroup rss": int(stat["total_rss"]) / mib,
            "PSS sum": pss / 1024, "kubelet RSS": rss.get("kubelet", 0) / 1024,
            "containerd RSS": rss.get("containerd", 0) / 1024}


def logged_at(data_dir, text):
    """time.time() of the first server.log line holding `text` (spdlog's local-time stamp,
    millisecond precision); None when there is none."""
    with open(os.path.join(data_dir, "server.log"), errors="replace") as f:
        for line in f:
            if text in line and line.startswith("["):
                stamp = line[1:line.index("]")]
                return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + \
                    float("0" + stamp[19:])
    return None


def summary(label, values, unit="s"):
    return (f"{label}: median {statistics.median(values):.1f} {unit}, max {max(values):.1f} "
            f"{unit} over {len(values)} ({', '.join(f'{v:.1f}' for v in values)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one run of 2 nodes")
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "build", "bin", "hyperfleet"))
    ap.add_argument("--kubelet-args", default="",
                    help="extra kubelet flags, e.g. --node-status-update-frequency=2s")
    ap.add_argument("--image-dir", default=os.environ.get("HYPERFLEET_IMAGE_DIR",
                                                          "/var/lib/hyperfleet/images"))
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.nodes = 1, 2
    os.environ["HYPERFLEET_BIN"] = os.path.abspath(args.binary)
    import boto3  # noqa: E402
    import harness  # noqa: E402  (reads HYPERFLEET_BIN)

    kube_bin = harness.kubernetes_bin()
    print(f"load before: {os.getloadavg()}", flush=True)
    server = harness.Server(provider="local", extra_args=["--heartbeat-interval", "1",
                                                          "--image-dir", args.image_dir])
    bucket = os.path.join(server.data_dir, "s3", "bench-lcs", "base")
    os.makedirs(bucket)
    with open(os.path.join(bucket, "on_create.sh"), "w") as f:
        f.write(ON_CREATE)
        if args.kubelet_args:
            f.write(f"test -s {KUBELET_ENV}\n"
                    f"sed -i 's|\"$| {args.kubelet_args}\"|' {KUBELET_ENV}\n")
            print(f"kubelet flags added by the lifecycle script: {args.kubelet_args}")
    server.start()
    eks_name = f"bench-{os.getpid()}"
    session = boto3.session.Session(aws_access_key_id=harness.ACCESS_KEY,
                                    aws_secret_access_key=harness.SECRET_KEY,
                                    region_name=harness.REGION)
    eks = session.client("eks", endpoint_url=server.endpoint)
    sm = session.client("sagemaker", endpoint_url=server.endpoint)
    try:
        run_all(args, server, eks, sm, eks_name, kube_bin, harness)
    except BaseException:
        with open(os.path.join(server.data_dir, "server.log"), errors="replace") as f:
            print("server.log (end):\n" + "".join(f.readlines()[-60:]))
        raise
    finally:
        clean_up(server, sm, eks_name, harness)


def clean_up(server, sm, eks_name, harness):
    for c in sm.list_clusters()["ClusterSummaries"]:
        sm.delete_cluster(ClusterName=c["ClusterName"])
    nodes = os.path.join(server.data_dir, "local", "nodes")
    try:
        harness.wait_until(lambda: not os.path.isdir(nodes) or not os.listdir(nodes),
                           timeout=180, what="nodes removed")
    finally:
        # The server goes first, or its EKS controller would start the control plane again.
        server.stop()
        try:
            subprocess.run([harness.BINARY, "eks-control-plane", "remove", "--data-dir",
                            server.data_dir, eks_name], capture_output=True, timeout=60)
        finally:
            server.cleanup()


def run_all(args, server, eks, sm, eks_name, kube_bin, harness):
    t0 = time.monotonic()
    arn = eks.create_cluster(name=eks_name, roleArn=f"arn:aws:iam::{harness.ACCOUNT}:role/eks",
                             resourcesVpcConfig={"subnetIds": ["subnet-0bench"]},
                             accessConfig={"authenticationMode": "API"})["cluster"]["arn"]
    harness.wait_until(
        lambda: eks.describe_cluster(name=eks_name)["cluster"]["status"] == "ACTIVE",
        timeout=180, interval=0.1, what="EKS cluster ACTIVE")
    print(f"EKS CreateCluster -> ACTIVE: {time.monotonic() - t0:.1f} s "
          f"(bench/eks_bench.py for more runs)", flush=True)
    env = harness.aws_env(server.endpoint)
    kubeconfig = os.path.join(server.data_dir, "kubeconfig")
    subprocess.run(["aws", "eks", "update-kubeconfig", "--name", eks_name, "--kubeconfig",
                    kubeconfig], env=env, check=True, capture_output=True, timeout=60)
    kubectl = Kubectl(os.path.join(kube_bin, "kubectl"), kubeconfig, env)
    figures = {}
    for run in range(args.runs):
        print(f"--- run {run + 1} (load {os.getloadavg()})", flush=True)
        for key, value in one_run(args, run, server, sm, arn, kubectl, harness).items():
            figures.setdefault(key, []).append(value)
    print(f"=== {args.nodes} nodes, {args.runs} runs; load after: {os.getloadavg()}")
    for key, values in figures.items():
        print(summary(key, values))


def one_run(args, run, server, sm, arn, kubectl, harness):
    """One HyperPod cluster's life; returns {figure: seconds}."""
    name, group, n = f"hpb{run}", "workers", args.nodes
    nodes = Watch(kubectl, "nodes")
    pods = Watch(kubectl, "pods", "-l", f"app={name}")
    try:
        out = {}
        started = time.time()
        sm.create_cluster(ClusterName=name, Orchestrator={"Eks": {"ClusterArn": arn}},
                          InstanceGroups=[{
                              "InstanceGroupName": group, "InstanceType": "ml.c5.xlarge",
                              "InstanceCount": n,
                              "LifeCycleConfig": {"SourceS3Uri": "s3://bench-lcs/base/",
                                                  "OnCreate": "on_create.sh"},
                              "ExecutionRole": f"arn:aws:iam::{harness.ACCOUNT}:role/HyperPod"}])

        def in_service():
            d = sm.describe_cluster(ClusterName=name)
            if d["ClusterStatus"] in ("Failed", "RollingBack"):
                raise SystemExit(f"{name}: {d['ClusterStatus']}: {d.get('FailureMessage')}")
            return d["ClusterStatus"] == "InService"

        harness.wait_until(in_service, timeout=600, interval=0.2, what=f"{name} InService")
        out["create -> InService"] = time.time() - started
        ids = [s["InstanceId"] for s in
               sm.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]]
        mine = {f"hyperpod-{i}" for i in ids}
        labelled = nodes.first(lambda s: all(k in s and schedulable(s[k]) for k in mine),
                               started, 120, "every Node Ready and labelled")
        out["create -> every Node Ready+labelled"] = labelled - started
        print(f"InService {out['create -> InService']:.1f} s, every Node Ready and labelled "
              f"{out['create -> every Node Ready+labelled']:.1f} s", flush=True)

        if run == 0:
            time.sleep(5)  # idle: a measured settling time after the join, not synchronization
            for iid in ids:
                m = node_memory(server.data_dir, iid, harness)
                print(f"idle node {iid}: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in m.items()),
                      flush=True)

        pods_since = time.time()
        kubectl("apply", "-f", "-", stdin=json.dumps(deployment(name, n, group)))

        def all_running(s, avoid=None):
            running = [p for p in s.values() if p["status"].get("phase") == "Running"
                       and p["spec"].get("nodeName") != avoid
                       and not p["metadata"].get("deletionTimestamp")]
            return len(running) == n

        at = pods.first(all_running, pods_since, 180, "every pod running")
        print(f"Deployment applied -> {n} pods running: {at - pods_since:.1f} s", flush=True)

        victim = ids[-1]
        killed = time.time()
        for pid in harness.local_node_pids(server.data_dir, victim):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

        def detection():
            events = sm.list_cluster_events(ClusterName=name, NodeId=victim,
                                            EventTimeAfter=killed - 1)["Events"]
            found = [e for e in events if victim in e.get("Description", "")
                     and e["EventTime"].timestamp() >= killed]
            return min(found, key=lambda e: e["EventTime"]) if found else None

        event = harness.wait_until(detection, timeout=60, interval=0.2, what="detection")
        detected = event["EventTime"].timestamp()
        print(f"detected: {event['Description']}", flush=True)
        victim_node = f"hyperpod-{victim}"
        pending = ("UnschedulablePendingReplacement", "UnschedulablePendingReplacement",
                   ["UnschedulablePendingReplacement"])
        label_at = nodes.first(lambda s: victim_node in s and health(s[victim_node]) == pending,
                               killed, 60, "the victim's Node labelled and tainted")
        gone_at = nodes.first(lambda s: victim_node not in s, killed, 120, "the victim's Node gone")

        def new_node(s):
            return any(k.startswith("hyperpod-") and k not in mine and schedulable(v)
                       for k, v in s.items())

        joined = nodes.first(lambda s: any(k.startswith("hyperpod-") and k not in mine for k in s),
                             killed, 300, "the replacement's Node registered")
        ready_at = nodes.first(lambda s: any(k.startswith("hyperpod-") and k not in mine
                                             and ready(v) for k, v in s.items()),
                               killed, 300, "the replacement's Node Ready")
        new_at = nodes.first(new_node, killed, 300, "the replacement's Node Ready and labelled")
        bound = pods.first(lambda s: any(p["spec"].get("nodeName", "").startswith("hyperpod-")
                                         and p["spec"]["nodeName"] not in mine
                                         for p in s.values()),
                           killed, 300, "a pod bound to the replacement's Node")
        again = pods.first(lambda s: all_running(s, avoid=victim_node), killed, 300,
                           "every pod running again")
        # Read late: the server's log reaches server.log through a pipe, not at once.
        try:
            patched = harness.wait_until(
                lambda: logged_at(server.data_dir, f"Node {victim_node} is "
                                  "UnschedulablePendingReplacement"), timeout=10, interval=0.5,
                what="the label's log line")
        except AssertionError:
            patched = None
            with open(os.path.join(server.data_dir, "server.log"), errors="replace") as f:
                print("no label line; the server on the victim's Node:\n" +
                      "".join(line for line in f if victim_node in line), flush=True)
        out["kill -> detection"] = detected - killed
        out["detection -> Node labelled+tainted"] = label_at - detected
        if patched is not None:
            out["detection -> label PATCH returned (server log)"] = patched - detected
        out["detection -> Node removed"] = gone_at - detected
        out["detection -> new Node registered"] = joined - detected
        out["detection -> new Node Ready"] = ready_at - detected
        out["detection -> new Node Ready+labelled"] = new_at - detected
        out["detection -> pod bound to new Node"] = bound - detected
        out["detection -> pods running again"] = again - detected
        out["kill -> pods running again"] = again - killed
        print(", ".join(f"{k} {v:.1f} s" for k, v in out.items() if "detect" in k or "kill" in k),
              flush=True)

        t = time.time()
        sm.delete_cluster(ClusterName=name)

        def deleted():
            try:
                sm.describe_cluster(ClusterName=name)
                return False
            except sm.exceptions.ResourceNotFound:
                return True

        harness.wait_until(deleted, timeout=300, interval=0.5, what=f"{name} deleted")
        out["DeleteCluster -> gone"] = time.time() - t
        kubectl("delete", "deployment", name, "--wait=false")
        return out
    finally:
        nodes.stop()
        pods.stop()


if __name__ == "__main__":
    main()
