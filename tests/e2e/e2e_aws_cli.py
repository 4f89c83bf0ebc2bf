"""End-to-end: the real `aws` CLI (v1 or v2) drives a Hyperfleet server through every
implemented HyperPod operation. AWS_DATA_PATH (from harness.aws_env) points at our committed
model subset, so even a CLI whose built-in model predates HyperPod knows the operations and
their paginators.

A CLI call costs about a second of Python start-up, so independent calls run in parallel
(`parallel`) and each test class shares one server and a few clusters made in setUpClass."""

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

import harness

UNKNOWN_NODE = "i-0123456789abcdef0"
TRACE = os.environ.get("HF_E2E_TRACE") == "1"  # print each CLI call and its duration


def cli_version():
    """(major, minor, patch) of the `aws` on PATH."""
    out = subprocess.run(["aws", "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"aws-cli/(\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    if not m:
        raise AssertionError(f"cannot read the aws CLI version from {out.stdout!r} {out.stderr!r}")
    return tuple(int(x) for x in m.groups())


VERSION = cli_version()
# After a service error the CLI exits 255 (v1) or 254 (v2).
SERVICE_ERROR_EXIT = 255 if VERSION[0] == 1 else 254


def epoch(value):
    """A timestamp as the CLI prints it (v1: epoch number; v2: ISO 8601) in epoch seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def parallel(*thunks):
    """Runs independent CLI calls at once; returns their results in order (raises the first
    exception)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(thunks)) as pool:
        futures = [pool.submit(t) for t in thunks]
        return [f.result() for f in futures]


class Cli:
    """Runs `aws sagemaker ...` against one endpoint."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.env = harness.aws_env()

    def run(self, *args, endpoint=True, env=None):
        argv = ["aws", "sagemaker", *args, "--output", "json"]
        if endpoint:
            argv += ["--endpoint-url", self.endpoint]
        started = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env or self.env)
        if TRACE:
            print(f"  [{time.monotonic() - started:5.2f}s] aws sagemaker {args[0]} -> "
                  f"{r.returncode}", file=sys.stderr)
        return r

    def ok(self, *args, **kw):
        """The parsed JSON output of a call that must succeed."""
        r = self.run(*args, **kw)
        if r.returncode != 0:
            raise AssertionError(f"aws sagemaker {' '.join(args)} exited {r.returncode}: "
                                 f"{r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def err(self, code, *args):
        """The stderr of a call that must fail with service error `code`."""
        r = self.run(*args)
        if r.returncode != SERVICE_ERROR_EXIT or f"({code})" not in r.stderr:
            raise AssertionError(
                f"aws sagemaker {' '.join(args)}: expected exit {SERVICE_ERROR_EXIT} with "
                f"({code}); got exit {r.returncode}, stdout {r.stdout.strip()!r}, "
                f"stderr {r.stderr.strip()!r}")
        return r.stderr

    def describe(self, name):
        return self.ok("describe-cluster", "--cluster-name", name)

    def wait_status(self, name, status="InService", timeout=60, extra=lambda d: True):
        """Polls describe-cluster until the cluster has `status` and `extra(description)`."""
        def ready():
            d = self.describe(name)
            if d["ClusterStatus"] == "Failed":
                raise AssertionError(f"cluster {name} failed: {d.get('FailureMessage')}")
            return d if d["ClusterStatus"] == status and extra(d) else None
        return harness.wait_until(ready, timeout=timeout, interval=0.2,
                                  what=f"cluster {name} to be {status}")

    def nodes(self, name, *args):
        return self.ok("list-cluster-nodes", "--cluster-name", name, *args)["ClusterNodeSummaries"]

    def create(self, spec, *args):
        """create-cluster from a harness.cluster_spec, given with --cli-input-json."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            return self.ok("create-cluster", "--cli-input-json", f"file://{f.name}", *args)
        finally:
            os.unlink(f.name)


def groups_json(groups):
    """--instance-groups for update-cluster, in the form of harness.cluster_spec."""
    return json.dumps(harness.cluster_spec("x", groups)["InstanceGroups"])


def group(description, name):
    matches = [g for g in description["InstanceGroups"] if g["InstanceGroupName"] == name]
    return matches[0] if matches else None


class CliClusterTest(unittest.TestCase):
    """The main flows on one server with a short boot delay; each test owns its cluster."""

    CLUSTERS = ("cli-main", "cli-scale", "cli-groups", "cli-batch", "cli-doomed")

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=100).start()
        cls.cli = Cli(cls.server.endpoint)
        cls.arns = dict(zip(cls.CLUSTERS, parallel(
            lambda: cls.cli.create(harness.cluster_spec("cli-main"),
                                   "--tags", "Key=env,Value=dev", "Key=team,Value=ml"),
            *[(lambda n=n: cls.cli.create(harness.cluster_spec(n))) for n in cls.CLUSTERS[1:]],
        )))
        # cli-main is awaited with describe-cluster; the others with one list-clusters a poll.
        def others_in_service():
            statuses = {c["ClusterName"]: c["ClusterStatus"]
                        for c in cls.cli.ok("list-clusters")["ClusterSummaries"]}
            return all(statuses.get(n) == "InService" for n in cls.CLUSTERS[1:])
        cls.main_ready, _ = parallel(
            lambda: cls.cli.wait_status("cli-main"),
            lambda: harness.wait_until(others_in_service, timeout=60, interval=0.2,
                                       what="the test clusters to be InService"))

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_create_with_input_json_and_tags_then_describe(self):
        arn = self.arns["cli-main"]["ClusterArn"]
        self.assertRegex(arn, r"^arn:aws:sagemaker:us-west-2:\d{12}:cluster/[a-z0-9]{12}$")
        d = self.main_ready  # describe-cluster's answer once InService (setUpClass)
        tags = self.cli.ok("list-tags", "--resource-arn", arn)
        self.assertEqual(d["ClusterArn"], arn)
        self.assertEqual(d["ClusterName"], "cli-main")
        self.assertEqual(d["ClusterStatus"], "InService")
        self.assertEqual(d["NodeRecovery"], "Automatic")
        self.assertEqual(d["Orchestrator"], {"Slurm": {"SlurmConfigStrategy": "Managed"}})
        self.assertLess(abs(epoch(d["CreationTime"]) - time.time()), 600)
        self.assertEqual(
            {g["InstanceGroupName"]: (g["InstanceType"], g["CurrentCount"], g["TargetCount"],
                                      g["Status"]) for g in d["InstanceGroups"]},
            {"controller": ("ml.c5.xlarge", 1, 1, "InService"),
             "workers": ("ml.c5.4xlarge", 2, 2, "InService")})
        self.assertEqual(group(d, "workers")["LifeCycleConfig"],
                         {"SourceS3Uri": "s3://hyperfleet-lc/scripts/", "OnCreate": "on_create.sh"})
        kv = {t["Key"]: t["Value"] for t in tags["Tags"]}
        self.assertEqual(kv.get("env"), "dev")
        self.assertEqual(kv.get("team"), "ml")

    def test_list_and_describe_cluster_nodes(self):
        every, first, by_group, desc, unknown = parallel(
            lambda: self.cli.nodes("cli-main", "--page-size", "1"),
            lambda: self.cli.ok("list-cluster-nodes", "--cluster-name", "cli-main",
                                "--max-results", "2"),
            lambda: self.cli.nodes("cli-main", "--instance-group-name-contains", "work"),
            lambda: self.cli.nodes("cli-main", "--sort-by", "NAME", "--sort-order", "Descending"),
            lambda: self.cli.err("ResourceNotFound", "describe-cluster-node", "--cluster-name",
                                 "cli-main", "--node-id", UNKNOWN_NODE))
        ids = [n["InstanceId"] for n in every]
        self.assertEqual(len(ids), 3, every)
        self.assertEqual(len(set(ids)), 3, "a node came back twice across pages")
        for n in every:
            self.assertRegex(n["InstanceId"], r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$")
            self.assertEqual(n["InstanceStatus"]["Status"], "Running")
        # One raw server page (--max-results turns the CLI's auto-pagination off).
        self.assertEqual(len(first["ClusterNodeSummaries"]), 2)
        self.assertIn("NextToken", first)
        self.assertLess({n["InstanceId"] for n in first["ClusterNodeSummaries"]}, set(ids))
        controller = desc[-1]
        described = self.cli.ok("describe-cluster-node", "--cluster-name", "cli-main",
                                "--node-id", controller["InstanceId"])
        self.assertEqual([n["InstanceGroupName"] for n in by_group], ["workers", "workers"])
        self.assertEqual([n["InstanceGroupName"] for n in desc],
                         ["workers", "workers", "controller"])

        details = described["NodeDetails"]
        self.assertEqual(details["InstanceId"], controller["InstanceId"])
        self.assertEqual(details["InstanceGroupName"], "controller")
        self.assertEqual(details["InstanceType"], "ml.c5.xlarge")
        self.assertEqual(details["InstanceStatus"]["Status"], "Running")
        self.assertEqual(details["LifeCycleConfig"]["OnCreate"], "on_create.sh")
        self.assertIn(UNKNOWN_NODE, unknown)
        self.assertIn("DescribeClusterNode operation", unknown)

    def test_update_scales_group_up_and_down_and_events(self):
        name = "cli-scale"
        self.cli.ok("update-cluster", "--cluster-name", name, "--instance-groups",
                    groups_json([("controller", "ml.c5.xlarge", 1),
                                 ("workers", "ml.c5.4xlarge", 4)]))
        d = self.cli.wait_status(name, extra=lambda d: group(d, "workers")["CurrentCount"] == 4)
        self.assertEqual(group(d, "workers")["TargetCount"], 4)

        self.cli.ok("update-cluster", "--cluster-name", name, "--instance-groups",
                    groups_json([("controller", "ml.c5.xlarge", 1),
                                 ("workers", "ml.c5.4xlarge", 1)]))
        d = self.cli.wait_status(name, extra=lambda d: group(d, "workers")["CurrentCount"] == 1)
        self.assertEqual(group(d, "workers")["TargetCount"], 1)
        self.assertEqual(group(d, "controller")["CurrentCount"], 1)
        # Scale-down removes the surplus nodes from the listing once they are terminated.
        left = harness.wait_until(
            lambda: (lambda ns: ns if len(ns) == 1 else None)(
                self.cli.nodes(name, "--instance-group-name-contains", "workers")),
            timeout=60, interval=0.2, what="scale-down to remove 3 worker nodes")
        self.assertEqual(left[0]["InstanceStatus"]["Status"], "Running")

        events, group_events = parallel(
            lambda: self.cli.ok("list-cluster-events", "--cluster-name", name,
                                "--page-size", "5")["Events"],
            lambda: self.cli.ok("list-cluster-events", "--cluster-name", name,
                                "--resource-type", "InstanceGroup")["Events"])
        texts = [e["Description"] for e in events]
        self.assertEqual(len({e["EventId"] for e in events}), len(events), "duplicate events")
        for wanted in (f"Cluster {name} creation started", f"Cluster {name} update started",
                       "Instance group workers scaling from 2 to 4",
                       "Instance group workers scaling from 4 to 1",
                       f"Cluster {name} is InService"):
            self.assertTrue(any(wanted in t for t in texts), f"no event {wanted!r} in {texts}")
        self.assertGreaterEqual(sum(f"Cluster {name} is InService" in t for t in texts), 3,
                                "InService after creation and after each update")
        self.assertTrue(group_events)
        self.assertEqual({e["ResourceType"] for e in group_events}, {"InstanceGroup"})
        self.assertLess(len(group_events), len(events))
        scaling = [e for e in group_events if "scaling from 2 to 4" in e["Description"]]
        self.assertEqual(len(scaling), 1, group_events)
        self.assertEqual(scaling[0]["InstanceGroupName"], "workers")
        self.assertEqual(scaling[0]["ClusterName"], name)

        detail = self.cli.ok("describe-cluster-event", "--cluster-name", name, "--event-id",
                             scaling[0]["EventId"])["EventDetails"]
        self.assertEqual(detail["EventId"], scaling[0]["EventId"])
        self.assertEqual(detail["ResourceType"], "InstanceGroup")
        self.assertEqual(epoch(detail["EventTime"]), epoch(scaling[0]["EventTime"]))
        self.assertEqual(detail["EventDetails"]["EventMetadata"]["InstanceGroupScaling"],
                         {"InstanceCount": 2, "TargetCount": 4})

    def test_update_adds_and_deletes_a_group(self):
        name = "cli-groups"
        base = [("controller", "ml.c5.xlarge", 1), ("workers", "ml.c5.4xlarge", 2)]
        self.cli.ok("update-cluster", "--cluster-name", name, "--instance-groups",
                    groups_json(base + [("extra", "ml.m5.large", 2)]))
        d = self.cli.wait_status(
            name, extra=lambda d: group(d, "extra") and group(d, "extra")["CurrentCount"] == 2)
        self.assertEqual(group(d, "extra")["InstanceType"], "ml.m5.large")
        self.assertEqual(group(d, "extra")["TargetCount"], 2)

        self.cli.ok("update-cluster", "--cluster-name", name, "--instance-groups",
                    groups_json(base), "--instance-groups-to-delete", "extra")
        d = self.cli.wait_status(name, extra=lambda d: group(d, "extra") is None)
        self.assertEqual(sorted(g["InstanceGroupName"] for g in d["InstanceGroups"]),
                         ["controller", "workers"])
        left = self.cli.nodes(name)
        self.assertEqual(sorted(n["InstanceGroupName"] for n in left),
                         ["controller", "workers", "workers"])

    def test_update_is_declarative_replace(self):
        before = self.main_ready
        stderr = self.cli.err("ValidationException", "update-cluster", "--cluster-name", "cli-main",
                              "--instance-groups", groups_json([("controller", "ml.c5.xlarge", 3)]))
        self.assertIn("'workers'", stderr)
        self.assertIn("InstanceGroupsToDelete", stderr)
        after = self.cli.describe("cli-main")
        self.assertEqual(after["ClusterStatus"], "InService")
        self.assertEqual(after["InstanceGroups"], before["InstanceGroups"])
        self.assertEqual(after["InstanceGroups"][0]["TargetCount"], 1)

    def test_tags(self):
        arn = self.arns["cli-main"]["ClusterArn"]
        added = self.cli.ok("add-tags", "--resource-arn", arn, "--tags",
                            "Key=cost-center,Value=42", "Key=owner,Value=alice")
        self.assertEqual(sorted(t["Key"] for t in added["Tags"]), ["cost-center", "owner"])
        kv = {t["Key"]: t["Value"] for t in self.cli.ok("list-tags", "--resource-arn", arn)["Tags"]}
        self.assertEqual(kv.get("cost-center"), "42")
        self.assertEqual(kv.get("owner"), "alice")
        self.cli.ok("delete-tags", "--resource-arn", arn, "--tag-keys", "cost-center", "owner")
        keys = {t["Key"] for t in self.cli.ok("list-tags", "--resource-arn", arn)["Tags"]}
        self.assertNotIn("cost-center", keys)
        self.assertNotIn("owner", keys)
        self.assertIn("env", keys)  # the tag given at creation stays

    def test_batch_delete_cluster_nodes(self):
        name = "cli-batch"
        victim = self.cli.nodes(name, "--instance-group-name-contains", "workers")[0]["InstanceId"]
        out = self.cli.ok("batch-delete-cluster-nodes", "--cluster-name", name,
                          "--node-ids", victim, UNKNOWN_NODE)
        # (The response has no ClusterArn member in the model, so the CLI drops it.)
        self.assertEqual(out["Successful"], [victim])
        self.assertEqual(len(out["Failed"]), 1)
        self.assertEqual(out["Failed"][0]["NodeId"], UNKNOWN_NODE)
        self.assertEqual(out["Failed"][0]["Code"], "NodeIdNotFound")
        left = harness.wait_until(
            lambda: (lambda ns: ns if victim not in {n["InstanceId"] for n in ns} else None)(
                self.cli.nodes(name)),
            timeout=60, interval=0.2, what=f"node {victim} to be removed")
        # Deleted nodes are not replaced: the group's target shrinks with it.
        self.assertEqual(sorted(n["InstanceGroupName"] for n in left), ["controller", "workers"])
        self.assertEqual(group(self.cli.describe(name), "workers")["TargetCount"], 1)

    def test_delete_cluster(self):
        name = "cli-doomed"
        out = self.cli.ok("delete-cluster", "--cluster-name", name)
        self.assertEqual(out["ClusterArn"], self.arns[name]["ClusterArn"])

        def gone():
            r = self.cli.run("describe-cluster", "--cluster-name", name)
            if r.returncode == 0:
                self.assertEqual(json.loads(r.stdout)["ClusterStatus"], "Deleting")
                return False
            self.assertEqual(r.returncode, SERVICE_ERROR_EXIT, r.stderr)
            return "(ResourceNotFound)" in r.stderr
        harness.wait_until(gone, timeout=60, interval=0.2, what=f"{name} to be deleted")
        names = {c["ClusterName"] for c in self.cli.ok("list-clusters")["ClusterSummaries"]}
        self.assertNotIn(name, names)
        self.assertIn("cli-main", names)

    def test_errors(self):
        base = harness.cluster_spec("x")
        orch = json.dumps(base["Orchestrator"])
        igs = json.dumps(base["InstanceGroups"])
        create = lambda name, *more: ["create-cluster", "--cluster-name", name,
                                      "--instance-groups", igs, *more]
        dup, bad, long_name, enum, eks, missing = parallel(
            lambda: self.cli.err("ResourceInUse", *create("cli-main", "--orchestrator", orch)),
            lambda: self.cli.err("ValidationException", *create("bad_name!")),
            lambda: self.cli.err("ValidationException", *create("a" * 64)),
            lambda: self.cli.err("ValidationException",
                                 *create("enum-bad", "--node-recovery", "Bogus")),
            lambda: self.cli.err("ValidationException", *create(
                "eks-one", "--orchestrator",
                '{"Eks":{"ClusterArn":"arn:aws:eks:us-west-2:123456789012:cluster/k"}}')),
            lambda: self.cli.err("ResourceNotFound", "describe-cluster", "--cluster-name", "nope"))
        self.assertIn("cli-main", dup)
        self.assertIn("failed to satisfy constraint", bad)
        self.assertIn("bad_name!", bad)
        self.assertIn("failed to satisfy constraint", long_name)
        self.assertIn("63", long_name)
        self.assertIn("failed to satisfy constraint", enum)
        self.assertIn("Bogus", enum)
        self.assertIn("Eks", eks)
        self.assertIn("nope", missing)
        # The rejected creates changed nothing.
        after = {c["ClusterName"]: c["ClusterArn"]
                 for c in self.cli.ok("list-clusters")["ClusterSummaries"]}
        self.assertEqual(after["cli-main"], self.arns["cli-main"]["ClusterArn"])
        self.assertFalse({"bad_name!", "a" * 64, "enum-bad", "eks-one", "nope"} & set(after))
        self.assertLessEqual(set(after), set(self.CLUSTERS))

    def test_endpoint_from_environment(self):
        if VERSION[0] == 2 and VERSION[:2] < (2, 13):
            self.skipTest(f"aws-cli {'.'.join(map(str, VERSION))} ignores AWS_ENDPOINT_URL "
                          "(service endpoint variables arrived in 2.13)")
        env = harness.aws_env(self.server.endpoint)
        env_specific = harness.aws_env()
        env_specific["AWS_ENDPOINT_URL_SAGEMAKER"] = self.server.endpoint
        # (A short connect timeout: a CLI that ignored the variables would try the real AWS.)
        generic, specific = parallel(
            lambda: self.cli.ok("describe-cluster", "--cluster-name", "cli-main",
                                "--cli-connect-timeout", "5", endpoint=False, env=env),
            lambda: self.cli.ok("describe-cluster", "--cluster-name", "cli-main",
                                "--cli-connect-timeout", "5", endpoint=False, env=env_specific))
        self.assertEqual(generic["ClusterArn"], self.arns["cli-main"]["ClusterArn"])
        self.assertEqual(specific["ClusterArn"], self.arns["cli-main"]["ClusterArn"])


class CliListClustersTest(unittest.TestCase):
    """list-clusters paging, filters and sorting over 7 clusters on a server of their own."""

    FIRST = ("alpha-1", "bravo-2", "alpha-3")
    SECOND = ("charlie-4", "bravo-5", "alpha-6", "bravo-7")

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=100).start()
        cls.cli = Cli(cls.server.endpoint)
        one_group = [("workers", "ml.c5.xlarge", 1)]
        parallel(*[(lambda n=n: cls.cli.create(harness.cluster_spec(n, one_group)))
                   for n in cls.FIRST])
        # A whole-second cutoff after the first three (the CLI sends whole epoch seconds).
        cls.cutoff = int(time.time()) + 1
        harness.wait_until(lambda: time.time() > cls.cutoff + 0.05, timeout=5,
                           what="the clock to pass the cutoff second")
        parallel(*[(lambda n=n: cls.cli.create(harness.cluster_spec(n, one_group)))
                   for n in cls.SECOND])
        cls.names = set(cls.FIRST + cls.SECOND)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_pagination_filters_and_sort(self):
        iso_cutoff = datetime.datetime.fromtimestamp(
            self.cutoff, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        every, limited, raw, named, desc, after = parallel(
            lambda: self.cli.ok("list-clusters", "--page-size", "2"),
            lambda: self.cli.ok("list-clusters", "--page-size", "2", "--max-items", "3"),
            lambda: self.cli.ok("list-clusters", "--max-results", "2"),
            lambda: self.cli.ok("list-clusters", "--name-contains", "bravo"),
            lambda: self.cli.ok("list-clusters", "--sort-by", "NAME", "--sort-order", "Descending"),
            lambda: self.cli.ok("list-clusters", "--creation-time-after", iso_cutoff))
        names = lambda out: [c["ClusterName"] for c in out["ClusterSummaries"]]

        # --page-size follows NextToken to the end: every cluster once, no token left.
        self.assertEqual(sorted(names(every)), sorted(self.names))
        self.assertNotIn("NextToken", every)
        for c in every["ClusterSummaries"]:
            self.assertIn(c["ClusterStatus"], ("Creating", "InService"))
            self.assertRegex(c["ClusterArn"], r":cluster/[a-z0-9]{12}$")
            epoch(c["CreationTime"])
        # Default order is CreationTime ascending: the first batch before the second.
        self.assertEqual(set(names(every)[:3]), set(self.FIRST))

        # --max-items stops early with the CLI's own token; --starting-token goes on.
        self.assertEqual(len(limited["ClusterSummaries"]), 3)
        self.assertIn("NextToken", limited)
        rest = self.cli.ok("list-clusters", "--page-size", "2",
                           "--starting-token", limited["NextToken"])
        self.assertEqual(sorted(names(limited) + names(rest)), sorted(self.names))

        # --max-results turns auto-paging off: one server page and the server's token.
        self.assertEqual(len(raw["ClusterSummaries"]), 2)
        self.assertIn("NextToken", raw)

        self.assertEqual(sorted(names(named)), ["bravo-2", "bravo-5", "bravo-7"])
        self.assertEqual(names(desc), sorted(self.names, reverse=True))
        self.assertEqual(sorted(names(after)), sorted(self.SECOND))


class CliCreatingTest(unittest.TestCase):
    """A server whose instances take a minute to boot, so that clusters stay Creating."""

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=60000).start()
        cls.cli = Cli(cls.server.endpoint)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_update_while_creating_is_a_conflict(self):
        self.cli.create(harness.cluster_spec("slow"))
        update, batch = parallel(
            lambda: self.cli.err("ConflictException", "update-cluster", "--cluster-name", "slow",
                                 "--instance-groups",
                                 groups_json([("controller", "ml.c5.xlarge", 1),
                                              ("workers", "ml.c5.4xlarge", 3)])),
            lambda: self.cli.err("ConflictException", "batch-delete-cluster-nodes",
                                 "--cluster-name", "slow", "--node-ids", UNKNOWN_NODE))
        self.assertIn("Creating", update)
        self.assertIn("Creating", batch)
        d = self.cli.describe("slow")
        self.assertEqual(d["ClusterStatus"], "Creating")
        self.assertEqual(group(d, "workers")["TargetCount"], 2)


if __name__ == "__main__":
    harness.main()
