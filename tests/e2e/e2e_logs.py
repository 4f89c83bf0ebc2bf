"""End-to-end test of the CloudWatch Logs subset: node output enters the product as agents
send it (POST /agent/v1/logs on the agent endpoint, with each node's token; the fake
provider's instances, through --agent-listen), then is read back with the aws CLI
(describe-log-groups, get-log-events, filter-log-events; `aws logs tail`, also --follow, when
an aws CLI v2 is installed: v1 has no tail) and with `hyperfleet logs tail`."""

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

import boto3
import botocore.config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class Node:
    """A node of a cluster as its agent sees itself: where its output goes, and how it
    signs (docs/nodes.md: the token is hex(HMAC-SHA256(<data-dir>/local/node-secret, id)))."""

    def __init__(self, server, cluster_name, cluster_id, group, instance_id):
        self.server = server
        self.instance_id = instance_id
        self.log_group = f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_id}"
        self.log_stream = f"LifecycleConfig/{group}/{instance_id}"

    def send_logs(self, events):
        """Sends [(timestamp ms, message)] as the node's agent does."""
        with open(os.path.join(self.server.data_dir, "local", "node-secret"), "rb") as f:
            secret = f.read()
        token = hmac.new(secret, self.instance_id.encode(), hashlib.sha256).hexdigest()
        body = json.dumps({"events": [{"timestamp": ts, "message": m} for ts, m in events]})
        status, _ = harness.agent_request(
            self.server.agent_endpoint, self.server.agent_cert_sha256, "POST", "/agent/v1/logs",
            body=body.encode(), headers={"Authorization": f"HyperfleetNode {self.instance_id}:{token}",
                                         "Content-Type": "application/json"})
        assert status == 200, status


def create_cluster(server, name, groups):
    """Creates cluster `name` on the fake provider; returns {group: [Node]} once every
    instance has a record."""
    sm = boto3.session.Session().client(
        "sagemaker", endpoint_url=server.endpoint, region_name=harness.REGION,
        aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))
    arn = sm.create_cluster(**harness.cluster_spec(name, groups))["ClusterArn"]
    cluster_id = arn.rsplit("/", 1)[1]
    want = sum(n for _, _, n in groups)
    nodes = {}

    def listed():
        summaries = sm.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
        nodes.clear()
        for s in summaries:
            nodes.setdefault(s["InstanceGroupName"], []).append(
                Node(server, name, cluster_id, s["InstanceGroupName"], s["InstanceId"]))
        return len(summaries) == want

    harness.wait_until(listed, what=f"the instances of {name}")
    return nodes


def aws_v2():
    """An aws CLI that has `logs tail` (v2), or None."""
    for candidate in [shutil.which("aws"), "/usr/bin/aws", "/usr/local/bin/aws"]:
        if candidate and os.path.exists(candidate):
            r = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            if (r.stdout + r.stderr).startswith("aws-cli/2"):
                return candidate
    return None


class LogsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(provider="fake", extra_args=("--agent-listen", "127.0.0.1:0"))
        cls.server.start()
        cls.env = harness.aws_env(cls.server.endpoint)
        demo = create_cluster(cls.server, "demo", [("controller", "ml.c5.xlarge", 1),
                                                   ("workers", "ml.c5.4xlarge", 1)])
        # The --follow tests append to a cluster of their own, so that the exact counts of
        # the demo cluster's group hold in any order.
        follow = create_cluster(cls.server, "follow", [("controller", "ml.c5.xlarge", 1)])
        cls.controller, cls.worker = demo["controller"][0], demo["workers"][0]
        cls.follow_node = follow["controller"][0]
        cls.group, cls.stream = cls.controller.log_group, cls.controller.log_stream
        cls.t0 = int(time.time() * 1000) - 60_000
        cls.controller.send_logs([(cls.t0, "[hyperfleet] OnCreate started"),
                                  (cls.t0 + 1000, "installing packages"),
                                  (cls.t0 + 2000, "ERROR: something failed")])
        cls.worker.send_logs([(cls.t0 + 1500, "worker says hello")])
        cls.follow_node.send_logs([(cls.t0, "first line to follow")])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def aws(self, *args, binary="aws"):
        r = subprocess.run([binary, "logs", *args, "--endpoint-url", self.server.endpoint,
                            "--output", "json"], capture_output=True, text=True, timeout=60,
                           env=self.env)
        return r

    def hyperfleet(self, *args, timeout=60):
        return subprocess.run([harness.BINARY, "logs", *args, "--endpoint-url",
                               self.server.endpoint], capture_output=True, text=True,
                              timeout=timeout, env=self.env)

    def test_describe_log_groups(self):
        r = self.aws("describe-log-groups",
                     "--log-group-name-prefix", "/aws/sagemaker/Clusters/demo")
        self.assertEqual(r.returncode, 0, r.stderr)
        groups = json.loads(r.stdout)["logGroups"]
        self.assertEqual([g["logGroupName"] for g in groups], [self.group])
        self.assertTrue(groups[0]["arn"].startswith("arn:aws:logs:us-west-2:"))

    def test_get_log_events_and_errors(self):
        r = self.aws("get-log-events", "--log-group-name", self.group,
                     "--log-stream-name", self.stream, "--start-from-head")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual([e["message"] for e in out["events"]],
                         ["[hyperfleet] OnCreate started", "installing packages",
                          "ERROR: something failed"])
        again = self.aws("get-log-events", "--log-group-name", self.group, "--log-stream-name",
                         self.stream, "--next-token", out["nextForwardToken"])
        self.assertEqual(json.loads(again.stdout)["nextForwardToken"], out["nextForwardToken"])
        r = self.aws("get-log-events", "--log-group-name", "/nope", "--log-stream-name", "x")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ResourceNotFoundException", r.stderr)
        self.assertIn("The specified log group does not exist.", r.stderr)
        r = self.aws("get-log-events", "--log-group-name", self.group, "--log-stream-name", "x")
        self.assertIn("The specified log stream does not exist.", r.stderr)
        r = self.aws("get-log-events", "--log-group-name", self.group,
                     "--log-stream-name", self.stream, "--next-token", "garbage")
        self.assertIn("InvalidParameterException", r.stderr)
        self.assertIn("The specified nextToken is invalid.", r.stderr)

    def test_filter_log_events(self):
        r = self.aws("filter-log-events", "--log-group-name", self.group,
                     "--filter-pattern", "ERROR")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json.loads(r.stdout)["events"]
        self.assertEqual([e["message"] for e in events], ["ERROR: something failed"])
        r = self.aws("filter-log-events", "--log-group-name", self.group,
                     "--log-stream-name-prefix", "LifecycleConfig/")
        messages = [e["message"] for e in json.loads(r.stdout)["events"]]
        self.assertEqual(messages[2], "worker says hello")  # interleaved by time
        self.assertEqual(len(messages), 4)

    def test_hyperfleet_logs_tail_and_streams(self):
        r = self.hyperfleet("tail", self.group, "--since", "1h", "--format", "short")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[0].endswith(" [hyperfleet] OnCreate started"), lines)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.t0 / 1000))
        self.assertEqual(lines[0], f"{stamp} [hyperfleet] OnCreate started")
        r = self.hyperfleet("tail", self.group, "--since", "1h")
        self.assertIn(f" {self.stream} installing packages", r.stdout)
        r = self.hyperfleet("streams", self.group)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.stream, r.stdout)
        r = self.hyperfleet("tail", "/nope")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("An error occurred (ResourceNotFoundException) when calling the "
                      "FilterLogEvents operation: The specified log group does not exist.",
                      r.stderr)
        # Without credentials in the environment, the data dir's credentials file is used.
        env = dict(self.env)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.pop(k)
        r = subprocess.run([harness.BINARY, "logs", "streams", self.group, "--endpoint-url",
                            self.server.endpoint, "--data-dir", self.server.data_dir],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def follow(self, argv, marker):
        """Runs a tail --follow, sends `marker` as the follow node's output while it runs and
        waits until it printed it."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)
        try:
            first = proc.stdout.readline()  # it has printed the existing events
            self.assertTrue(first, proc.stderr.read() if proc.poll() is not None else "")
            self.follow_node.send_logs([(int(time.time() * 1000), marker)])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                if marker in line:
                    return line
            self.fail(f"{argv[0]} --follow did not print {marker!r}")
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def test_hyperfleet_logs_tail_follow(self):
        line = self.follow([harness.BINARY, "logs", "tail", self.follow_node.log_group,
                            "--since", "1h", "--follow", "--endpoint-url", self.server.endpoint],
                           "followed by hyperfleet")
        self.assertIn(self.follow_node.log_stream, line)

    def test_aws_logs_tail(self):
        binary = aws_v2()
        if not binary:
            self.skipTest("no aws CLI v2 (v1 has no `logs tail`)")
        r = subprocess.run([binary, "logs", "tail", self.group, "--since", "1h",
                            "--format", "short", "--endpoint-url", self.server.endpoint],
                           capture_output=True, text=True, timeout=60, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        mine = self.hyperfleet("tail", self.group, "--since", "1h", "--format", "short")
        self.assertEqual(r.stdout, mine.stdout)
        line = self.follow([binary, "logs", "tail", self.follow_node.log_group, "--since", "1h",
                            "--follow", "--endpoint-url", self.server.endpoint],
                           "followed by aws")
        self.assertIn(self.follow_node.log_stream, line)


if __name__ == "__main__":
    harness.main()
