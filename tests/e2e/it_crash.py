"""kill -9 of the control plane in the middle of creates, updates and deletes: no
acknowledged write is lost, and after a restart the controllers converge to what was
declared (node counts match, no instance is left behind)."""

import json
import os
import random
import sqlite3
import threading

import boto3
import botocore.config
import botocore.exceptions

import harness


def client(endpoint):
    return boto3.client(
        "sagemaker", endpoint_url=endpoint, region_name=harness.REGION,
        aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
        config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=2,
                                      read_timeout=10))


class Workload:
    """Sends creates, scalings and deletes from one thread until the server dies, recording
    every acknowledged (HTTP 200) request."""

    def __init__(self, endpoint, rng, round_no):
        self.sm = client(endpoint)
        self.rng = rng
        self.round_no = round_no
        self.acked = []  # (op, cluster name, argument)
        self.in_flight = None  # the request sent but not answered when the server died
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        while True:
            i += 1
            name = f"r{self.round_no}-c{i}"
            try:
                self.in_flight = ("create", name)
                self.sm.create_cluster(**harness.cluster_spec(
                    name, groups=[("workers", "ml.c5.xlarge", self.rng.randint(1, 4))]))
                self.acked.append(("create", name, None))
                # Scale and delete earlier clusters of this round once they are InService.
                for op, other, _ in list(self.acked):
                    if op != "create" or self.rng.random() < 0.5:
                        continue
                    status = self.sm.describe_cluster(ClusterName=other)["ClusterStatus"]
                    if status != "InService":
                        continue
                    if self.rng.random() < 0.3:
                        self.in_flight = ("delete", other)
                        self.sm.delete_cluster(ClusterName=other)
                        self.acked.append(("delete", other, None))
                    else:
                        count = self.rng.randint(0, 5)
                        spec = harness.cluster_spec(
                            other, groups=[("workers", "ml.c5.xlarge", count)])
                        self.in_flight = ("update", other)
                        self.sm.update_cluster(ClusterName=other,
                                               InstanceGroups=spec["InstanceGroups"])
                        self.acked.append(("update", other, count))
            except botocore.exceptions.ClientError:
                continue  # e.g. ConflictException while a cluster is busy: not acknowledged
            except Exception:
                return  # the server is gone; in_flight may or may not have been applied
            self.in_flight = None


class CrashTest(harness.unittest.TestCase):
    def test_kill9_loses_no_acknowledged_write_and_converges(self):
        rng = random.Random(int(os.environ.get("HF_CRASH_SEED", "20261130")))
        server = harness.Server(boot_delay_ms=150)
        self.addCleanup(server.cleanup)
        expected = {}  # cluster name -> ("exists", target) | ("deleted", None)
        for round_no in range(5):
            server.start()
            sm = client(server.endpoint)
            self.check_acknowledged(sm, expected)
            work = Workload(server.endpoint, rng, round_no)
            work.thread.start()
            # Let a random number of requests through, then crash mid-stream.
            target = rng.randint(3, 12)
            harness.wait_until(lambda: len(work.acked) >= target, timeout=60,
                               what=f"{target} acknowledged writes")
            server.kill9()
            work.thread.join(timeout=30)
            for op, name, arg in work.acked:
                if op == "create":
                    spec_count = None
                    expected[name] = ("exists", spec_count)
                elif op == "update":
                    expected[name] = ("exists", arg)
                else:
                    expected[name] = ("deleted", None)
            if work.in_flight:
                # Sent but never answered: either outcome is correct.
                expected[work.in_flight[1]] = ("either", None)
        server.start()
        sm = client(server.endpoint)
        self.check_acknowledged(sm, expected)

        # Convergence: every cluster InService with its target count of Running nodes, and
        # every deleted cluster gone.
        blocker = {}

        def converged():
            for name, (state, _) in expected.items():
                blocker["name"] = name
                try:
                    d = sm.describe_cluster(ClusterName=name)
                except sm.exceptions.ResourceNotFound:
                    if state in ("deleted", "either"):
                        continue
                    raise AssertionError(f"cluster {name} lost")
                blocker["state"] = d
                if d["ClusterStatus"] != "InService":
                    return False
                for g in d["InstanceGroups"]:
                    if g["CurrentCount"] != g["TargetCount"]:
                        return False
            return True

        try:
            harness.wait_until(converged, timeout=90, what="all clusters to converge")
        except AssertionError:
            raise AssertionError(f"not converged: {blocker}")
        total_nodes = 0
        for name, (state, _) in expected.items():
            if state == "deleted":
                continue
            try:
                sm.describe_cluster(ClusterName=name)
            except sm.exceptions.ResourceNotFound:
                continue
            pages = sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name)
            nodes = [n for p in pages for n in p["ClusterNodeSummaries"]]
            self.assertTrue(all(n["InstanceStatus"]["Status"] == "Running" for n in nodes))
            total_nodes += len(nodes)
        server.stop()
        # The provider runs exactly the instances the store knows: none leaked, none lost.
        with open(os.path.join(server.data_dir, "fake-provider.json")) as f:
            instances = json.load(f)["instances"]
        live = [i for i in instances if "terminated" not in i]
        self.assertEqual(len(live), total_nodes)
        db = sqlite3.connect(os.path.join(server.data_dir, "state.db"))
        self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        db.close()

    def check_acknowledged(self, sm, expected):
        """Every acknowledged write is visible after the restart."""
        for name, (state, count) in expected.items():
            try:
                d = sm.describe_cluster(ClusterName=name)
            except sm.exceptions.ResourceNotFound:
                self.assertIn(state, ("deleted", "either"),
                              f"acknowledged cluster {name} was lost")
                continue
            if state == "either":
                continue
            if state == "deleted":
                self.assertEqual(d["ClusterStatus"], "Deleting",
                                 f"acknowledged delete of {name} was lost")
            elif count is not None:
                self.assertEqual(d["InstanceGroups"][0]["TargetCount"], count,
                                 f"acknowledged update of {name} was lost")


if __name__ == "__main__":
    harness.main()
