"""The ssh provider against one real sshd machine (tests/e2e/ssh_machines.py, layer `site`),
through the real server (`--provider ssh`, the agent endpoint on the fleet's host address):
a one-node cluster provisions the machine over ssh (AMI layer in machine mode, the node binary
checked by SHA-256, agent.env 0600, the cluster's munge key, hostname ip-a-b-c-d, the marked
/etc/hosts block, the agent unit enabled); with a portable node binary (build/bin/
hyperfleet-node) the agent registers over the real network, runs the lifecycle script and the
node reboots for real (new boot id, back to Running). Deleting the cluster leaves the machine
as it was (hostname, /etc/hosts, no agent, unit, /etc/hyperfleet, /opt/ml/config, lifecycle
bundle) and free in the pool. Needs root; skipped otherwise."""

import hashlib
import json
import os
import subprocess
import unittest

import ssh_machines
from harness import BINARY, Server, aws_env, cluster_spec, main, wait_until

NODE_BINARY = os.path.join(os.path.dirname(BINARY), "hyperfleet-node")
TYPE = "ml.c5.large"


class Flags(unittest.TestCase):
    def test_ssh_needs_the_agent_endpoint(self):
        r = subprocess.run([BINARY, "server", "--provider", "ssh", "--listen", "127.0.0.1:0",
                            "--data-dir", "/nonexistent/hf-it-ssh"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("--provider ssh needs --agent-listen", r.stderr)


@unittest.skipUnless(os.geteuid() == 0, "needs root (the ssh test machines)")
class MachineClusterCase(unittest.TestCase):
    """What the tests of a cluster on ssh test machines share: the aws CLI and `hyperfleet`
    against the class's server (cls.server, cls.env, cls.fleet), and its cluster
    (cls.cluster), deleted with the server and fleet at the end."""
    cluster = ""

    @classmethod
    def start_one_machine_and_server(cls, provider, bucket, extra_args=()):
        """Boots one `site` test machine (cls.fleet, cls.m) and a server of `provider` with its
        agent endpoint on the fleet's bridge (cls.server, cls.env); s3://<bucket>/scripts/
        holds an on_create.sh that writes /var/tmp/on_create.txt."""
        cls.fleet = ssh_machines.Fleet(1, layer="site").start()
        cls.m = cls.fleet.machines[0]
        cls.server = Server(provider=provider, extra_args=[
            "--agent-listen", f"{cls.fleet.host_address}:0", "--heartbeat-interval", "1",
            *extra_args])
        lcs = os.path.join(cls.server.data_dir, "s3", bucket, "scripts")
        os.makedirs(lcs)
        with open(os.path.join(lcs, "on_create.sh"), "w") as f:
            f.write("#!/bin/bash\nset -e\necho on_create ran > /var/tmp/on_create.txt\n")
        try:
            cls.server.start()
        except BaseException:
            cls.fleet.close()
            cls.server.cleanup()
            raise
        cls.env = aws_env(cls.server.endpoint)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.aws("sagemaker", "delete-cluster", "--cluster-name", cls.cluster, check=False)
        finally:
            cls.server.cleanup()
            cls.fleet.close()

    @classmethod
    def aws(cls, *args, check=True):
        r = subprocess.run(["aws", *args, "--output", "json"], env=cls.env, capture_output=True,
                           text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)}: {r.stdout}{r.stderr}")
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None

    @classmethod
    def hf(cls, *args):
        r = subprocess.run([BINARY, *args, "--endpoint-url", cls.server.endpoint], env=cls.env,
                           capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise AssertionError(f"hyperfleet {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def machine(self):
        data = json.loads(self.hf("machines", "list", "--output", "json"))
        return (data["Machines"] if isinstance(data, dict) else data)[0]

    def nodes(self):
        r = self.aws("sagemaker", "list-cluster-nodes", "--cluster-name", self.cluster, check=False)
        return r["ClusterNodeSummaries"] if r else []


class SshProvider(MachineClusterCase):
    cluster = "ssh-it"

    @classmethod
    def setUpClass(cls):
        cls.start_one_machine_and_server("ssh", "lc-bucket")
        # Nothing is provisioned before a cluster is created: this is the machine as it was.
        cls.before = cls.m.ssh("hostname; cat /etc/hosts; cat /etc/munge/munge.key | sha256sum",
                               check=True).stdout

    def on(self, command):
        return self.m.ssh(command, check=True).stdout

    def test_node_on_a_machine(self):
        key = os.path.join(self.server.data_dir, "host-key.pub")
        with open(key, "w") as f:
            f.write(self.m.host_key_pub + "\n")
        self.hf("machines", "add", self.m.address, "--user", "root", "--key",
                self.fleet.key_path, "--host-key-file", key, "--instance-type", TYPE)
        self.assertEqual(self.machine()["State"], "free")

        spec = cluster_spec("ssh-it", groups=[("controller", TYPE, 1)])
        spec["InstanceGroups"][0]["LifeCycleConfig"] = {
            "SourceS3Uri": "s3://lc-bucket/scripts/", "OnCreate": "on_create.sh"}
        spec.pop("Orchestrator")
        with open(os.path.join(self.server.data_dir, "spec.json"), "w") as f:
            json.dump(spec, f)
        self.aws("sagemaker", "create-cluster", "--cli-input-json",
                 "file://" + os.path.join(self.server.data_dir, "spec.json"))

        # Provisioned over ssh: the machine holds the node's identity and the agent unit.
        hostname = "ip-" + self.m.address.replace(".", "-")
        wait_until(lambda: self.m.ssh("test -s /etc/hyperfleet/agent.env && "
                                      "systemctl is-enabled hyperfleet-agent").returncode == 0,
                   timeout=600, interval=2, what="the machine provisioned")
        self.assertEqual(self.machine()["State"], "in-use")
        self.assertEqual(self.on("hostname").strip(), hostname)
        hosts = self.on("cat /etc/hosts")
        self.assertIn(f"{self.m.address} {hostname}.", hosts)
        self.assertIn("# BEGIN hyperfleet cluster nodes", hosts)
        self.assertEqual(self.on("stat -c %a /etc/hyperfleet/agent.env").strip(), "600")
        env = self.on("cat /etc/hyperfleet/agent.env")
        self.assertIn(f"HF_AGENT_URL={self.server.agent_url}", env)
        self.assertIn(f"HF_AGENT_CERT_SHA256={self.server.agent_cert_sha256}", env)
        self.assertEqual(self.on("stat -c '%a %U' /etc/munge/munge.key").strip(), "400 munge")
        self.assertIn("/opt/slurm", self.on("readlink -f /etc/slurm; ls -d /opt/slurm"))
        with open(NODE_BINARY if os.path.exists(NODE_BINARY) else BINARY, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual(self.on("sha256sum /opt/hyperfleet/bin/hyperfleet").split()[0], want)

        if os.path.exists(NODE_BINARY):
            # The agent registers over the real network (TLS, pinned), runs OnCreate.
            wait_until(lambda: [n["InstanceStatus"]["Status"] for n in self.nodes()] ==
                       ["Running"], timeout=600, interval=2, what="node Running")
            self.assertEqual(self.on("cat /var/tmp/on_create.txt").strip(), "on_create ran")
            iid = self.nodes()[0]["InstanceId"]
            boot = self.m.boot_id()

            def boot_id():  # None while the machine reboots
                r = self.m.ssh("cat /proc/sys/kernel/random/boot_id")
                return r.stdout.strip() if r.returncode == 0 else None

            self.aws("sagemaker", "batch-reboot-cluster-nodes", "--cluster-name", "ssh-it",
                     "--node-ids", iid)
            wait_until(lambda: boot_id() not in (None, boot), timeout=300, interval=1,
                       what="a new boot")
            wait_until(lambda: [n["InstanceStatus"]["Status"] for n in self.nodes()] ==
                       ["Running"], timeout=300, interval=2, what="node Running after reboot")
            self.assertEqual(self.on("systemctl is-active hyperfleet-agent").strip(), "active")

        # Deleting the cluster cleans the machine and frees it.
        self.aws("sagemaker", "delete-cluster", "--cluster-name", "ssh-it")
        wait_until(lambda: self.machine()["State"] == "free", timeout=300, interval=1,
                   what="machine free")
        for path in ("/etc/hyperfleet", "/opt/ml/config", "/opt/hyperfleet",
                     "/etc/systemd/system/hyperfleet-agent.service", "/tmp/lc-bucket/scripts"):
            self.assertNotEqual(self.m.ssh(f"test -e {path}").returncode, 0, path)
        self.assertNotEqual(self.m.ssh("systemctl is-active hyperfleet-agent").returncode, 0)
        after = self.on("hostname; cat /etc/hosts; cat /etc/munge/munge.key | sha256sum")
        self.assertEqual(after, self.before)


if __name__ == "__main__":
    main()
