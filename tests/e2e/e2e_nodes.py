"""Real nodes end to end (docs/nodes.md): the local provider boots namespaced nodes with systemd
from the node image, the agent runs lifecycle scripts from the local bucket directory, and
the aws CLI, `aws logs` and `hyperfleet ssm` see the result. Needs root and the node image
(scripts/setup builds it); skipped otherwise."""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import unittest

from harness import (BINARY, MODELS, REGION, Server, aws_env, main, wait_until)

IMAGE_DIR = os.environ.get("HYPERFLEET_IMAGE_DIR", "/var/lib/hyperfleet/images")


def image_built():
    return bool(glob.glob(os.path.join(IMAGE_DIR, "*", "rootfs", "usr", "lib", "systemd")))


def aws_v2():
    """An aws CLI v2 (it has `logs tail`), or None."""
    for candidate in (shutil.which("aws"), "/usr/bin/aws"):
        if candidate and os.path.exists(candidate):
            r = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            if r.stdout.startswith("aws-cli/2."):
                return candidate
    return None


ON_CREATE = textwrap.dedent("""\
    #!/bin/bash
    set -euo pipefail
    echo "on_create in $(pwd) as $(id -un) on $(hostname)"
    echo "SAGEMAKER_RESOURCE_CONFIG_PATH=$SAGEMAKER_RESOURCE_CONFIG_PATH"
    # HyperPod's way of finding this node's address (base-config does the same in Python).
    ip=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.254.254.254", 1)); print(s.getsockname()[0])')
    echo "my address is $ip"
    bash ./utils/helper.sh
    useradd -m alice-$(hostname)
    echo "marker of $(hostname)" > /etc/node-marker
    cat > /etc/systemd/system/lcs-demo.service <<'UNIT'
    [Unit]
    Description=Unit enabled by a lifecycle script
    [Service]
    ExecStart=/bin/sleep infinity
    [Install]
    WantedBy=multi-user.target
    UNIT
    systemctl daemon-reload
    systemctl enable --now lcs-demo.service
    echo "$(hostname) $ip" >> /fsx/lcs-runs
    echo "lifecycle done"
    """)


