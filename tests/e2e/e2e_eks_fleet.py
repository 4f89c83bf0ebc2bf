"""Two EKS clusters at once, a Hyperfleet restart, scaling, sessions and logs on EKS nodes
(docs/kubernetes.md): two EKS clusters ACTIVE together, each with a HyperPod cluster of one
node whose Node is Ready in its own cluster only; the server stopped (SIGTERM) and started on
the same data dir and port re-adopts the control planes (same apiserver, kubectl answers while
it is down with the admin credential, IAM tokens do not) and the nodes (same processes, Nodes
Ready, instances Running); UpdateCluster scales a group up (a new Node joins Ready and
labelled) and down (one Node goes with its pod, the other's pod keeps running);
`hyperfleet ssm start-session` runs a command on an EKS node and its lifecycle log stream is
read with `aws logs`; deleting everything leaves no process, Node, mount, namespace or nft
table. Lean on purpose (one node per cluster, one restart). Needs root, the node image and the
Kubernetes binaries (scripts/setup --eks); skipped otherwise, failed under CI."""

import json
import os
import subprocess
import time
import unittest

import boto3

from harness import (ACCESS_KEY, ACCOUNT, BINARY, EKS_ROLE, EKS_VPC, REGION, SECRET_KEY,
                     Kubectl, Server, aws_env, gone, kubernetes_bin, local_leftovers,
                     local_node_pids, main, node_ready, wait_until)

IMAGE_DIR = os.environ.get("HYPERFLEET_IMAGE_DIR", "/var/lib/hyperfleet/images")
SUFFIX = f"{os.getpid() % 100000}"  # other tests may run EKS clusters on this host
EKS_NAMES = (f"fleet-a{SUFFIX}", f"fleet-b{SUFFIX}")
HP_NAMES = (f"hp-a{SUFFIX}", f"hp-b{SUFFIX}")
GROUP = "workers"
ON_CREATE = "#!/bin/bash\necho \"eks lifecycle on $(hostname)\"\n"


def group_spec(count):
    return [{"InstanceGroupName": GROUP, "InstanceType": "ml.c5.xlarge", "InstanceCount": count,
             "LifeCycleConfig": {"SourceS3Uri": "s3://eks-fleet/base/",
                                 "OnCreate": "on_create.sh"},
             "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/HyperPodRole"}]


