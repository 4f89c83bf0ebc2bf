"""`--provider local,ssh`: one real server with both providers. A cluster with a group whose
instance type has a registered machine (one real sshd machine, tests/e2e/ssh_machines.py,
layer `site`) and a group of a type with none: the first group's node is provisioned on the
machine over ssh, the second's boots as a local node on this host; the routes file under the
data dir names each; both reach Running; deleting the cluster frees the machine and removes
the local node. Needs root (the test machine and local nodes); skipped otherwise."""

import json
import os
import subprocess
import unittest

import boto3

from it_ssh_provider import MachineClusterCase
from harness import (ACCESS_KEY, BINARY, EKS_ROLE, EKS_VPC, REGION, SECRET_KEY, cluster_spec,
                     gone, kubernetes_bin, main, mirror_addresses, wait_until)

SSH_TYPE = "ml.c5.large"
LOCAL_TYPE = "ml.c5.xlarge"
CLUSTER = "mixed-it"


class Flags(unittest.TestCase):
    def test_local_ssh_needs_the_agent_endpoint(self):
        r = subprocess.run([BINARY, "server", "--provider", "local,ssh", "--listen",
                            "127.0.0.1:0", "--data-dir", "/nonexistent/hf-it-mixed"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("--provider local,ssh needs --agent-listen", r.stderr)


@unittest.skipUnless(os.geteuid() == 0, "needs root (the ssh test machines, local nodes)")
class MixedProviders(MachineClusterCase):
    cluster = CLUSTER

    @classmethod
    def setUpClass(cls):
        cls.start_one_machine_and_server(
            "local,ssh", "hyperfleet-lc",
            ["--node-egress-allow", ",".join(mirror_addresses())])

    def routes(self):
        path = os.path.join(self.server.data_dir, "provider-routes.json")
        with open(path) as f:
            return json.load(f)["instances"]

    def test_one_group_on_a_machine_one_on_local_nodes(self):
        key = os.path.join(self.server.data_dir, "host-key.pub")
        with open(key, "w") as f:
            f.write(self.m.host_key_pub + "\n")
        self.hf("machines", "add", self.m.address, "--user", "root", "--key",
                self.fleet.key_path, "--host-key-file", key, "--instance-type", SSH_TYPE)

        spec = cluster_spec(CLUSTER, groups=[("machines", SSH_TYPE, 1), ("local", LOCAL_TYPE, 1)])
        spec.pop("Orchestrator")
        with open(os.path.join(self.server.data_dir, "spec.json"), "w") as f:
            json.dump(spec, f)
        self.aws("sagemaker", "create-cluster", "--cli-input-json",
                 "file://" + os.path.join(self.server.data_dir, "spec.json"))

        wait_until(lambda: sorted(n["InstanceStatus"]["Status"] for n in self.nodes()) ==
                   ["Running", "Running"], timeout=900, interval=2, what="both nodes Running")
        by_group = {n["InstanceGroupName"]: n["InstanceId"] for n in self.nodes()}
        routes = self.routes()
        self.assertEqual(routes[by_group["machines"]]["provider"], "ssh")
        self.assertEqual(routes[by_group["local"]]["provider"], "local")
        self.assertEqual(os.stat(os.path.join(self.server.data_dir,
                                              "provider-routes.json")).st_mode & 0o777, 0o600)
        self.assertEqual(self.machine()["State"], "in-use")
        self.assertEqual(self.machine()["NodeId"], by_group["machines"])
        self.assertEqual(self.m.ssh("cat /var/tmp/on_create.txt", check=True).stdout.strip(),
                         "on_create ran")
        node = self.aws("sagemaker", "describe-cluster-node", "--cluster-name", CLUSTER,
                        "--node-id", by_group["machines"])["NodeDetails"]
        self.assertEqual(node["PrivatePrimaryIp"], self.m.address)

        self.aws("sagemaker", "delete-cluster", "--cluster-name", CLUSTER)
        wait_until(lambda: self.machine()["State"] == "free", timeout=300, interval=1,
                   what="machine free")
        wait_until(lambda: self.aws("sagemaker", "list-clusters")["ClusterSummaries"] == [],
                   timeout=300, interval=1, what="cluster gone")
        wait_until(lambda: self.routes() == {}, timeout=60, interval=1, what="routes forgotten")
        self.check_eks_group_on_machines_refused()

    def check_eks_group_on_machines_refused(self):
        """The ssh provider runs no EKS nodes: an Orchestrator.Eks group of a type with a
        registered machine is refused at CreateCluster, naming the field (the machine is
        still registered here, free)."""
        kubernetes_bin()  # skips without the Kubernetes binaries (fails under CI)
        session = boto3.session.Session(aws_access_key_id=ACCESS_KEY,
                                        aws_secret_access_key=SECRET_KEY, region_name=REGION)
        eks = session.client("eks", endpoint_url=self.server.endpoint)
        sm = session.client("sagemaker", endpoint_url=self.server.endpoint)
        name = f"mixed-eks{os.getpid() % 100000}"
        arn = eks.create_cluster(name=name, roleArn=EKS_ROLE, resourcesVpcConfig=EKS_VPC,
                                 accessConfig={"authenticationMode": "API"})["cluster"]["arn"]
        try:
            wait_until(lambda: eks.describe_cluster(name=name)["cluster"]["status"] == "ACTIVE",
                       timeout=120, interval=0.5, what=f"{name} ACTIVE")
            spec = cluster_spec("mixed-eks", groups=[("local", LOCAL_TYPE, 1),
                                                     ("machines", SSH_TYPE, 1)])
            spec["Orchestrator"] = {"Eks": {"ClusterArn": arn}}
            with self.assertRaises(sm.exceptions.ClientError) as cm:
                sm.create_cluster(**spec)
            error = cm.exception.response["Error"]
            self.assertEqual(error["Code"], "ValidationException")
            self.assertIn("'machines' at 'instanceGroups.2.member.instanceType'", error["Message"])
            self.assertIn("does not run EKS nodes", error["Message"])
            self.assertEqual(sm.list_clusters()["ClusterSummaries"], [])
        finally:
            eks.delete_cluster(name=name)
            wait_until(lambda: gone(eks.describe_cluster,
                                    eks.exceptions.ResourceNotFoundException, name=name),
                       timeout=60, interval=0.5, what=f"{name} deleted")


if __name__ == "__main__":
    main()
