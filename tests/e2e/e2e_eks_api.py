"""End-to-end test of the EKS API subset on the real server, with the aws CLI (AWS_DATA_PATH
on our committed model: `aws eks` knows exactly our operations), boto3 and kubectl.
EksApiTest: create -> CREATING, describe, list with pages, tags, access entries and policies,
the errors real clients parse (type and HTTP status), delete -> DELETING -> gone; its server
gets an empty --kubernetes-dir, so no control plane can start. EksActiveTest (when
scripts/kubernetes has built the binaries): a real control plane, ACTIVE, `aws eks
update-kubeconfig`, kubectl through `aws eks get-token` and the token webhook, a forged
token's 401 and a principal without an access entry's, then delete leaving no process."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import boto3
import botocore.config
import botocore.exceptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CREATOR = f"arn:aws:iam::{harness.ACCOUNT}:user/{harness.ACCESS_KEY}"
ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
VPC = {"subnetIds": ["subnet-0a", "subnet-0b"], "securityGroupIds": ["sg-0a"]}
ROLE = f"arn:aws:iam::{harness.ACCOUNT}:role/eks-cluster"


class EksApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.no_kubernetes = tempfile.mkdtemp(prefix="hf-no-k8s-")
        cls.server = harness.Server(provider="fake",
                                    extra_args=("--kubernetes-dir", cls.no_kubernetes))
        cls.server.start()
        cls.env = harness.aws_env(cls.server.endpoint)
        cls.eks = boto3.session.Session().client(
            "eks", endpoint_url=cls.server.endpoint, region_name=harness.REGION,
            aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
            config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        os.rmdir(cls.no_kubernetes)

    def aws(self, *args, ok=True):
        r = subprocess.run(["aws", "eks", *args, "--output", "json"], capture_output=True,
                           text=True, timeout=120, env=self.env)
        if ok and r.returncode != 0:
            raise AssertionError(f"aws eks {' '.join(args)}: {r.stderr.strip()}")
        return (json.loads(r.stdout) if r.stdout.strip() else {}) if ok else r

    def error_of(self, call, **params):
        """(error code, HTTP status) of a boto3 call that must fail."""
        with self.assertRaises(botocore.exceptions.ClientError) as cm:
            call(**params)
        e = cm.exception.response
        return e["Error"]["Code"], e["ResponseMetadata"]["HTTPStatusCode"]

    def test_cli_knows_exactly_our_operations(self):
        r = subprocess.run(["aws", "eks", "create-nodegroup", "help"], capture_output=True,
                           text=True, timeout=60, env=self.env)
        self.assertNotEqual(r.returncode, 0)  # not in our model

    def test_cluster_lifecycle_with_the_cli(self):
        c = self.aws("create-cluster", "--name", "cli-1", "--kubernetes-version", "1.31",
                     "--role-arn", ROLE, "--resources-vpc-config",
                     "subnetIds=subnet-0a,subnet-0b", "--tags", "team=ml")["cluster"]
        self.assertEqual(c["status"], "CREATING")
        self.assertEqual(c["version"], "1.31")
        self.assertEqual(c["arn"], f"arn:aws:eks:{harness.REGION}:{harness.ACCOUNT}:cluster/cli-1")
        self.assertEqual(c["accessConfig"]["authenticationMode"], "CONFIG_MAP")
        self.assertEqual(c["kubernetesNetworkConfig"]["serviceIpv4Cidr"], "10.100.0.0/16")
        self.assertNotIn("endpoint", c)
        d = self.aws("describe-cluster", "--name", "cli-1")["cluster"]
        self.assertEqual(d["status"], "CREATING")
        self.assertEqual(d["tags"], {"team": "ml"})
        self.assertIn("cli-1", self.aws("list-clusters")["clusters"])
        r = self.aws("describe-cluster", "--name", "nope", ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ResourceNotFoundException", r.stderr)
        self.assertIn("No cluster found for name: nope.", r.stderr)
        gone = self.aws("delete-cluster", "--name", "cli-1")["cluster"]
        self.assertEqual(gone["status"], "DELETING")
        # No control plane was ever started: the controller removes nothing and the row goes.
        harness.wait_until(lambda: "cli-1" not in self.aws("list-clusters")["clusters"],
                           timeout=30, what="cli-1 gone")

    def test_errors_as_clients_parse_them(self):
        self.eks.create_cluster(name="dup", roleArn=ROLE, resourcesVpcConfig=VPC)
        self.assertEqual(self.error_of(self.eks.create_cluster, name="dup", roleArn=ROLE,
                                       resourcesVpcConfig=VPC),
                         ("ResourceInUseException", 409))
        self.assertEqual(self.error_of(self.eks.create_cluster, name="old", roleArn=ROLE,
                                       resourcesVpcConfig=VPC, version="1.19"),
                         ("InvalidParameterException", 400))
        self.assertEqual(self.error_of(self.eks.describe_cluster, name="none"),
                         ("ResourceNotFoundException", 404))
        self.assertEqual(self.error_of(self.eks.list_tags_for_resource,
                                       resourceArn="arn:aws:eks:us-west-2:1:cluster/none"),
                         ("NotFoundException", 404))
        self.assertEqual(self.error_of(self.eks.list_access_entries, clusterName="dup"),
                         ("InvalidRequestException", 400))  # CONFIG_MAP
        names = [c for c in self.eks.list_clusters()["clusters"]]
        self.assertNotIn("old", names)

    def test_pages_tags_and_access_entries(self):
        for n in ("pg-a", "pg-b", "pg-c"):
            self.eks.create_cluster(name=n, roleArn=ROLE, resourcesVpcConfig=VPC,
                                    accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
        pages = self.eks.get_paginator("list_clusters").paginate(
            PaginationConfig={"PageSize": 1})
        listed = [n for p in pages for n in p["clusters"]]
        self.assertEqual([n for n in listed if n.startswith("pg-")], ["pg-a", "pg-b", "pg-c"])

        arn = self.eks.describe_cluster(name="pg-a")["cluster"]["arn"]
        self.eks.tag_resource(resourceArn=arn, tags={"a": "1", "b": "2"})
        self.eks.untag_resource(resourceArn=arn, tagKeys=["a"])
        self.assertEqual(self.eks.list_tags_for_resource(resourceArn=arn)["tags"], {"b": "2"})

        # The creator is the cluster's admin (bootstrapClusterCreatorAdminPermissions).
        self.assertEqual(self.eks.list_access_entries(clusterName="pg-a")["accessEntries"],
                         [CREATOR])
        policies = self.eks.list_associated_access_policies(clusterName="pg-a",
                                                            principalArn=CREATOR)
        self.assertEqual([p["policyArn"] for p in policies["associatedAccessPolicies"]], [ADMIN])

        dev = f"arn:aws:iam::{harness.ACCOUNT}:role/team/dev"
        entry = self.aws("create-access-entry", "--cluster-name", "pg-a", "--principal-arn", dev,
                         "--kubernetes-groups", "devs", "--username", "dev")["accessEntry"]
        self.assertEqual(entry["principalArn"], dev)
        self.aws("associate-access-policy", "--cluster-name", "pg-a", "--principal-arn", dev,
                 "--policy-arn", VIEW, "--access-scope", "type=namespace,namespaces=ml")
        described = self.eks.describe_access_entry(clusterName="pg-a", principalArn=dev)
        self.assertEqual(described["accessEntry"]["kubernetesGroups"], ["devs"])
        self.eks.tag_resource(resourceArn=entry["accessEntryArn"], tags={"x": "y"})
        self.assertEqual(
            self.eks.list_tags_for_resource(resourceArn=entry["accessEntryArn"])["tags"],
            {"x": "y"})
        self.assertEqual(self.eks.list_access_entries(clusterName="pg-a",
                                                      associatedPolicyArn=VIEW)["accessEntries"],
                         [dev])
        self.eks.disassociate_access_policy(clusterName="pg-a", principalArn=dev, policyArn=VIEW)
        self.eks.delete_access_entry(clusterName="pg-a", principalArn=dev)
        self.assertEqual(self.error_of(self.eks.describe_access_entry, clusterName="pg-a",
                                       principalArn=dev),
                         ("ResourceNotFoundException", 404))
        all_policies = self.aws("list-access-policies")["accessPolicies"]
        self.assertEqual(len(all_policies), 4)


class EksActiveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # scripts/kubernetes' binaries, which the server runs by default (skips without them,
        # fails under CI).
        cls.kubernetes_bin = harness.kubernetes_bin()

    def test_kubectl_through_the_token_webhook(self):
        with harness.Server(provider="fake") as server:
            try:
                self.exercise(server)
            finally:
                # A control plane outlives the server: a failure must not leave one running.
                # The server goes first, or its EKS controller would start it again.
                server.stop()
                subprocess.run([harness.BINARY, "eks-control-plane", "remove", "--data-dir",
                                server.data_dir, "k1"], capture_output=True, timeout=60)

    def exercise(self, server):
        """The ACTIVE path on `server`."""
        env = harness.aws_env(server.endpoint)
        eks = boto3.session.Session().client(
            "eks", endpoint_url=server.endpoint, region_name=harness.REGION,
            aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY)
        eks.create_cluster(name="k1", roleArn=ROLE, resourcesVpcConfig=VPC,
                           version="1.29", accessConfig={"authenticationMode": "API"})
        cluster = {}

        def active():
            cluster.update(eks.describe_cluster(name="k1")["cluster"])
            self.assertNotEqual(cluster["status"], "FAILED")
            return cluster["status"] == "ACTIVE"

        harness.wait_until(active, timeout=120, interval=0.5, what="k1 ACTIVE")
        self.assertEqual(cluster["version"], "1.29")
        self.assertTrue(cluster["platformVersion"].startswith("hyperfleet-v"))
        self.assertTrue(cluster["endpoint"].startswith("https://"))
        kubeconfig = os.path.join(server.data_dir, "kubeconfig")
        subprocess.run(["aws", "eks", "update-kubeconfig", "--name", "k1", "--kubeconfig",
                        kubeconfig], env=env, check=True, capture_output=True, timeout=60)

        def kubectl(*args, key_env=env):
            # The kubectl scripts/kubernetes built: a fresh host has no other.
            return subprocess.run([os.path.join(self.kubernetes_bin, "kubectl"), "--kubeconfig",
                                   kubeconfig, *args],
                                  env=key_env, capture_output=True, text=True, timeout=60)

        r = kubectl("get", "namespace", "kube-system", "-o", "name")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "namespace/kube-system"),
                         r.stderr)
        self.assertEqual(kubectl("auth", "can-i", "*", "*").stdout.strip(), "yes")
        forged = dict(env, AWS_SECRET_ACCESS_KEY="not-the-secret")
        r = kubectl("get", "namespaces", key_env=forged)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Unauthorized", r.stderr)
        # Without an access entry the same key is refused too.
        eks.delete_access_entry(clusterName="k1", principalArn=CREATOR)
        r = kubectl("get", "namespaces")
        self.assertIn("Unauthorized", r.stderr)

        eks.delete_cluster(name="k1")

        def gone():
            try:
                eks.describe_cluster(name="k1")
                return False
            except eks.exceptions.ResourceNotFoundException:
                return True

        harness.wait_until(gone, timeout=60, interval=0.5, what="k1 deleted")
        left = subprocess.run(["pgrep", "-f", os.path.join(server.data_dir, "eks")],
                              capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "")


if __name__ == "__main__":
    harness.main()