def pinned_pod(name, node):
    """A pod bound to `node` (no scheduler), with the pause image every EKS node has."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.6"}]}}


class EksFleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        cls.kubernetes_bin = kubernetes_bin()

    def test_two_eks_clusters_restart_scale_sessions(self):
        self.server = Server(provider="local",
                             extra_args=["--heartbeat-interval", "2", "--image-dir", IMAGE_DIR])
        bucket = os.path.join(self.server.data_dir, "s3", "eks-fleet", "base")
        os.makedirs(bucket)
        with open(os.path.join(bucket, "on_create.sh"), "w") as f:
            f.write(ON_CREATE)
        self.server.start()
        try:
            self.exercise()
        except BaseException:
            with open(os.path.join(self.server.data_dir, "server.log"), errors="replace") as f:
                print("server.log (end):\n" + "".join(f.readlines()[-80:]))
            raise
        finally:
            self.clean_up()

    def clients(self):
        session = boto3.session.Session(aws_access_key_id=ACCESS_KEY,
                                        aws_secret_access_key=SECRET_KEY, region_name=REGION)
        self.eks = session.client("eks", endpoint_url=self.server.endpoint)
        self.sm = session.client("sagemaker", endpoint_url=self.server.endpoint)

    def clean_up(self):
        server = self.server
        if getattr(self, "finished", False):
            server.cleanup()
            return
        if server.proc is None:
            server.start(port=server.port)
        env = aws_env(server.endpoint)
        for name in HP_NAMES:
            subprocess.run(["aws", "sagemaker", "delete-cluster", "--cluster-name", name],
                           env=env, capture_output=True, timeout=60)
        nodes = os.path.join(server.data_dir, "local", "nodes")
        try:
            wait_until(lambda: not os.path.isdir(nodes) or not os.listdir(nodes), timeout=120,
                       what="nodes removed")
        finally:
            # Control planes outlive the server: the server goes first, or its EKS controller
            # would start them again.
            server.stop()
            for name in EKS_NAMES:
                subprocess.run([BINARY, "eks-control-plane", "remove", "--data-dir",
                                server.data_dir, name], capture_output=True, timeout=60)
            server.cleanup()

    def exercise(self):
        self.clients()
        arns = []
        for name in EKS_NAMES:
            arns.append(self.eks.create_cluster(
                name=name, roleArn=EKS_ROLE, resourcesVpcConfig=EKS_VPC, version="1.31",
                accessConfig={"authenticationMode": "API"})["cluster"]["arn"])
        for name in EKS_NAMES:
            wait_until(lambda: self.eks.describe_cluster(name=name)["cluster"]["status"] ==
                       "ACTIVE", timeout=120, interval=0.5, what=f"{name} ACTIVE")
        started = time.monotonic()
        for hp, arn in zip(HP_NAMES, arns):
            self.sm.create_cluster(ClusterName=hp, InstanceGroups=group_spec(1),
                                   Orchestrator={"Eks": {"ClusterArn": arn}})
        for hp in HP_NAMES:
            self.wait_in_service(hp, timeout=420)  # the first EKS cluster may build the image
        print(f"[ metric ] two HyperPod clusters on two EKS clusters: both InService in "
              f"{time.monotonic() - started:.1f} s")

        self.kubectl = {eks: Kubectl(self.server, self.kubernetes_bin, eks) for eks in EKS_NAMES}
        ids = {hp: self.instance_ids(hp) for hp in HP_NAMES}
        # Each cluster's Node is Ready in its own EKS cluster only.
        for hp, eks in zip(HP_NAMES, EKS_NAMES):
            nodes = self.kubectl[eks].nodes()
            self.assertEqual(sorted(nodes), [f"hyperpod-{i}" for i in ids[hp]])
            for node in nodes.values():
                self.assertTrue(node_ready(node), node["status"])
                self.assertEqual(node["metadata"]["labels"].get(
                    "sagemaker.amazonaws.com/cluster-name"), hp)

        self.check_session_and_logs(HP_NAMES[1], ids[HP_NAMES[1]][0])
        self.check_restart(ids)
        self.check_scale(HP_NAMES[0], EKS_NAMES[0], ids[HP_NAMES[0]][0])
        self.check_delete_all()

    # ---- helpers ---------------------------------------------------------------------------

    def wait_in_service(self, hp, timeout=240):
        def in_service():
            c = self.sm.describe_cluster(ClusterName=hp)
            self.assertNotIn(c["ClusterStatus"], ("Failed", "RollingBack"),
                             c.get("FailureMessage"))
            return c["ClusterStatus"] == "InService"
        wait_until(in_service, timeout=timeout, interval=1, what=f"{hp} InService")

    def instance_ids(self, hp, status="Running"):
        """Sorted instance ids of `hp`'s nodes in `status` (None: any)."""
        return sorted(s["InstanceId"] for s in
                      self.sm.list_cluster_nodes(ClusterName=hp)["ClusterNodeSummaries"]
                      if status is None or s["InstanceStatus"]["Status"] == status)

    def plane_pids(self, eks):
        """{pid: command line} of control plane `eks`'s lasting processes: its supervisor,
        etcd, kube-apiserver, controller-manager and scheduler (not the server's kubectl
        calls, which come and go)."""
        r = subprocess.run(["pgrep", "-af", os.path.join(self.server.data_dir, "eks", eks)],
                           capture_output=True, text=True)
        out = {}
        for line in r.stdout.splitlines():
            pid, command = line.split(" ", 1)
            if os.path.basename(command.split(" ", 1)[0]) != "kubectl":
                out[int(pid)] = command
        return out

    def node_processes(self, iid):
        """A local node's lasting processes: its supervisor's and nspawn's pids and the pids
        of its kubelet, containerd and kube-proxy (one each: asserted)."""
        node_dir = os.path.join(self.server.data_dir, "local", "nodes", iid)
        out = {}
        for name in ("supervisor.pid", "nspawn.pid"):
            with open(os.path.join(node_dir, name)) as f:
                out[name] = int(f.read().strip())
        found = {"kubelet": [], "containerd": [], "kube-proxy": []}
        for pid in local_node_pids(self.server.data_dir, iid):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue  # a short-lived process of the node
            if comm in found:
                found[comm].append(pid)
        for comm, pids in found.items():
            self.assertEqual(len(pids), 1, f"{iid}: {comm} processes {pids}")
            out[comm] = pids[0]
        return out

    # ---- the checks ------------------------------------------------------------------------

    def check_session_and_logs(self, hp, iid):
        """A session command on an EKS node, and its lifecycle log stream in `aws logs`."""
        cluster_id = self.sm.describe_cluster(ClusterName=hp)["ClusterArn"].rsplit("/", 1)[1]
        env = aws_env(self.server.endpoint)
        target = f"sagemaker-cluster:{cluster_id}_{GROUP}-{iid}"
        r = subprocess.run([BINARY, "ssm", "start-session", "--endpoint-url",
                            self.server.endpoint, "--target", target, "--command",
                            "systemctl is-active kubelet containerd && hostname"],
                           env=env, capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.split()[:2], ["active", "active"], r.stdout)
        details = self.sm.describe_cluster_node(ClusterName=hp, NodeId=iid)["NodeDetails"]
        ip = details["PrivatePrimaryIp"]
        self.assertEqual(r.stdout.split()[2], "ip-" + ip.replace(".", "-"), r.stdout)

        r = subprocess.run(["aws", "logs", "get-log-events", "--log-group-name",
                            f"/aws/sagemaker/Clusters/{hp}/{cluster_id}", "--log-stream-name",
                            f"LifecycleConfig/{GROUP}/{iid}", "--start-from-head"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        messages = [e["message"] for e in json.loads(r.stdout)["events"]]
        self.assertIn("[SageMaker] Downloading lifecycle scripts", messages)
        self.assertTrue(any(m.startswith("eks lifecycle on ") for m in messages), messages)
        self.assertEqual(messages[-1], "[SageMaker] The lifecycle scripts succeeded.")

    def check_restart(self, ids):
        """SIGTERM and start again on the same data dir and port: nothing restarts."""
        planes = {eks: self.plane_pids(eks) for eks in EKS_NAMES}
        for eks, pids in planes.items():
            self.assertEqual(sum("kube-apiserver" in c for c in pids.values()), 1, pids)
        nodes = {i: self.node_processes(i) for hp in HP_NAMES for i in ids[hp]}
        admin = {eks: Kubectl(self.server, self.kubernetes_bin, eks, kubeconfig=os.path.join(
            self.server.data_dir, "eks", eks, "admin.kubeconfig")) for eks in EKS_NAMES}

        port = self.server.port
        self.server.stop()
        # The control planes do not depend on the server; IAM tokens do (its webhook).
        for hp, eks in zip(HP_NAMES, EKS_NAMES):
            self.assertEqual(sorted(admin[eks].nodes()), [f"hyperpod-{i}" for i in ids[hp]])
        r = self.kubectl[EKS_NAMES[0]]("get", "nodes", check=False, timeout=60)
        self.assertNotEqual(r.returncode, 0, "an IAM token without the server's webhook")
        began = time.monotonic()
        self.server.start(port=port)
        listening = time.monotonic() - began
        self.clients()

        first = {}  # what -> seconds after the start when it first held

        def held(what, ok):
            if ok:
                first.setdefault(what, time.monotonic() - began)
            return ok

        def reconciled():
            for hp, eks in zip(HP_NAMES, EKS_NAMES):
                if not held(f"{eks} ACTIVE", self.eks.describe_cluster(
                        name=eks)["cluster"]["status"] == "ACTIVE"):
                    return False
                if not held(f"{hp} InService", self.sm.describe_cluster(
                        ClusterName=hp)["ClusterStatus"] == "InService"):
                    return False
                if not held(f"{hp} nodes Running", self.instance_ids(hp) == ids[hp]):
                    return False
                nodes = self.kubectl[eks].nodes()  # an IAM token again: the webhook is back
                if not held(f"{eks} Nodes Ready (kubectl)",
                            sorted(nodes) == [f"hyperpod-{i}" for i in ids[hp]] and
                            all(node_ready(n) for n in nodes.values())):
                    return False
            return True

        wait_until(reconciled, timeout=120, interval=0.5, what="clusters after the restart")
        print(f"[ metric ] restart: listening in {listening:.1f} s, EKS clusters ACTIVE, "
              f"HyperPod clusters InService and Nodes Ready through kubectl in "
              f"{time.monotonic() - began:.1f} s (first held: " +
              ", ".join(f"{k} {v:.1f} s" for k, v in first.items()) + ")")
        # Adopted, not restarted: the same control plane and node processes, no second set.
        for eks in EKS_NAMES:
            self.assertEqual(self.plane_pids(eks), planes[eks])
        for iid, before in nodes.items():
            self.assertEqual(self.node_processes(iid), before, iid)
        # A controller that took the restart for a dead node would replace it: wait out a
        # few heartbeats' worth of decisions and look again.
        for hp in HP_NAMES:
            events = self.sm.list_cluster_events(ClusterName=hp)["Events"]
            self.assertFalse([e["Description"] for e in events
                              if "eplac" in e["Description"] or "eboot" in e["Description"]])

    def check_scale(self, hp, eks, first):
        """InstanceCount +1: a new Node joins Ready and labelled; -1: a Node goes, its pod
        with it, and the group keeps one Ready Node."""
        kubectl = self.kubectl[eks]
        began = time.monotonic()
        # With the cluster's own Orchestrator, as infrastructure-as-code tools send it.
        orchestrator = self.sm.describe_cluster(ClusterName=hp)["Orchestrator"]
        self.sm.update_cluster(ClusterName=hp, InstanceGroups=group_spec(2),
                               Orchestrator=orchestrator)
        joined = {}

        def two_ready():
            ids = self.instance_ids(hp)
            nodes = kubectl.nodes()
            if len(ids) != 2 or sorted(nodes) != [f"hyperpod-{i}" for i in ids]:
                return False
            if not all(node_ready(n) for n in nodes.values()):
                return False
            joined.update(nodes)
            return True

        wait_until(two_ready, timeout=240, interval=0.5, what=f"{hp} scaled up to two")
        print(f"[ metric ] scale up: UpdateCluster -> new Node Ready "
              f"{time.monotonic() - began:.1f} s")
        self.wait_in_service(hp)
        for name, node in joined.items():
            labels = node["metadata"]["labels"]
            self.assertEqual(labels.get("sagemaker.amazonaws.com/instance-group-name"), GROUP)
            self.assertEqual(labels.get("sagemaker.amazonaws.com/cluster-name"), hp)
        wait_until(lambda: all(n["metadata"]["labels"].get(
                       "sagemaker.amazonaws.com/node-health-status") == "Schedulable"
                       for n in kubectl.nodes().values()),
                   timeout=30, interval=0.5, what="both Nodes Schedulable")

        # A pod on each Node; scaling down takes one Node and its pod with it.
        manifest = os.path.join(self.server.data_dir, "pods.json")
        with open(manifest, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List",
                       "items": [pinned_pod(f"p-{n}", n) for n in sorted(joined)]}, f)
        kubectl("apply", "-f", manifest)

        def pods():
            return {p["spec"]["nodeName"]: p for p in json.loads(
                kubectl("get", "pods", "-o", "json").stdout)["items"]}

        wait_until(lambda: len(pods()) == 2 and all(
            p["status"].get("phase") == "Running" for p in pods().values()),
                   timeout=120, interval=1, what="a pod Running on each Node")

        began = time.monotonic()
        self.sm.update_cluster(ClusterName=hp, InstanceGroups=group_spec(1))
        wait_until(lambda: len(kubectl.nodes()) == 1, timeout=180, interval=0.5,
                   what=f"{hp}: one Node left")
        print(f"[ metric ] scale down: UpdateCluster -> Node gone "
              f"{time.monotonic() - began:.1f} s")
        self.wait_in_service(hp)
        wait_until(lambda: len(self.instance_ids(hp, status=None)) == 1, timeout=120,
                   interval=0.5, what=f"{hp}: one instance left")
        kept = self.instance_ids(hp)
        print(f"[ metric ] scale down removed the {'first' if kept != [first] else 'new'} node")
        self.assertEqual(sorted(kubectl.nodes()), [f"hyperpod-{i}" for i in kept])
        # The removed Node's pod went with it; the kept Node's pod still runs.
        left = pods()
        self.assertEqual(sorted(left), [f"hyperpod-{i}" for i in kept])
        self.assertEqual(left[f"hyperpod-{kept[0]}"]["status"].get("phase"), "Running")
        # The other EKS cluster saw none of it.
        other = EKS_NAMES[1] if eks == EKS_NAMES[0] else EKS_NAMES[0]
        self.assertEqual(len(self.kubectl[other].nodes()), 1)

    def check_delete_all(self):
        """Both kinds of cluster deleted: no Node, then no process, mount, namespace or rule."""
        for hp in HP_NAMES:
            self.sm.delete_cluster(ClusterName=hp)
        for hp in HP_NAMES:
            wait_until(lambda: gone(self.sm.describe_cluster, self.sm.exceptions.ResourceNotFound,
                                    ClusterName=hp), timeout=180, interval=1,
                       what=f"{hp} deleted")
        for eks in EKS_NAMES:
            self.assertEqual(self.kubectl[eks].nodes(), {})
        for eks in EKS_NAMES:
            self.eks.delete_cluster(name=eks)
        for eks in EKS_NAMES:
            wait_until(lambda: gone(self.eks.describe_cluster,
                                    self.eks.exceptions.ResourceNotFoundException, name=eks),
                       timeout=60, interval=0.5, what=f"{eks} deleted")
        self.server.stop()
        self.finished = True
        self.assertEqual(local_leftovers(self.server.data_dir), [])


if __name__ == "__main__":
    main()