class NodeFixture(unittest.TestCase):
    """A server with the local provider and lifecycle bundles in its local bucket."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        if not image_built():
            raise unittest.SkipTest(f"no node image under {IMAGE_DIR} (run scripts/setup)")
        cls.server = Server(provider="local",
                            extra_args=["--lifecycle-timeout", "8", "--heartbeat-interval", "2",
                                        "--image-dir", IMAGE_DIR])
        bucket = os.path.join(cls.server.data_dir, "s3", "lcs-bucket")
        cls.bucket = bucket
        cls.write(f"{bucket}/base/on_create.sh", ON_CREATE)
        cls.write(f"{bucket}/base/utils/helper.sh", "echo helper ran from $(pwd)\n")
        cls.write(f"{bucket}/base/provisioning_parameters.json",
                  json.dumps({"version": "1.0.0", "workload_manager": "slurm",
                              "controller_group": "controller"}))
        # Failure cases, one prefix each.
        cls.write(f"{bucket}/fails/on_create.sh", "#!/bin/bash\necho about to fail\nexit 3\n")
        cls.write(f"{bucket}/hangs/on_create.sh", "#!/bin/bash\necho hanging\nsleep 600\n")
        cls.write(f"{bucket}/crlf/on_create.sh", "#!/bin/bash\r\necho hi\r\n")
        cls.write(f"{bucket}/missing/other.sh", "#!/bin/bash\n")
        os.makedirs(f"{bucket}/empty", exist_ok=True)
        cls.write(f"{bucket}/escape/on_create.sh", "#!/bin/bash\n")
        os.symlink("/etc/passwd", f"{bucket}/escape/passwd")
        cls.server.start()
        cls.env = aws_env(cls.server.endpoint)

    @classmethod
    def tearDownClass(cls):
        server = getattr(cls, "server", None)
        if server is None:
            return
        # Delete every cluster and wait, so the test leaves no node behind.
        try:
            for name in cls.cluster_names():
                cls.aws("sagemaker", "delete-cluster", "--cluster-name", name, check=False)
            wait_until(lambda: not cls.cluster_names(), timeout=180, what="clusters deleted")
            local = os.path.join(server.data_dir, "local")
            wait_until(lambda: not os.listdir(os.path.join(local, "nodes"))
                       if os.path.isdir(os.path.join(local, "nodes")) else True,
                       timeout=60, what="node directories removed")
            cls.check_nothing_left(local)
        finally:
            server.cleanup()

    @classmethod
    def check_nothing_left(cls, local):
        """More checks once every cluster is deleted, before the server goes (subclasses)."""

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def write(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", newline="") as f:
            f.write(text)

    @classmethod
    def aws(cls, *args, check=True):
        r = subprocess.run(["aws", *args, "--output", "json", "--endpoint-url",
                            cls.server.endpoint], env=cls.env,
                           capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)} failed: {r.stderr}")
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else r

    @classmethod
    def cluster_names(cls):
        return [c["ClusterName"] for c in
                cls.aws("sagemaker", "list-clusters")["ClusterSummaries"]]

    @classmethod
    def create(cls, name, groups, prefix="base", **extra):
        spec = {"ClusterName": name, "InstanceGroups": [{
            "InstanceGroupName": g, "InstanceType": t, "InstanceCount": n,
            "LifeCycleConfig": {"SourceS3Uri": f"s3://lcs-bucket/{prefix}/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole"}
            for g, t, n in groups]}
        spec.update(extra)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            return cls.aws("sagemaker", "create-cluster", "--cli-input-json", f"file://{f.name}")
        finally:
            os.unlink(f.name)

    @classmethod
    def describe(cls, name):
        return cls.aws("sagemaker", "describe-cluster", "--cluster-name", name)

    @classmethod
    def wait_status(cls, name, statuses, timeout=240):
        return wait_until(lambda: cls.describe(name)["ClusterStatus"] in statuses and
                          cls.describe(name), timeout=timeout, interval=0.5,
                          what=f"{name} to reach {statuses}")

    @classmethod
    def nodes(cls, name):
        return cls.aws("sagemaker", "list-cluster-nodes", "--cluster-name",
                       name)["ClusterNodeSummaries"]

    @classmethod
    def node_details(cls, name):
        return [cls.aws("sagemaker", "describe-cluster-node", "--cluster-name", name,
                        "--node-id", n["InstanceId"])["NodeDetails"] for n in cls.nodes(name)]

    @classmethod
    def run_on(cls, cluster_id, group, instance_id, command):
        """Runs `command` in a node through `hyperfleet ssm start-session --command`."""
        target = f"sagemaker-cluster:{cluster_id}_{group}-{instance_id}"
        return subprocess.run([BINARY, "ssm", "start-session", "--endpoint-url",
                               cls.server.endpoint, "--target", target, "--command", command],
                              env=cls.env, capture_output=True, text=True, timeout=60)



class NodesTest(NodeFixture):

    def test_1_three_node_cluster(self):
        arn = self.create("nodes", [("controller", "ml.c5.xlarge", 1),
                                    ("workers", "ml.c5.4xlarge", 2)])["ClusterArn"]
        cluster_id = arn.rsplit("/", 1)[1]
        self.wait_status("nodes", ["InService", "Failed"])
        c = self.describe("nodes")
        self.assertEqual(c["ClusterStatus"], "InService", c.get("FailureMessage"))
        details = self.node_details("nodes")
        self.assertEqual(len(details), 3)
        by_id = {}
        for d in details:
            self.assertRegex(d["InstanceId"], r"^i-[0-9a-f]{17}$")
            self.assertEqual(d["InstanceStatus"]["Status"], "Running")
            ip = d["PrivatePrimaryIp"]
            self.assertRegex(ip, r"^10\.\d+\.\d+\.\d+$")
            self.assertEqual(d["PrivateDnsHostname"].split(".")[0],
                             "ip-" + ip.replace(".", "-"))
            by_id[d["InstanceId"]] = d

        # resource_config.json on every node names every instance with its address.
        for d in details:
            r = self.run_on(cluster_id, d["InstanceGroupName"], d["InstanceId"],
                            "cat /opt/ml/config/resource_config.json")
            self.assertEqual(r.returncode, 0, r.stderr)
            rc = json.loads(r.stdout)
            self.assertEqual(rc["ClusterConfig"]["ClusterName"], "nodes")
            self.assertEqual(rc["ClusterConfig"]["ClusterArn"], arn)
            listed = {i["InstanceId"]: i for g in rc["InstanceGroups"]
                      for i in (g["Instances"] or [])}
            self.assertEqual(set(listed), set(by_id))
            for iid, inst in listed.items():
                self.assertEqual(inst["CustomerIpAddress"], by_id[iid]["PrivatePrimaryIp"])
            names = sorted(i["InstanceName"] for i in listed.values())
            self.assertEqual(names, ["controller-1", "workers-1", "workers-2"])

        ctl = next(d for d in details if d["InstanceGroupName"] == "controller")
        wrk = next(d for d in details if d["InstanceGroupName"] == "workers")
        ctl_host = ctl["PrivateDnsHostname"].split(".")[0]
        wrk_host = wrk["PrivateDnsHostname"].split(".")[0]
        on_ctl = lambda cmd: self.run_on(cluster_id, "controller", ctl["InstanceId"], cmd)
        on_wrk = lambda cmd: self.run_on(cluster_id, "workers", wrk["InstanceId"], cmd)

        # The controller has slurm.conf in HyperPod's dialect before its scripts run; workers
        # do not (configless).
        conf = on_ctl("cat /opt/slurm/etc/slurm.conf").stdout
        self.assertIn(f"SlurmctldHost={ctl_host}({ctl['PrivatePrimaryIp']})", conf)
        self.assertIn(f"NodeName={wrk_host} NodeHostname={wrk_host} "
                      f"NodeAddr={wrk['PrivatePrimaryIp']} CPUs=16", conf)
        self.assertNotEqual(on_wrk("test -e /opt/slurm/etc/slurm.conf").returncode, 0)

        # Sessions run on the right node.
        self.assertEqual(on_ctl("hostname").stdout.strip(), ctl_host)
        self.assertEqual(on_wrk("hostname").stdout.strip(), wrk_host)
        r = on_ctl("echo out; echo err >&2; exit 7")
        self.assertEqual((r.returncode, r.stdout.strip()), (7, "out"))
        self.assertIn("err", r.stderr)

        # Isolation: users, /etc and units stay in their node; /fsx is shared.
        self.assertEqual(on_ctl(f"id -u alice-{ctl_host}").returncode, 0)
        self.assertNotEqual(on_wrk(f"id -u alice-{ctl_host}").returncode, 0)
        self.assertNotEqual(subprocess.run(["id", "-u", f"alice-{ctl_host}"],
                                           capture_output=True).returncode, 0)
        self.assertEqual(on_ctl("cat /etc/node-marker").stdout.strip(), f"marker of {ctl_host}")
        self.assertEqual(on_wrk("cat /etc/node-marker").stdout.strip(), f"marker of {wrk_host}")
        self.assertFalse(os.path.exists("/etc/node-marker"))
        self.assertEqual(on_ctl("systemctl is-active lcs-demo.service").stdout.strip(), "active")
        self.assertFalse(os.path.exists("/etc/systemd/system/lcs-demo.service"))
        runs = on_wrk("cat /fsx/lcs-runs").stdout.split("\n")
        self.assertEqual(sorted(l.split()[0] for l in runs if l),
                         sorted(d["PrivateDnsHostname"].split(".")[0] for d in details))
        # Each node found itself through the 10.254.254.254 route.
        for line in (l for l in runs if l):
            host, ip = line.split()
            self.assertEqual(host, "ip-" + ip.replace(".", "-"))
        # The control plane's data dir is not visible, and the host kernel is read-only.
        self.assertNotEqual(on_wrk(f"ls {self.server.data_dir}/credentials").returncode, 0)
        self.assertNotEqual(on_wrk("sysctl -w vm.swappiness=11").returncode, 0)
        self.assertEqual(on_wrk("systemctl is-system-running").stdout.strip() in
                         ("running", "degraded"), True)
        # IMDSv2 answers each node for itself.
        imds = ("t=$(curl -sf -X PUT http://169.254.169.254/latest/api/token "
                "-H 'X-aws-ec2-metadata-token-ttl-seconds: 60') && "
                "for p in instance-id instance-type local-ipv4; do "
                "curl -sf -H \"X-aws-ec2-metadata-token: $t\" "
                "http://169.254.169.254/latest/meta-data/$p; echo; done")
        for d in (ctl, wrk):
            out = self.run_on(cluster_id, d["InstanceGroupName"], d["InstanceId"], imds)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(),
                             [d["InstanceId"], d["InstanceType"][len("ml."):],
                              d["PrivatePrimaryIp"]])
        # /etc/hosts names every node; nodes reach each other.
        hosts = on_wrk("cat /etc/hosts").stdout
        for d in details:
            self.assertIn(d["PrivatePrimaryIp"], hosts)
        r = on_wrk(f"python3 -c \"import socket; s=socket.socket(); s.settimeout(3); "
                   f"print(s.connect_ex(('{ctl['PrivatePrimaryIp']}', 22)))\"")
        self.assertIn(r.stdout.strip(), ("0", "111"), r.stderr)  # reached: open or refused

        # Bad session targets get clear errors.
        r = subprocess.run([BINARY, "ssm", "start-session", "--endpoint-url",
                            self.server.endpoint, "--target", "sagemaker-cluster:nonsense",
                            "--command", "true"], env=self.env, capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("sagemaker-cluster:<cluster-id>_", r.stderr)

        # The lifecycle output is in CloudWatch Logs, as HyperPod streams it.
        group = f"/aws/sagemaker/Clusters/nodes/{cluster_id}"
        stream = f"LifecycleConfig/workers/{wrk['InstanceId']}"
        events = self.aws("logs", "get-log-events", "--log-group-name", group,
                          "--log-stream-name", stream, "--start-from-head")["events"]
        messages = [e["message"] for e in events]
        self.assertIn("[SageMaker] Downloading lifecycle scripts", messages)
        self.assertIn("lifecycle done", messages)
        self.assertIn("helper ran from /tmp/lcs-bucket/base", messages)
        self.assertIn(f"my address is {wrk['PrivatePrimaryIp']}", messages)
        self.assertEqual(messages[-1], "[SageMaker] The lifecycle scripts succeeded.")
        aws2 = aws_v2()
        if aws2:  # `aws logs tail` exists only in aws CLI v2 (Debian's awscli package)
            tail = subprocess.run([aws2, "logs", "tail", group, "--since", "1h",
                                   "--endpoint-url", self.server.endpoint], env=self.env,
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(tail.returncode, 0, tail.stderr)
            self.assertIn("lifecycle done", tail.stdout)
            self.assertIn(stream, tail.stdout)
        tail = subprocess.run([BINARY, "logs", "tail", group, "--since", "1h", "--endpoint-url",
                               self.server.endpoint], env=self.env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(tail.returncode, 0, tail.stderr)
        self.assertIn("lifecycle done", tail.stdout)

        # Scale up: the lifecycle script runs on the new instance only.
        upd = {"ClusterName": "nodes", "InstanceGroups": [{
            "InstanceGroupName": g, "InstanceType": t, "InstanceCount": n,
            "LifeCycleConfig": {"SourceS3Uri": "s3://lcs-bucket/base/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole"}
            for g, t, n in [("controller", "ml.c5.xlarge", 1), ("workers", "ml.c5.4xlarge", 3)]]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(upd, f)
        self.aws("sagemaker", "update-cluster", "--cli-input-json", f"file://{f.name}")
        self.wait_status("nodes", ["InService", "Failed"])
        self.assertEqual(len(self.nodes("nodes")), 4)
        runs = [l for l in on_ctl("cat /fsx/lcs-runs").stdout.split("\n") if l]
        self.assertEqual(len(runs), 4, runs)
        # ... and every node's resource_config.json learns about it (heartbeat refresh).
        wait_until(lambda: on_ctl("cat /opt/ml/config/resource_config.json").stdout.count(
            "InstanceId") == 4, timeout=30, what="resource_config.json refreshed")

        # Scale down through BatchDeleteClusterNodes: the node and its pieces go away.
        victim = wrk["InstanceId"]
        self.aws("sagemaker", "batch-delete-cluster-nodes", "--cluster-name", "nodes",
                 "--node-ids", victim)
        wait_until(lambda: victim not in [n["InstanceId"] for n in self.nodes("nodes")],
                   timeout=120, what="deleted node gone")
        self.assertFalse(os.path.exists(os.path.join(self.server.data_dir, "local", "nodes",
                                                     victim)))
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(victim, netns)

    def test_2_failures_say_why(self):
        cases = {  # prefix -> what the node's message must say
            "fails": "exited with status 3",
            "hangs": "timed out",
            "crlf": "CRLF",
            "missing": "on_create.sh",
            "empty": "no lifecycle scripts found",
            "escape": "escapes",
        }
        for prefix in cases:
            self.create(f"fail-{prefix}", [("workers", "ml.c5.xlarge", 1)], prefix=prefix)
        for prefix, expected in cases.items():
            name = f"fail-{prefix}"
            c = self.wait_status(name, ["Failed", "InService"])
            self.assertEqual(c["ClusterStatus"], "Failed", name)
            self.assertIn("failed to provision with the following error", c["FailureMessage"])
            self.assertIn(expected, c["FailureMessage"], name)
            node = self.node_details(name)[0]
            self.assertEqual(node["InstanceStatus"]["Status"], "Failure")
            self.assertIn(expected, node["InstanceStatus"]["Message"], name)
        # The failing script's own output and the failure marker are in its log stream.
        c = self.describe("fail-fails")
        group = f"/aws/sagemaker/Clusters/fail-fails/{c['ClusterArn'].rsplit('/', 1)[1]}"
        out = self.aws("logs", "filter-log-events", "--log-group-name", group)["events"]
        messages = [e["message"] for e in out]
        self.assertIn("about to fail", messages)
        self.assertIn("[SageMaker] The lifecycle scripts failed.", messages)
        for prefix in cases:
            self.aws("sagemaker", "delete-cluster", "--cluster-name", f"fail-{prefix}")

    def test_3_continuous_mode_stays_in_service(self):
        self.create("cont", [("workers", "ml.c5.xlarge", 1)], prefix="fails",
                    NodeProvisioningMode="Continuous")
        c = self.wait_status("cont", ["InService", "Failed"])
        self.assertEqual(c["ClusterStatus"], "InService")
        events = self.aws("sagemaker", "list-cluster-events", "--cluster-name",
                          "cont")["Events"]
        self.assertTrue(any("exited with status 3" in e.get("Description", "") for e in events))
        self.aws("sagemaker", "delete-cluster", "--cluster-name", "cont")

    def test_4_restart_readopts_running_nodes(self):
        if "nodes" not in self.cluster_names():
            self.skipTest("needs the cluster of test_1")
        before = {n["InstanceId"] for n in self.nodes("nodes")}
        pids = {}
        for iid in before:
            with open(os.path.join(self.server.data_dir, "local", "nodes", iid,
                                   "supervisor.pid")) as f:
                pids[iid] = f.read().strip()
        self.server.stop()
        self.server.start()
        self.env = aws_env(self.server.endpoint)
        type(self).env = self.env
        self.wait_status("nodes", ["InService"])
        after = {n["InstanceId"]: n for n in self.nodes("nodes")}
        self.assertEqual(set(after), before)
        for iid in before:
            self.assertEqual(after[iid]["InstanceStatus"]["Status"], "Running")
            with open(os.path.join(self.server.data_dir, "local", "nodes", iid,
                                   "supervisor.pid")) as f:
                self.assertEqual(f.read().strip(), pids[iid], "node was restarted, not adopted")


class KilledNodeTest(NodeFixture):
    """A node whose nspawn is killed leaves nothing running, and its deletion leaves nothing.
    NodeRecovery None: the dead node is reported (Failure), not replaced (e2e_chaos.py covers
    Automatic)."""

    def test_killed_nspawn_leaves_nothing(self):
        arn = self.create("killed", [("workers", "ml.c5.xlarge", 1)],
                          NodeRecovery="None")["ClusterArn"]
        self.assertEqual(self.wait_status("killed", ["InService", "Failed"])["ClusterStatus"],
                         "InService")
        iid = self.nodes("killed")[0]["InstanceId"]
        node_dir = os.path.join(self.server.data_dir, "local", "nodes", iid)
        with open(os.path.join(node_dir, "nspawn.pid")) as f:
            nspawn = int(f.read())
        with open(os.path.join(self.server.data_dir, "local", "fleet-id")) as f:
            fleet = f.read().strip()
        cgroup = f"/sys/fs/cgroup/systemd/hyperfleet/{fleet}/{iid}"

        def node_pids():
            pids = []
            for root, _, files in os.walk(cgroup):
                if "cgroup.procs" in files:
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        pids += [int(p) for p in f.read().split()]
            return pids
        self.assertTrue(node_pids(), "the node runs in its cgroup")
        os.kill(nspawn, 9)
        wait_until(lambda: self.nodes("killed")[0]["InstanceStatus"]["Status"] == "Failure",
                   timeout=60, what="killed node reported")
        self.assertEqual([n["InstanceId"] for n in self.nodes("killed")], [iid], "not replaced")
        events = self.aws("sagemaker", "list-cluster-events", "--cluster-name", "killed")["Events"]
        self.assertTrue(any("Dead on instance " + iid in e["Description"] and
                            "NodeRecovery is None" in e["Description"] for e in events), events)
        wait_until(lambda: not node_pids(), timeout=30, what="the node's processes gone")
        self.aws("sagemaker", "delete-cluster", "--cluster-name", "killed")
        wait_until(lambda: "killed" not in self.cluster_names(), timeout=120,
                   what="cluster deleted")
        self.assertFalse(os.path.exists(cgroup))
        self.assertFalse(os.path.exists(node_dir))
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(iid, netns)
        self.assertNotIn(arn.rsplit("/", 1)[1], os.listdir(
            os.path.join(self.server.data_dir, "local", "clusters"))
            if os.path.isdir(os.path.join(self.server.data_dir, "local", "clusters")) else [])


if __name__ == "__main__":
    main()
