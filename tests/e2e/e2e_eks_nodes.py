"""HyperPod clusters orchestrated by EKS, end to end (docs/kubernetes.md): an EKS cluster made
with boto3 becomes ACTIVE with a real control plane; a HyperPod cluster attached to it with
Orchestrator.Eks (two worker groups, no controller group) boots its instances from the EKS
node image on the local provider, runs the lifecycle scripts before containerd and the
kubelet (the scripts move /var/lib/kubelet, as HyperPod's EKS base-config does), and each
instance joins as Node hyperpod-<instance id> with HyperPod's labels before it counts as
Running. kubectl (through `aws eks update-kubeconfig`) schedules a Deployment by HyperPod's
node selectors and reads its logs. Pod networking: each Node's pod range is routed to its node
(the cluster's own table, for what comes from its bridge), a pod pings a pod on the other node, and a ClusterIP
Service reaches a pod on the other node from a node's kube-proxy rules; the routes follow a
replaced node and go with the cluster. Health: a killed instance's Node shows
UnschedulablePendingReplacement with HyperPod's fault labels (seen by a `kubectl get -w`
watch), the instance is replaced, its Node deleted and the pod runs again on the replacement's
Node; a user's PendingReboot label and BatchRebootClusterNodes each reboot an instance, whose
Node stays (UnschedulablePendingReboot, then Schedulable again without fault labels).
HyperPod's checks refuse an unknown ClusterArn, an EKS cluster whose authenticationMode is
CONFIG_MAP and a group without LifeCycleConfig. Deleting the HyperPod cluster removes its
Nodes; deleting the EKS clusters leaves no process. Needs root, the node image and the
Kubernetes binaries (scripts/setup --eks); skipped otherwise, failed under CI."""

import calendar
import glob
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import boto3

from harness import (ACCOUNT, BINARY, EKS_ROLE as ROLE, EKS_VPC as VPC, REGION, ACCESS_KEY,
                     SECRET_KEY, Server, aws_env, gone, kubernetes_bin, local_node_pids, main,
                     wait_until, watch_events)

IMAGE_DIR = os.environ.get("HYPERFLEET_IMAGE_DIR", "/var/lib/hyperfleet/images")

# What HyperPod's EKS base-config does before the kubelet starts (node-contract: it moves
# /var/lib/kubelet under /opt/sagemaker with a symlink), plus proof of the order.
ON_CREATE = textwrap.dedent("""\
    #!/bin/bash
    set -euo pipefail
    if systemctl is-active --quiet kubelet || systemctl is-active --quiet containerd; then
      echo "kubelet or containerd already running before the lifecycle scripts" >&2
      exit 1
    fi
    test -s /var/lib/kubelet/kubeconfig
    mkdir -p /opt/sagemaker
    mv /var/lib/kubelet /opt/sagemaker/kubelet
    ln -s /opt/sagemaker/kubelet /var/lib/kubelet
    echo "lifecycle ran on $(hostname)" > /etc/lifecycle-marker
    """)

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "pinned", "namespace": "default"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "pinned"}},
        "template": {
            "metadata": {"labels": {"app": "pinned"}},
            "spec": {
                "nodeSelector": {
                    "sagemaker.amazonaws.com/node-health-status": "Schedulable",
                    "sagemaker.amazonaws.com/instance-group-name": "workers-b"},
                # The pause image every node has: the pod needs no registry.
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.6"}],
            },
        },
    },
}


# An ICMP echo with a raw socket (the host has no ping), run inside a pod's netns: exit 0
# when `argv[1]` answers within two seconds.
ICMP_ECHO = textwrap.dedent("""\
    import socket, struct, sys
    def csum(b):
        s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        s = (s >> 16) + (s & 0xffff)
        return ~(s + (s >> 16)) & 0xffff
    head = struct.pack("!BBHHH", 8, 0, 0, 0x4846, 1)
    packet = struct.pack("!BBHHH", 8, 0, csum(head + b"hyperfleet"), 0x4846, 1) + b"hyperfleet"
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.settimeout(2)
    sock.sendto(packet, (sys.argv[1], 0))
    while True:
        data, peer = sock.recvfrom(2048)
        if peer[0] == sys.argv[1] and data[20] == 0:
            sys.exit(0)
    """)

