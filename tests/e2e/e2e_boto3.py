"""End-to-end: boto3's SageMaker client drives every implemented HyperPod operation against a
Hyperfleet server, with botocore's paginators and modeled exceptions."""

import datetime
import os
import unittest

import boto3
import botocore.config
from botocore.exceptions import ClientError

import harness

# Our model subset on AWS_DATA_PATH, our test key; no profile or metadata lookups.
os.environ.update(harness.aws_env())

UNKNOWN_NODE = "i-0123456789abcdef0"


def make_client(endpoint):
    return boto3.session.Session().client(
        "sagemaker", endpoint_url=endpoint, region_name=harness.REGION,
        aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))


def group(description, name):
    return next((g for g in description["InstanceGroups"] if g["InstanceGroupName"] == name),
                None)


def groups(*specs):
    return harness.cluster_spec("x", list(specs))["InstanceGroups"]


CONTROLLER = ("controller", "ml.c5.xlarge", 1)


class Boto3Test(unittest.TestCase):
    CLUSTERS = ("b3-main", "b3-scale", "b3-batch", "b3-doomed", "b3-recover")

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=100).start()
        cls.sm = make_client(cls.server.endpoint)
        cls.arns = {}
        for name in cls.CLUSTERS:
            extra = {"Tags": [{"Key": "env", "Value": "dev"}]} if name == "b3-main" else {}
            spec = harness.cluster_spec(name, **extra)
            cls.arns[name] = cls.sm.create_cluster(**spec)["ClusterArn"]
        for name in cls.CLUSTERS:
            cls.wait_status(name)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    @classmethod
    def wait_status(cls, name, status="InService", extra=lambda d: True):
        def ready():
            d = cls.sm.describe_cluster(ClusterName=name)
            return d if d["ClusterStatus"] == status and extra(d) else None
        return harness.wait_until(ready, timeout=60, what=f"{name} to be {status}")

    def assertCode(self, ctx, code):
        err = ctx.exception.response["Error"]
        self.assertEqual(err["Code"], code, err)
        self.assertEqual(ctx.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        self.assertTrue(ctx.exception.response["ResponseMetadata"]["RequestId"])
        return err["Message"]

    def test_batch_add_cluster_nodes(self):
        # Only Continuous provisioning offers it; the default mode gets a clear error.
        with self.assertRaises(self.sm.exceptions.ClientError) as ctx:
            self.sm.batch_add_cluster_nodes(ClusterName="b3-main", NodesToAdd=[
                {"InstanceGroupName": "workers", "IncrementTargetCountBy": 1}])
        self.assertIn("NodeProvisioningMode Continuous", self.assertCode(ctx, "ValidationException"))
        name = "b3-continuous"
        self.sm.create_cluster(**harness.cluster_spec(
            name, [CONTROLLER, ("workers", "ml.c5.4xlarge", 1)],
            NodeProvisioningMode="Continuous"))
        self.wait_status(name)
        out = self.sm.batch_add_cluster_nodes(ClusterName=name, NodesToAdd=[
            {"InstanceGroupName": "workers", "IncrementTargetCountBy": 2},
            {"InstanceGroupName": "nope", "IncrementTargetCountBy": 1}])
        self.assertEqual(len(out["Successful"]), 2)
        self.assertTrue(all(r["InstanceGroupName"] == "workers" and r["Status"] == "Pending"
                            for r in out["Successful"]))
        self.assertEqual([(f["InstanceGroupName"], f["ErrorCode"], f["FailedCount"])
                          for f in out["Failed"]], [("nope", "InstanceGroupNotFound", 1)])
        logical = {r["NodeLogicalId"] for r in out["Successful"]}

        def added_running():
            nodes = self.sm.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
            by_logical = {self.sm.describe_cluster_node(
                ClusterName=name, NodeId=n["InstanceId"])["NodeDetails"]["NodeLogicalId"]: n
                for n in nodes}
            return logical <= set(by_logical) and all(
                by_logical[l]["InstanceStatus"]["Status"] == "Running" for l in logical)
        harness.wait_until(added_running, timeout=60, what="added nodes running")
        self.assertEqual(group(self.sm.describe_cluster(ClusterName=name),
                               "workers")["TargetCount"], 3)
        self.sm.delete_cluster(ClusterName=name)

    def test_describe_and_list_clusters(self):
        d = self.sm.describe_cluster(ClusterName="b3-main")
        self.assertEqual(d["ClusterArn"], self.arns["b3-main"])
        self.assertEqual(d["ClusterStatus"], "InService")
        self.assertIsInstance(d["CreationTime"], datetime.datetime)
        self.assertIsNotNone(d["CreationTime"].tzinfo)
        self.assertLess(abs((datetime.datetime.now(datetime.timezone.utc)
                             - d["CreationTime"]).total_seconds()), 600)
        self.assertEqual({g["InstanceGroupName"]: g["CurrentCount"] for g in d["InstanceGroups"]},
                         {"controller": 1, "workers": 2})
        self.assertTrue(d["ResponseMetadata"]["RequestId"])
        # By ARN as well as by name.
        self.assertEqual(self.sm.describe_cluster(ClusterName=self.arns["b3-main"])["ClusterName"],
                         "b3-main")

        pages = list(self.sm.get_paginator("list_clusters").paginate(
            NameContains="b3-", PaginationConfig={"PageSize": 2}))
        names = [c["ClusterName"] for p in pages for c in p["ClusterSummaries"]]
        self.assertGreaterEqual(len(pages), 2)
        self.assertTrue(all(len(p["ClusterSummaries"]) <= 2 for p in pages))
        self.assertEqual(sorted(names), sorted(n for n in names if n.startswith("b3-")))
        self.assertEqual(len(names), len(set(names)), "a cluster came back twice")
        self.assertLessEqual({"b3-main", "b3-scale", "b3-batch"}, set(names))
        for p in pages:
            for c in p["ClusterSummaries"]:
                self.assertIsInstance(c["CreationTime"], datetime.datetime)

        desc = self.sm.list_clusters(SortBy="NAME", SortOrder="Descending", MaxResults=100)
        listed = [c["ClusterName"] for c in desc["ClusterSummaries"]]
        self.assertEqual(listed, sorted(listed, reverse=True))
        after = self.sm.list_clusters(CreationTimeAfter=d["CreationTime"]
                                      - datetime.timedelta(seconds=1))["ClusterSummaries"]
        self.assertIn("b3-main", [c["ClusterName"] for c in after])
        self.assertEqual(self.sm.list_clusters(
            CreationTimeAfter=datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(hours=1))["ClusterSummaries"], [])

    def test_nodes(self):
        nodes = [n for p in self.sm.get_paginator("list_cluster_nodes").paginate(
                     ClusterName="b3-main", PaginationConfig={"PageSize": 1})
                 for n in p["ClusterNodeSummaries"]]
        self.assertEqual(len(nodes), 3)
        self.assertEqual(len({n["InstanceId"] for n in nodes}), 3)
        self.assertIsInstance(nodes[0]["LaunchTime"], datetime.datetime)
        workers = self.sm.list_cluster_nodes(ClusterName="b3-main",
                                             InstanceGroupNameContains="work",
                                             SortBy="NAME", SortOrder="Ascending")
        self.assertEqual([n["InstanceGroupName"] for n in workers["ClusterNodeSummaries"]],
                         ["workers", "workers"])
        node = workers["ClusterNodeSummaries"][0]
        by_id = self.sm.describe_cluster_node(ClusterName="b3-main", NodeId=node["InstanceId"])
        self.assertEqual(by_id["NodeDetails"]["InstanceId"], node["InstanceId"])
        self.assertEqual(by_id["NodeDetails"]["InstanceStatus"]["Status"], "Running")
        by_logical = self.sm.describe_cluster_node(ClusterName="b3-main",
                                                   NodeLogicalId=node["NodeLogicalId"])
        self.assertEqual(by_logical["NodeDetails"]["InstanceId"], node["InstanceId"])
        with self.assertRaises(self.sm.exceptions.ResourceNotFound) as ctx:
            self.sm.describe_cluster_node(ClusterName="b3-main", NodeId=UNKNOWN_NODE)
        self.assertIn(UNKNOWN_NODE, self.assertCode(ctx, "ResourceNotFound"))

    def test_update_scaling_and_groups(self):
        name = "b3-scale"
        self.sm.update_cluster(ClusterName=name, InstanceGroups=groups(
            CONTROLLER, ("workers", "ml.c5.4xlarge", 3), ("extra", "ml.m5.large", 1)))
        d = self.wait_status(name, extra=lambda d: group(d, "extra") is not None and
                             group(d, "workers")["CurrentCount"] == 3 and
                             group(d, "extra")["CurrentCount"] == 1)
        self.assertEqual(group(d, "workers")["TargetCount"], 3)

        with self.assertRaises(ClientError) as ctx:  # the declarative replace
            self.sm.update_cluster(ClusterName=name, InstanceGroups=groups(CONTROLLER))
        message = self.assertCode(ctx, "ValidationException")
        self.assertIn("'workers'", message)

        self.sm.update_cluster(ClusterName=name,
                               InstanceGroups=groups(CONTROLLER, ("workers", "ml.c5.4xlarge", 1)),
                               InstanceGroupsToDelete=["extra"])
        d = self.wait_status(name, extra=lambda d: group(d, "extra") is None and
                             group(d, "workers")["CurrentCount"] == 1)
        self.assertEqual(sorted(g["InstanceGroupName"] for g in d["InstanceGroups"]),
                         ["controller", "workers"])
        harness.wait_until(lambda: len(self.sm.list_cluster_nodes(ClusterName=name)
                                       ["ClusterNodeSummaries"]) == 2,
                           what="the removed nodes to leave the listing")

        events = [e for p in self.sm.get_paginator("list_cluster_events").paginate(
                      ClusterName=name, PaginationConfig={"PageSize": 3}) for e in p["Events"]]
        self.assertEqual(len({e["EventId"] for e in events}), len(events))
        texts = [e["Description"] for e in events]
        for wanted in (f"Cluster {name} creation started", "workers scaling from 2 to 3",
                       "workers scaling from 3 to 1", "Instance group extra deleted",
                       f"Cluster {name} is InService"):
            self.assertTrue(any(wanted in t for t in texts), f"no {wanted!r} in {texts}")
        self.assertIsInstance(events[0]["EventTime"], datetime.datetime)
        only_groups = self.sm.list_cluster_events(ClusterName=name, ResourceType="InstanceGroup",
                                                  MaxResults=100)["Events"]
        self.assertTrue(only_groups)
        self.assertEqual({e["ResourceType"] for e in only_groups}, {"InstanceGroup"})
        scaling = next(e for e in only_groups if "scaling from 2 to 3" in e["Description"])
        detail = self.sm.describe_cluster_event(ClusterName=name, EventId=scaling["EventId"])
        self.assertEqual(detail["EventDetails"]["EventId"], scaling["EventId"])
        self.assertEqual(detail["EventDetails"]["EventDetails"]["EventMetadata"]
                         ["InstanceGroupScaling"], {"InstanceCount": 2, "TargetCount": 3})

    def test_tags(self):
        arn = self.arns["b3-main"]
        out = self.sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in
                                                      (("a", "1"), ("b", "2"), ("c", "3"))])
        self.assertEqual(len(out["Tags"]), 3)
        # ListTags pages hold 50..100 tags and a resource has at most 50: one page.
        tags = [t for p in self.sm.get_paginator("list_tags").paginate(
                    ResourceArn=arn, PaginationConfig={"PageSize": 50}) for t in p["Tags"]]
        self.assertEqual({t["Key"]: t["Value"] for t in tags},
                         {"env": "dev", "a": "1", "b": "2", "c": "3"})
        self.assertEqual(len(tags), 4)
        self.sm.delete_tags(ResourceArn=arn, TagKeys=["a", "b", "c"])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"],
                         [{"Key": "env", "Value": "dev"}])
        with self.assertRaises(self.sm.exceptions.ResourceNotFound):
            self.sm.list_tags(ResourceArn=arn[:-12] + "zzzzzzzzzzzz")

    def test_batch_delete_cluster_nodes(self):
        name = "b3-batch"
        victim = self.sm.list_cluster_nodes(ClusterName=name, InstanceGroupNameContains="workers")[
            "ClusterNodeSummaries"][0]["InstanceId"]
        out = self.sm.batch_delete_cluster_nodes(ClusterName=name,
                                                 NodeIds=[victim, UNKNOWN_NODE],
                                                 NodeLogicalIds=["no-such-node"])
        self.assertEqual(out["Successful"], [victim])
        self.assertEqual([(f["NodeId"], f["Code"]) for f in out["Failed"]],
                         [(UNKNOWN_NODE, "NodeIdNotFound")])
        self.assertEqual([f["NodeLogicalId"] for f in out["FailedNodeLogicalIds"]],
                         ["no-such-node"])
        harness.wait_until(lambda: victim not in {
            n["InstanceId"] for n in self.sm.list_cluster_nodes(ClusterName=name)
            ["ClusterNodeSummaries"]}, what=f"{victim} to go")
        self.assertEqual(group(self.sm.describe_cluster(ClusterName=name), "workers")
                         ["TargetCount"], 1)

    def test_batch_reboot_and_replace_cluster_nodes(self):
        name = "b3-recover"
        nodes = self.sm.list_cluster_nodes(ClusterName=name, InstanceGroupNameContains="workers")[
            "ClusterNodeSummaries"]
        rebooted, replaced = nodes[0]["InstanceId"], nodes[1]["InstanceId"]
        replaced_logical = self.sm.describe_cluster_node(
            ClusterName=name, NodeId=replaced)["NodeDetails"]["NodeLogicalId"]
        before_ip = self.sm.describe_cluster_node(
            ClusterName=name, NodeId=replaced)["NodeDetails"]["PrivatePrimaryIp"]

        out = self.sm.batch_reboot_cluster_nodes(ClusterName=name,
                                                 NodeIds=[rebooted, UNKNOWN_NODE])
        self.assertEqual(out["Successful"], [rebooted])
        self.assertEqual([(f["NodeId"], f["ErrorCode"]) for f in out["Failed"]],
                         [(UNKNOWN_NODE, "InstanceIdNotFound")])
        # While it reboots it is Pending with a message, and a second request is refused.
        node = self.sm.describe_cluster_node(ClusterName=name, NodeId=rebooted)["NodeDetails"]
        self.assertEqual(node["InstanceStatus"]["Status"], "Pending")
        self.assertIn("Reboot", node["InstanceStatus"]["Message"])
        again = self.sm.batch_replace_cluster_nodes(ClusterName=name, NodeIds=[rebooted])
        self.assertEqual([f["ErrorCode"] for f in again["Failed"]], ["InstanceIdInUse"])

        out = self.sm.batch_replace_cluster_nodes(ClusterName=name,
                                                  NodeLogicalIds=[replaced_logical])
        self.assertEqual(out["SuccessfulNodeLogicalIds"], [replaced_logical])

        def recovered():
            now = {n["InstanceId"]: n for n in self.sm.list_cluster_nodes(
                ClusterName=name, InstanceGroupNameContains="workers")["ClusterNodeSummaries"]}
            if len(now) != 2 or any(n["InstanceStatus"]["Status"] != "Running"
                                    for n in now.values()):
                return None
            return now
        now = harness.wait_until(recovered, timeout=60, what="the reboot and the replacement")
        self.assertIn(rebooted, now)          # a reboot keeps the instance
        self.assertNotIn(replaced, now)       # a replacement is a new instance ...
        successor = next(i for i in now if i != rebooted)
        details = self.sm.describe_cluster_node(ClusterName=name, NodeId=successor)["NodeDetails"]
        self.assertEqual(details["NodeLogicalId"], replaced_logical)  # ... in the same place
        self.assertEqual(details["PrivatePrimaryIp"], before_ip)
        events = [e["Description"] for e in self.sm.list_cluster_events(
            ClusterName=name, MaxResults=100)["Events"]]
        self.assertTrue(any(d == f"Instance {rebooted} rebooted" for d in events), events)
        self.assertTrue(any(d.startswith(f"Replacing instance {replaced} with {successor}")
                            for d in events), events)

        with self.assertRaises(ClientError) as ctx:
            self.sm.batch_reboot_cluster_nodes(ClusterName=name)
        self.assertIn("NodeIds", self.assertCode(ctx, "ValidationException"))
        with self.assertRaises(ClientError) as ctx:
            self.sm.batch_reboot_cluster_nodes(ClusterName=name, NodeIds=[UNKNOWN_NODE] * 26)
        self.assertCode(ctx, "ValidationException")
        with self.assertRaises(self.sm.exceptions.ResourceNotFound):
            self.sm.batch_replace_cluster_nodes(ClusterName="no-such-cluster",
                                                NodeIds=[UNKNOWN_NODE])

    def test_delete_cluster(self):
        name = "b3-doomed"
        self.assertEqual(self.sm.delete_cluster(ClusterName=name)["ClusterArn"], self.arns[name])

        def gone():
            try:
                self.assertEqual(self.sm.describe_cluster(ClusterName=name)["ClusterStatus"],
                                 "Deleting")
                return False
            except self.sm.exceptions.ResourceNotFound:
                return True
        harness.wait_until(gone, what=f"{name} to be deleted")
        with self.assertRaises(self.sm.exceptions.ResourceNotFound):
            self.sm.list_cluster_nodes(ClusterName=name)

    def test_errors(self):
        before = self.sm.list_clusters(MaxResults=100)["ClusterSummaries"]
        with self.assertRaises(self.sm.exceptions.ResourceInUse) as ctx:
            self.sm.create_cluster(**harness.cluster_spec("b3-main"))
        self.assertIn("b3-main", self.assertCode(ctx, "ResourceInUse"))
        for spec, text in ((harness.cluster_spec("bad_name!"), "failed to satisfy constraint"),
                           (harness.cluster_spec("a" * 64), "failed to satisfy constraint"),
                           (harness.cluster_spec("enum-bad", NodeRecovery="Bogus"), "Bogus"),
                           (harness.cluster_spec("eks-one", Orchestrator={"Eks": {
                               "ClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/k"}}),
                            "Eks")):
            with self.subTest(name=spec["ClusterName"]):
                with self.assertRaises(ClientError) as ctx:
                    self.sm.create_cluster(**spec)
                self.assertIn(text, self.assertCode(ctx, "ValidationException"))
        with self.assertRaises(self.sm.exceptions.ResourceNotFound) as ctx:
            self.sm.describe_cluster(ClusterName="nope")
        self.assertIn("nope", self.assertCode(ctx, "ResourceNotFound"))
        with self.assertRaises(self.sm.exceptions.ResourceNotFound):
            self.sm.update_cluster(ClusterName="nope", NodeRecovery="None")
        after = self.sm.list_clusters(MaxResults=100)["ClusterSummaries"]
        self.assertEqual(sorted(c["ClusterArn"] for c in after),
                         sorted(c["ClusterArn"] for c in before))


class Boto3CreatingTest(unittest.TestCase):
    """Instances take a minute to boot here, so the cluster stays Creating."""

    def test_update_while_creating_is_a_conflict(self):
        with harness.Server(boot_delay_ms=60000) as server:
            sm = make_client(server.endpoint)
            sm.create_cluster(**harness.cluster_spec("slow"))
            self.assertEqual(sm.describe_cluster(ClusterName="slow")["ClusterStatus"], "Creating")
            with self.assertRaises(sm.exceptions.ConflictException) as ctx:
                sm.update_cluster(ClusterName="slow", InstanceGroups=groups(
                    CONTROLLER, ("workers", "ml.c5.4xlarge", 5)))
            self.assertIn("Creating", ctx.exception.response["Error"]["Message"])
            d = sm.describe_cluster(ClusterName="slow")
            self.assertEqual(d["ClusterStatus"], "Creating")
            self.assertEqual(group(d, "workers")["TargetCount"], 2)


if __name__ == "__main__":
    harness.main()
