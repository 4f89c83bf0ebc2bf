"""HyperPod clusters orchestrated by EKS, end to end (docs/kubernetes.md): an EKS cluster made
with boto3 becomes ACTIVE with a real control plane; a HyperPod cluster attached to it with
Orchestrator.Eks (two worker groups, no controller group) boots its instances from the EKS
node image on the local provider, runs the lifecycle scripts before containerd and the
kubelet (the scripts move /var/lib/kubelet, as HyperPod's EKS base-config does), and each
instance joins as Node hyperpod-<instance id> with HyperPod's labels before it counts as
Running. kubectl (through `aws eks update-kubeconfig`) schedules a Deployment by HyperPod's
node selectors and reads its logs. Health: a killed instance is replaced, its Node deleted and
the pod runs again on the replacement's Node; a user's PendingReboot label reboots an instance,
whose Node stays and is Schedulable again. HyperPod's checks refuse an unknown ClusterArn and a
group without LifeCycleConfig. Deleting the HyperPod cluster removes its Nodes; deleting the
EKS cluster leaves no process. Needs root, the node image and the
Kubernetes binaries (scripts/setup --eks); skipped otherwise, failed under CI."""

import json
import os
import subprocess
import textwrap
import time
import unittest

import boto3

from harness import (ACCOUNT, BINARY, EKS_ROLE as ROLE, EKS_VPC as VPC, REGION, ACCESS_KEY,
                     SECRET_KEY, Server, aws_env, gone, kubernetes_bin, local_node_pids, main,
                     wait_until)

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
            subprocess.run([BINARY, "eks-control-plane", "remove", "--data-dir",
                            server.data_dir, "k1"], capture_output=True, timeout=60)
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

        started = time.monotonic()
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

        def kubectl(*args, check=True):
            r = subprocess.run([os.path.join(self.kubernetes_bin, "kubectl"), "--kubeconfig",
                                kubeconfig, *args], env=env, capture_output=True, text=True,
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

        self.check_health(server, sm, kubectl, by_group, pod)

        # Deleting the HyperPod cluster removes its Nodes.
        sm.delete_cluster(ClusterName="hp")

        wait_until(lambda: gone(sm.describe_cluster, sm.exceptions.ResourceNotFound,
                                ClusterName="hp"), timeout=180, interval=1, what="hp deleted")
        left = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        self.assertEqual([n["metadata"]["name"] for n in left], [])

        eks.delete_cluster(name="k1")

        wait_until(lambda: gone(eks.describe_cluster, eks.exceptions.ResourceNotFoundException,
                                name="k1"), timeout=60, interval=0.5, what="k1 deleted")
        left = subprocess.run(["pgrep", "-f", os.path.join(server.data_dir, "eks")],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "")

    def check_health(self, server, sm, kubectl, by_group, pod):
        """HyperPod's health on Nodes: a killed instance is replaced and its Node with it, the
        pod runs again on the new Node; a user's PendingReboot label reboots an instance,
        whose Node stays and is Schedulable again."""
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
        # the pod runs again there.
        old = by_group["workers-b"]
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


if __name__ == "__main__":
    main()