POD_ROUTE_PROTO = "151"  # src/provider/local/cluster_network.h kPodRouteProtocol

# HyperPod's Node labels (docs/kubernetes.md "Health on Nodes"); the fault keys are the
# server's defaults (--kubernetes-fault-labels, --kubernetes-fault-details-annotation).
HEALTH = "sagemaker.amazonaws.com/node-health-status"
FAULT_TYPES = "sagemaker.amazonaws.com/fault-types"
FAULT_REASONS = "sagemaker.amazonaws.com/fault-reasons"
FAULT_DETAILS = "sagemaker.amazonaws.com/fault-details"
LABEL_VALUE = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$"


def pod_route_table(network):
    """The routing table of a cluster's pod routes (cluster_network.h PodRouteTable), from
    its network.json."""
    base = int.from_bytes(bytes(int(p) for p in network["subnet"].split("/")[0].split(".")),
                          "big")
    return str(0x48000000 + (base >> 10))


def pod_routes(network):
    """{pod range: node address} of Hyperfleet's routes of a cluster now ({} when none)."""
    r = subprocess.run(["ip", "-j", "-4", "route", "show", "table", pod_route_table(network),
                        "proto", POD_ROUTE_PROTO], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    return {route["dst"]: route.get("gateway") for route in json.loads(r.stdout or "[]")
            if route.get("dev") in (None, network["bridge"])}


def pod_route_rules(network):
    """Hyperfleet's `ip rule`s for the cluster's bridge."""
    rules = json.loads(subprocess.run(["ip", "-j", "-4", "rule", "show"], capture_output=True,
                                      text=True, check=True).stdout or "[]")
    return [r for r in rules if r.get("iif") == network["bridge"]]


class RouteWatch(threading.Thread):
    """Notes when each pod route first shows on the server's cluster bridges, and every
    change of them (every 0.1 s)."""

    def __init__(self, data_dir):
        super().__init__(daemon=True)
        self.data_dir, self.first_seen, self.stop = data_dir, {}, threading.Event()
        self.changes, self.last = [], None

    def run(self):
        while not self.stop.wait(0.1):
            now = {}
            for path in glob.glob(os.path.join(self.data_dir, "local", "clusters", "*",
                                               "network.json")):
                try:
                    with open(path) as f:
                        network = json.load(f)
                    routes = pod_routes(network)
                except (OSError, ValueError, KeyError):
                    continue
                for cidr, via in routes.items():
                    self.first_seen.setdefault(cidr, time.time())
                    now[cidr] = via
            if now != self.last:
                self.changes.append((time.strftime("%H:%M:%S"), now))
                self.last = now


class NodeWatch(threading.Thread):
    """`kubectl get nodes -w -o json --output-watch-events`: every Node event as (type,
    object), in arrival order; the Nodes as they were when it started come first (ADDED), so
    nothing after that is missed however briefly it lasted."""

    def __init__(self, kubectl_argv, env):
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(
            kubectl_argv + ["get", "nodes", "-w", "-o", "json", "--output-watch-events"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.events, self.lock = [], threading.Lock()
        self.start()

    def run(self):
        for _, kind, obj in watch_events(self.proc.stdout):
            with self.lock:
                self.events.append((kind, obj))

    def of(self, name):
        """The events of Node `name` so far: [(type, object)]."""
        with self.lock:
            return [(t, o) for t, o in self.events if o["metadata"]["name"] == name]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def fault_labels(node):
    """(fault-types, fault-reasons, fault-details) of a Node object; None for each absent."""
    labels = node["metadata"].get("labels") or {}
    annotations = node["metadata"].get("annotations") or {}
    return (labels.get(FAULT_TYPES), labels.get(FAULT_REASONS), annotations.get(FAULT_DETAILS))


class EksNodesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        cls.kubernetes_bin = kubernetes_bin()

    def test_hyperpod_cluster_on_eks(self):
        server = Server(provider="local",
                        extra_args=["--heartbeat-interval", "2", "--image-dir", IMAGE_DIR])
        bucket = os.path.join(server.data_dir, "s3", "eks-lcs", "base")
        os.makedirs(bucket)
        with open(os.path.join(bucket, "on_create.sh"), "w") as f:
            f.write(ON_CREATE)
        server.start()
        try:
            self.exercise(server)
        except BaseException:
            with open(os.path.join(server.data_dir, "server.log"), errors="replace") as f:
                print("server.log (end):\n" + "".join(f.readlines()[-80:]))
            raise
        finally:
            self.clean_up(server)

    def clean_up(self, server):
        env = aws_env(server.endpoint)
        subprocess.run(["aws", "sagemaker", "delete-cluster", "--cluster-name", "hp"], env=env,
                       capture_output=True, timeout=60)
        nodes = os.path.join(server.data_dir, "local", "nodes")
        try:
            wait_until(lambda: not os.path.isdir(nodes) or not os.listdir(nodes), timeout=120,
                       what="nodes removed")
        finally:
            # A control plane outlives the server: never leave one running. The server goes
            # first, or its EKS controller would start the control plane again.
            server.stop()
            for name in ("k1", "k2"):
                subprocess.run([BINARY, "eks-control-plane", "remove", "--data-dir",
                                server.data_dir, name], capture_output=True, timeout=60)
            server.cleanup()

    def exercise(self, server):
        env = aws_env(server.endpoint)
        session = boto3.session.Session(aws_access_key_id=ACCESS_KEY,
                                        aws_secret_access_key=SECRET_KEY, region_name=REGION)
        eks = session.client("eks", endpoint_url=server.endpoint)
        sm = session.client("sagemaker", endpoint_url=server.endpoint)
        arn = eks.create_cluster(name="k1", roleArn=ROLE, resourcesVpcConfig=VPC,
                                 version="1.31",
                                 accessConfig={"authenticationMode": "API"})["cluster"]["arn"]
        # A CONFIG_MAP-only EKS cluster, for HyperPod's check below; it starts beside k1 and
        # goes before the HyperPod cluster's nodes boot.
        config_map_arn = eks.create_cluster(
            name="k2", roleArn=ROLE, resourcesVpcConfig=VPC, version="1.31",
            accessConfig={"authenticationMode": "CONFIG_MAP",
                          "bootstrapClusterCreatorAdminPermissions": True})["cluster"]["arn"]
        wait_until(lambda: eks.describe_cluster(name="k1")["cluster"]["status"] == "ACTIVE",
                   timeout=120, interval=0.5, what="k1 ACTIVE")

        groups = [{
            "InstanceGroupName": name, "InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
            "LifeCycleConfig": {"SourceS3Uri": "s3://eks-lcs/base/", "OnCreate": "on_create.sh"},
            "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/HyperPodRole",
        } for name in ("workers-a", "workers-b")]
        # HyperPod's checks, each a ValidationException naming the field.
        for arn_given, words in ((arn.replace(":cluster/k1", ":cluster/none"), "no EKS cluster"),
                                 ("arn:aws:eks:us-west-2:000000000000:cluster/k1",
                                  "no EKS cluster")):
            with self.assertRaises(sm.exceptions.ClientError) as cm:
                sm.create_cluster(ClusterName="bad", InstanceGroups=groups,
                                  Orchestrator={"Eks": {"ClusterArn": arn_given}})
            self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
            self.assertIn(words, cm.exception.response["Error"]["Message"])
        no_lcc = [dict(groups[0])]
        del no_lcc[0]["LifeCycleConfig"]
        with self.assertRaises(sm.exceptions.ClientError) as cm:
            sm.create_cluster(ClusterName="bad", InstanceGroups=no_lcc,
                              Orchestrator={"Eks": {"ClusterArn": arn}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("LifeCycleConfig", cm.exception.response["Error"]["Message"])
        wait_until(lambda: eks.describe_cluster(name="k2")["cluster"]["status"] == "ACTIVE",
                   timeout=120, interval=0.5, what="k2 ACTIVE")
        with self.assertRaises(sm.exceptions.ClientError) as cm:
            sm.create_cluster(ClusterName="bad", InstanceGroups=groups,
                              Orchestrator={"Eks": {"ClusterArn": config_map_arn}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("Orchestrator.Eks.ClusterArn", cm.exception.response["Error"]["Message"])
        self.assertIn("CONFIG_MAP", cm.exception.response["Error"]["Message"])
        eks.delete_cluster(name="k2")  # waited for at the end

        started = time.monotonic()
        watch = RouteWatch(server.data_dir)
        watch.start()
        self.addCleanup(watch.stop.set)
        sm.create_cluster(ClusterName="hp", InstanceGroups=groups,
                          Orchestrator={"Eks": {"ClusterArn": arn}})

        def in_service():
            status = sm.describe_cluster(ClusterName="hp")["ClusterStatus"]
            self.assertNotIn(status, ("Failed", "RollingBack"),
                             sm.describe_cluster(ClusterName="hp").get("FailureMessage"))
            return status == "InService"

        # The first EKS cluster of a host builds the EKS node image (a minute or two).
        wait_until(in_service, timeout=420, interval=1, what="hp InService")
        print(f"[ metric ] HyperPod cluster on EKS, 2 nodes: InService in "
              f"{time.monotonic() - started:.1f} s (EKS node image build included when cold)")
        summaries = sm.list_cluster_nodes(ClusterName="hp")["ClusterNodeSummaries"]
        self.assertEqual(len(summaries), 2)
        by_group = {s["InstanceGroupName"]: s["InstanceId"] for s in summaries}

        kubeconfig = os.path.join(server.data_dir, "kubeconfig")
        subprocess.run(["aws", "eks", "update-kubeconfig", "--name", "k1", "--kubeconfig",
                        kubeconfig], env=env, check=True, capture_output=True, timeout=60)

        kubectl_argv = [os.path.join(self.kubernetes_bin, "kubectl"), "--kubeconfig", kubeconfig]

        def kubectl(*args, check=True):
            r = subprocess.run([*kubectl_argv, *args], env=env, capture_output=True, text=True,
                               timeout=120)
            if check and r.returncode != 0:
                raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
            return r

        # Every instance is a Ready Node named as on HyperPod, with HyperPod's labels.
        nodes = {n["metadata"]["name"]: n
                 for n in json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]}
        self.assertEqual(sorted(nodes), sorted(f"hyperpod-{i}" for i in by_group.values()))
        for group, iid in by_group.items():
            node = nodes[f"hyperpod-{iid}"]
            labels = node["metadata"]["labels"]
            self.assertEqual(labels.get("sagemaker.amazonaws.com/node-health-status"),
                             "Schedulable")
            self.assertEqual(labels.get("sagemaker.amazonaws.com/instance-group-name"), group)
            self.assertEqual(labels.get("node.kubernetes.io/instance-type"), "ml.c5.xlarge")
            self.assertEqual(labels.get("sagemaker.amazonaws.com/cluster-name"), "hp")
            self.assertEqual(labels.get("sagemaker.amazonaws.com/compute-type"), "hyperpod")
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            self.assertEqual(ready[0]["status"], "True")
            addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
            details = sm.describe_cluster_node(ClusterName="hp", NodeId=iid)["NodeDetails"]
            self.assertEqual(addresses.get("InternalIP"), details["PrivatePrimaryIp"])

        # A Deployment pinned by HyperPod's node selectors runs on workers-b's node.
        manifest = os.path.join(server.data_dir, "deployment.json")
        with open(manifest, "w") as f:
            json.dump(DEPLOYMENT, f)
        kubectl("apply", "-f", manifest)
        pod = {}

        def running():
            items = json.loads(kubectl("get", "pods", "-l", "app=pinned", "-o",
                                       "json").stdout)["items"]
            if items and items[0]["status"].get("phase") == "Running":
                pod.update(items[0])
                return True
            return False

        wait_until(running, timeout=120, interval=1, what="the pinned pod Running")
        self.assertEqual(pod["spec"]["nodeName"], f"hyperpod-{by_group['workers-b']}")
        self.assertTrue(pod["status"].get("podIP", "").startswith("10.200."), pod["status"])
        # kubectl logs reaches the kubelet (an empty log is fine: pause prints nothing).
        kubectl("logs", pod["metadata"]["name"])

        cluster_id = sm.describe_cluster(ClusterName="hp")["ClusterArn"].rsplit("/", 1)[1]
        with open(os.path.join(server.data_dir, "local", "clusters", cluster_id,
                               "network.json")) as f:
            network = json.load(f)
        self.check_pod_network(server, kubectl, by_group, pod, network, watch)

        self.check_health(server, sm, kubectl, lambda: NodeWatch(kubectl_argv, env), by_group,
                          pod)
        # The replacement's pod range replaced the killed node's route.
        wait_until(lambda: pod_routes(network) == self.wanted_routes(kubectl), timeout=30,
                   interval=0.5, what="pod routes after the replacement")
        self.assertEqual(len(pod_routes(network)), 2, watch.changes)

        # Deleting the HyperPod cluster removes its Nodes.
        sm.delete_cluster(ClusterName="hp")

        wait_until(lambda: gone(sm.describe_cluster, sm.exceptions.ResourceNotFound,
                                ClusterName="hp"), timeout=180, interval=1, what="hp deleted")
        left = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        self.assertEqual([n["metadata"]["name"] for n in left], [])
        # The pod routes went with the cluster's bridge, and their rule with them.
        self.assertEqual(pod_routes(network), {})
        self.assertEqual(pod_route_rules(network), [])
        self.assertFalse(os.path.exists(f"/sys/class/net/{network['bridge']}"))

        eks.delete_cluster(name="k1")

        for name in ("k1", "k2"):
            wait_until(lambda: gone(eks.describe_cluster,
                                    eks.exceptions.ResourceNotFoundException, name=name),
                       timeout=60, interval=0.5, what=f"{name} deleted")
        left = subprocess.run(["pgrep", "-f", os.path.join(server.data_dir, "eks")],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "")

    @staticmethod
    def wanted_routes(kubectl):
        """{pod range: InternalIP} of every Node with a pod range."""
        nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        return {n["spec"]["podCIDR"]: [a["address"] for a in n["status"]["addresses"]
                                       if a["type"] == "InternalIP"][0]
                for n in nodes if n["spec"].get("podCIDR")}

    def check_pod_network(self, server, kubectl, by_group, pod, network, watch):
        """Each Node's pod range routed to its node, for what comes in from the cluster's
        bridge; a pod reaches a pod on the other node, and a ClusterIP Service reaches it
        from the other node."""
        wanted = self.wanted_routes(kubectl)
        self.assertEqual(len(wanted), 2)
        wait_until(lambda: pod_routes(network) == wanted, timeout=30, interval=0.2,
                   what="both pod routes on the bridge")
        self.assertEqual(len(pod_route_rules(network)), 1)
        nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        # When the controller-manager gave each range: its log's "Set node X PodCIDR to"
        # line (klog: "I1203 01:05:33.123456 ...", UTC on this host, no year).
        given = {}
        log = os.path.join(server.data_dir, "eks", "k1", "logs", "kube-controller-manager.log")
        with open(log, errors="replace") as f:
            for line in f:
                if "Set node " in line and " PodCIDR to " in line:
                    name = line.split("Set node ", 1)[1].split()[0]
                    day = time.strftime("%Y") + line[1:5] + line[6:14]
                    given[name] = (calendar.timegm(time.strptime(day, "%Y%m%d%H:%M:%S")) +
                                   float("0" + line[14:21]))
        for n in nodes:
            name = n["metadata"]["name"]
            seen = watch.first_seen.get(n["spec"]["podCIDR"])
            if seen is not None and name in given:
                print(f"[ metric ] Node {name} given its pod range -> route present: "
                      f"{seen - given[name]:.1f} s")

        # A second pod, on workers-a's node (the pinned one is on workers-b's).
        peer = dict(DEPLOYMENT, metadata={"name": "peer", "namespace": "default"})
        peer = json.loads(json.dumps(peer).replace('"pinned"', '"peer"'))
        peer["spec"]["template"]["spec"]["nodeSelector"][
            "sagemaker.amazonaws.com/instance-group-name"] = "workers-a"
        manifest = os.path.join(server.data_dir, "peer.json")
        with open(manifest, "w") as f:
            json.dump(peer, f)
        kubectl("apply", "-f", manifest)
        other = {}

        def peer_running():
            items = json.loads(kubectl("get", "pods", "-l", "app=peer", "-o",
                                       "json").stdout)["items"]
            if items and items[0]["status"].get("phase") == "Running":
                other.update(items[0])
                return True
            return False

        wait_until(peer_running, timeout=120, interval=1, what="the peer pod Running")
        self.assertEqual(other["spec"]["nodeName"], f"hyperpod-{by_group['workers-a']}")

        def pause_pid(iid, ip):
            """The host pid of the pause process of node `iid` whose netns holds `ip`."""
            for pid in local_node_pids(server.data_dir, iid):
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if f.read().strip() != "pause":
                            continue
                except OSError:
                    continue
                r = subprocess.run(["nsenter", "-t", str(pid), "-n", "ip", "-4", "-o", "addr"],
                                   capture_output=True, text=True)
                if f" {ip}/" in r.stdout:
                    return pid
            raise AssertionError(f"no pause process of {iid} has {ip}")

        a_ip, b_ip = other["status"]["podIP"], pod["status"]["podIP"]
        a_pid = pause_pid(by_group["workers-a"], a_ip)
        b_pid = pause_pid(by_group["workers-b"], b_ip)
        pinged = time.monotonic()
        ping = {}

        def answered():
            ping["r"] = subprocess.run(["nsenter", "-t", str(a_pid), "-n", sys.executable, "-c",
                                        ICMP_ECHO, b_ip], capture_output=True, text=True,
                                       timeout=30)
            return ping["r"].returncode == 0

        try:
            wait_until(answered, timeout=15, interval=0.1, what=f"pod {a_ip} -> pod {b_ip}")
        except AssertionError as e:
            raise AssertionError(f"{e}: {ping['r'].stderr}; routes: {watch.changes}") from None
        print(f"[ metric ] pod -> pod on another node: answered after "
              f"{time.monotonic() - pinged:.1f} s")

        # A Service: a listener in the pinned pod's netns (workers-b), reached through its
        # ClusterIP from workers-a's node (kube-proxy's rules there).
        served = tempfile.mkdtemp(dir=server.data_dir)
        with open(os.path.join(served, "hello"), "w") as f:
            f.write("across nodes\n")
        listener = subprocess.Popen(
            ["nsenter", "-t", str(b_pid), "-n", sys.executable, "-m", "http.server", "8080",
             "--bind", b_ip, "--directory", served],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            kubectl("expose", "deployment", "pinned", "--name", "pinned", "--port", "80",
                    "--target-port", "8080")
            cluster_ip = json.loads(kubectl("get", "service", "pinned", "-o",
                                            "json").stdout)["spec"]["clusterIP"]
            fetch = textwrap.dedent(f"""\
                import urllib.request
                print(urllib.request.urlopen("http://{cluster_ip}/hello", timeout=2).read()
                      .decode(), end="")
                """)
            with open(os.path.join(server.data_dir, "local", "fleet-id")) as f:
                netns = f"/run/netns/hf-{f.read().strip()}-{by_group['workers-a']}"
            # The node forwards pod traffic between eth0 and cni0 (the CNI bridge plugin,
            # isGateway, turns forwarding on in the node's namespace).
            forwarding = subprocess.run(["nsenter", f"--net={netns}", "cat",
                                         "/proc/sys/net/ipv4/ip_forward"],
                                        capture_output=True, text=True)
            self.assertEqual(forwarding.stdout.strip(), "1")
            got = {}

            def reached():
                r = subprocess.run(["nsenter", f"--net={netns}", sys.executable, "-c", fetch],
                                   capture_output=True, text=True, timeout=30)
                got["out"] = r.stdout + r.stderr
                return r.returncode == 0 and r.stdout == "across nodes\n"

            # kube-proxy writes the Service's rules within its sync period.
            try:
                wait_until(reached, timeout=60, interval=0.5,
                           what=f"Service {cluster_ip} from workers-a's node")
            except AssertionError as e:
                raise AssertionError(f"{e}; last answer: {got.get('out')}") from None
        finally:
            listener.terminate()
            listener.wait(timeout=10)
        kubectl("delete", "service", "pinned")
        kubectl("delete", "deployment", "peer")

    def check_health(self, server, sm, kubectl, watch_nodes, by_group, pod):
        """HyperPod's health on Nodes: a killed instance's Node shows PendingReplacement with
        the fault labels, the instance is replaced and its Node with it, the pod runs again
        on the new Node; a user's PendingReboot label and BatchRebootClusterNodes reboot an
        instance, whose Node stays and is Schedulable again without fault labels.
        `watch_nodes()` starts a NodeWatch."""
        def node(name):
            r = kubectl("get", "node", name, "-o", "json", check=False)
            return json.loads(r.stdout) if r.returncode == 0 else None

        def health(n):
            labels = n["metadata"].get("labels", {})
            taints = [t for t in n["spec"].get("taints", [])
                      if t["key"] == "sagemaker.amazonaws.com/node-health-status"]
            ready = [c["status"] for c in n["status"].get("conditions", [])
                     if c["type"] == "Ready"]
            return (labels.get("sagemaker.amazonaws.com/node-health-status"),
                    n["metadata"].get("annotations", {}).get("hyperfleet/node-health-status"),
                    [t.get("value") for t in taints], ready == ["True"])

        # Hyperfleet marks its own label once the node runs.
        wait_until(lambda: health(node(f"hyperpod-{by_group['workers-a']}")) ==
                   ("Schedulable", "Schedulable", [], True),
                   timeout=30, interval=0.5, what="workers-a marked Schedulable")

        # A killed instance (the pod's) is replaced; its Node goes, the replacement joins and
        # the pod runs again there. The watch sees the Node's labels before it goes (they and
        # the deletion come in the same pass).
        old = by_group["workers-b"]
        watch = watch_nodes()
        self.addCleanup(watch.stop)
        wait_until(lambda: watch.of(f"hyperpod-{old}"), timeout=30, interval=0.2,
                   what="the Node watch started")
        killed = time.monotonic()
        for pid in local_node_pids(server.data_dir, old):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        fresh = {}

        def replaced():
            nodes = sm.list_cluster_nodes(ClusterName="hp",
                                          InstanceGroupNameContains="workers-b")
            running = [s for s in nodes["ClusterNodeSummaries"]
                       if s["InstanceStatus"]["Status"] == "Running" and s["InstanceId"] != old]
            if running:
                fresh["id"] = running[0]["InstanceId"]
            return bool(running)

        wait_until(replaced, timeout=240, interval=1, what="workers-b replaced")
        print(f"[ metric ] kill -> replacement Running (Node Ready): "
              f"{time.monotonic() - killed:.1f} s")
        self.assertIsNone(node(f"hyperpod-{old}"))
        wait_until(lambda: any(t == "DELETED" for t, _ in watch.of(f"hyperpod-{old}")),
                   timeout=30, interval=0.2, what="the watch told of the Node's deletion")
        watch.stop()
        seen = [o for _, o in watch.of(f"hyperpod-{old}")]
        shown = [o for o in seen if health(o)[0] == "UnschedulablePendingReplacement" and
                 fault_labels(o)[0] is not None]
        self.assertTrue(shown, [((o["metadata"].get("labels") or {}).get(HEALTH),
                                 fault_labels(o)) for o in seen])
        fault_type, fault_reason, fault_details = fault_labels(shown[0])
        # Killed: the provider sees it stopped (Dead), or its agent falls silent first.
        self.assertIn(fault_type, ("Dead", "Unresponsive"))
        self.assertRegex(fault_reason, LABEL_VALUE)
        self.assertTrue(fault_details)
        self.assertEqual(health(shown[0])[2], ["UnschedulablePendingReplacement"])
        moved = {}

        def rescheduled():
            items = json.loads(kubectl("get", "pods", "-l", "app=pinned", "-o",
                                       "json").stdout)["items"]
            running = [p for p in items if p["status"].get("phase") == "Running"]
            if running:
                moved.update(running[0])
            return bool(running)

        wait_until(rescheduled, timeout=120, interval=1, what="the pod running again")
        print(f"[ metric ] kill -> pod running again: {time.monotonic() - killed:.1f} s")
        self.assertEqual(moved["spec"]["nodeName"], f"hyperpod-{fresh['id']}")
        self.assertNotEqual(moved["metadata"]["name"], pod["metadata"]["name"])

        # A user's PendingReboot label reboots the instance; its Node stays.
        name = f"hyperpod-{by_group['workers-a']}"
        kubectl("label", "node", name, "--overwrite",
                "sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReboot")
        def node_events(iid):
            pages = sm.get_paginator("list_cluster_events").paginate(ClusterName="hp",
                                                                      NodeId=iid)
            return [e for page in pages for e in page["Events"]]

        def rebooting():
            events = node_events(by_group["workers-a"])
            return any(e["Description"].startswith(f"Rebooting instance {by_group['workers-a']}")
                       for e in events)

        # A local node reboots in about a second: the label and taint between are checked in
        # kubernetes_plan_test; here the reboot itself and the state after it.
        wait_until(rebooting, timeout=30, interval=0.5, what="the reboot taken up")
        wait_until(lambda: health(node(name)) == ("Schedulable", "Schedulable", [], True),
                   timeout=240, interval=1, what="workers-a Schedulable after its reboot")
        nodes = sm.list_cluster_nodes(ClusterName="hp", InstanceGroupNameContains="workers-a")
        self.assertEqual([s["InstanceId"] for s in nodes["ClusterNodeSummaries"]],
                         [by_group["workers-a"]])
        events = node_events(by_group["workers-a"])
        self.assertTrue(any("was labelled sagemaker.amazonaws.com/node-health-status="
                            "UnschedulablePendingReboot" in e["Description"] for e in events))
        self.check_batch_reboot(sm, node, health, node_events, watch_nodes, by_group["workers-a"])

    def check_batch_reboot(self, sm, node, health, node_events, watch_nodes, iid):
        """BatchRebootClusterNodes of instance `iid`: its Node stays, is labelled (and
        tainted) UnschedulablePendingReboot, then Schedulable again; no fault labels at any
        time (an asked-for reboot is no fault)."""
        name = f"hyperpod-{iid}"
        uid = node(name)["metadata"]["uid"]
        reboots_before = sum(e["Description"].startswith(f"Rebooting instance {iid}")
                             for e in node_events(iid))
        watch = watch_nodes()
        self.addCleanup(watch.stop)
        wait_until(lambda: watch.of(name), timeout=30, interval=0.2, what="the Node watch started")
        answer = sm.batch_reboot_cluster_nodes(ClusterName="hp", NodeIds=[iid])
        self.assertEqual(answer.get("Failed", []), [], answer)
        self.assertEqual(answer.get("Successful"), [iid], answer)

        def states():
            return [health(o) for _, o in watch.of(name)]

        def rebooted_and_back():
            seen = states()
            marked = [k for k, h in enumerate(seen) if h[0] == "UnschedulablePendingReboot"]
            return bool(marked) and ("Schedulable", "Schedulable", [], True) in seen[marked[0]:]

        wait_until(rebooted_and_back, timeout=240, interval=0.5,
                   what=f"{name} PendingReboot, then Schedulable again")
        watch.stop()
        events = watch.of(name)
        self.assertNotIn("DELETED", [t for t, _ in events])
        marked = [health(o) for _, o in events if health(o)[0] == "UnschedulablePendingReboot"]
        self.assertIn(["UnschedulablePendingReboot"], [h[2] for h in marked])
        self.assertEqual([fault_labels(o) for _, o in events if fault_labels(o) != (None,) * 3],
                         [])
        after = node(name)
        self.assertEqual(after["metadata"]["uid"], uid)
        self.assertEqual(health(after), ("Schedulable", "Schedulable", [], True))
        self.assertEqual(fault_labels(after), (None, None, None))
        reboots = sum(e["Description"].startswith(f"Rebooting instance {iid}")
                      for e in node_events(iid))
        self.assertEqual(reboots, reboots_before + 1)


if __name__ == "__main__":
    main()
