"""Your own machines end to end (issue 18, docs/ssh-provider.md): a fleet of real sshd
machines (tests/e2e/ssh_machines.py, layer `site`) registered with `hyperfleet machines add`
as ml.c5.large, one kept as a hot spare, and a Slurm cluster (controller x1, workers x2) made
of them by `hyperfleet server --provider ssh` with the example lifecycle scripts. The example
training job runs on the cluster's /fsx (the control-plane host's export, over sshfs); a
worker machine's whole sandbox is SIGKILLed mid-run: the spare takes the node's place, the
killed machine is quarantined with the reason, and the job resumes to the result of an
undisturbed run. A node reboots for real through BatchRebootClusterNodes. Deleting the
cluster leaves every machine clean (no agent, no /etc/hyperfleet, no /opt/ml/config, its
hostname and /etc/hosts as before) and free. Commands on machines go over ssh with the
fleet's key, never through the control plane. Needs root; skipped otherwise."""

import json
import os
import shutil
import subprocess
import time
import unittest

import e2e_chaos
import ssh_machines
from e2e_slurm import SlurmClusterFixture, reference_result
from harness import BINARY, Server, aws_env, main, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TYPE = "ml.c5.large"  # the test machines have 2 CPUs
# Files and units a node's provisioning writes and its cleanup removes.
NODE_LEFTOVERS = ("/etc/hyperfleet", "/opt/ml/config",
                  "/etc/systemd/system/hyperfleet-agent.service",
                  "/etc/systemd/system/multi-user.target.wants/hyperfleet-agent.service")


class SshFleetFixture(SlurmClusterFixture):
    """A Fleet of `fleet_size` test machines and a server with `--provider ssh` whose agent
    endpoint listens on the fleet's host address; the example lifecycle scripts in its
    bucket lcs-bucket/slurm/. Nothing registered yet. Subclasses may change the class
    attributes. run_on() goes over ssh to the machine that serves the instance."""
    fleet_size = 5
    layer = "site"
    cluster_name = "ssh-fleet-e2e"
    server_args = ["--heartbeat-interval", "1"]

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("test machines need root")
        cls.timings = {}
        t0 = time.monotonic()
        cls.fleet = ssh_machines.Fleet(cls.fleet_size, layer=cls.layer).start()
        cls.timings["fleet boot"] = time.monotonic() - t0
        try:
            # A default route via the host, as a server's network gives it one: HyperPod's
            # lifecycle scripts find their address with `ip route get` to an outside address.
            # The fleet's nftables table still drops whatever would leave the subnet.
            for m in cls.fleet.machines:
                subprocess.run(["ip", "-n", m.netns, "route", "replace", "default", "via",
                                cls.fleet.host_address], check=True, env=ssh_machines.ENV)
            cls.before = {m.address: cls.machine_state(m) for m in cls.fleet.machines}
            cls.server = Server(provider="ssh", extra_args=[
                "--agent-listen", f"{cls.fleet.host_address}:0", *cls.server_args])
            shutil.copytree(os.path.join(REPO, "examples", "lifecycle"),
                            os.path.join(cls.server.data_dir, "s3", "lcs-bucket", "slurm"))
            cls.server.start()
            cls.env = aws_env(cls.server.endpoint)
        except BaseException:
            cls.fleet.close()
            server = getattr(cls, "server", None)
            if server is not None:
                server.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if getattr(cls, "server", None) is not None and cls.server.proc is not None:
                for name in cls.cluster_names():
                    cls.aws("sagemaker", "delete-cluster", "--cluster-name", name, check=False)
                wait_until(lambda: not cls.cluster_names(), timeout=300, interval=1,
                           what="clusters deleted")
        finally:
            if getattr(cls, "server", None) is not None:
                cls.server.cleanup()
            cls.fleet.close()

    # -- machines -----------------------------------------------------------------------

    @staticmethod
    def machine_state(m):
        """What a node's provisioning changes and its cleanup restores: hostname, /etc/hosts
        (and /etc/hostname)."""
        r = m.ssh("hostname; echo ==; cat /etc/hosts; echo ==; cat /etc/hostname 2>/dev/null",
                  check=True)
        return r.stdout

    @classmethod
    def hf(cls, *args, check=True, timeout=180):
        """`hyperfleet <args> --endpoint-url <server>` (the aws env's credentials); the
        CompletedProcess; fails on a non-zero exit when `check`."""
        r = subprocess.run([BINARY, *args, "--endpoint-url", cls.server.endpoint],
                           env=cls.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"hyperfleet {' '.join(args)} exited {r.returncode}: "
                                 f"{r.stdout}{r.stderr}")
        return r

    @classmethod
    def add_args(cls, m, instance_type=TYPE, host_key=None):
        """`hyperfleet machines add` arguments for machine `m` (its host key unless
        `host_key` is given)."""
        key_file = os.path.join(cls.server.data_dir, f"host-key-{m.name}.pub")
        with open(key_file, "w") as f:
            f.write((host_key or m.host_key_pub) + "\n")
        return ["machines", "add", m.address, "--user", "root", "--key", cls.fleet.key_path,
                "--host-key-file", key_file, "--instance-type", instance_type]

    @classmethod
    def register(cls, m, instance_type=TYPE):
        """Registers machine `m`; returns its machine id."""
        cls.hf(*cls.add_args(m, instance_type))
        return cls.machine_of(m)["MachineId"]

    @classmethod
    def machines(cls):
        """`hyperfleet machines list --output json`: the Machine records."""
        out = cls.hf("machines", "list", "--output", "json").stdout
        data = json.loads(out)
        return data["Machines"] if isinstance(data, dict) else data

    @classmethod
    def machine_of(cls, m):
        """The registry's record of test machine `m`, or None."""
        return next((r for r in cls.machines() if r["Address"] == m.address), None)

    @classmethod
    def spares(cls):
        out = cls.hf("machines", "spares", "--output", "json").stdout
        data = json.loads(out)
        return data["SpareTargets"] if isinstance(data, dict) else data

    @classmethod
    def fleet_machine(cls, address):
        return next(m for m in cls.fleet.machines if m.address == address)

    @classmethod
    def machine_of_node(cls, iid):
        """The test machine that serves instance `iid` (its PrivatePrimaryIp)."""
        d = cls.aws("sagemaker", "describe-cluster-node", "--cluster-name", cls.cluster_name,
                    "--node-id", iid)["NodeDetails"]
        return cls.fleet_machine(d["PrivatePrimaryIp"])

    @classmethod
    def run_on(cls, cluster_id, group, instance_id, command):
        """Runs `command` as root on the machine of `instance_id`, over ssh (the fleet's
        key, pinned host key)."""
        return cls.machine_of_node(instance_id).ssh(command, timeout=120)

    @classmethod
    def create_cluster(cls, groups):
        """CreateCluster with the example lifecycle scripts; sets cluster_id and fsx (the
        control plane's export of the cluster's /fsx)."""
        arn = cls.create(cls.cluster_name, groups, prefix="slurm")["ClusterArn"]
        cls.cluster_id = arn.rsplit("/", 1)[1]
        cls.fsx = os.path.join(cls.server.data_dir, "ssh", "clusters", cls.cluster_id, "fsx")
        return cls.cluster_id

    def assert_clean(self, m, served_node=True):
        """Machine `m` has no node identity left (agent neither enabled nor running, no
        agent.env, no node contract) and its hostname and /etc/hosts are as before it was
        registered. A machine that served a node has also lost the agent unit and
        /etc/hyperfleet; a retired hot spare keeps the base layer (the unit file, empty
        directories: docs/ssh-provider.md)."""
        paths = NODE_LEFTOVERS if served_node else (
            "/etc/hyperfleet/agent.env", "/opt/ml/config/resource_config.json",
            "/opt/ml/config/provisioning_parameters.json")
        r = m.ssh("for p in " + " ".join(paths) + "; do test -e $p && echo $p; done; "
                  "systemctl is-enabled -q hyperfleet-agent.service && echo enabled; "
                  "systemctl is-active -q hyperfleet-agent.service && echo active; true",
                  check=True)
        self.assertEqual(r.stdout.split(), [], f"{m.name}: left behind")
        self.assertEqual(self.machine_state(m).split("==")[:2],
                         self.before[m.address].split("==")[:2], m.name)


class SshFleetTest(SshFleetFixture):
    """The fleet's life in name order: register, spare, cluster, training with a killed
    machine, reboot, delete."""

    STEPS = e2e_chaos.STEPS
    # The training job and its checks, as the chaos test on local nodes runs them.
    workers = e2e_chaos.ChaosTest.workers
    start_training = e2e_chaos.ChaosTest.start_training
    finish = e2e_chaos.ChaosTest.finish
    events = e2e_chaos.ChaosTest.events

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.reference = reference_result("--steps", str(cls.STEPS))

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "timings", None):
            print("\ntimings: " + ", ".join(f"{k} {v:.1f} s" for k, v in cls.timings.items()))
        super().tearDownClass()

    def test_1_machines_are_registered_and_one_is_kept_as_a_hot_spare(self):
        ids = [self.register(m) for m in self.fleet.machines]
        self.assertEqual(len(set(ids)), len(self.fleet.machines))
        for r in self.machines():
            self.assertEqual(r["InstanceType"], TYPE, r)
            self.assertEqual(r["State"], "free", r)
            self.assertEqual(r["Facts"]["Cpus"], 2, r)
            self.assertNotIn("SshPrivateKey", json.dumps(r))
        self.hf("machines", "spares", TYPE, "1")
        t0 = time.monotonic()
        wait_until(lambda: [s for s in self.spares() if s["InstanceType"] == TYPE
                            and s["Ready"] == 1], timeout=600, interval=1,
                   what="one hot spare of ml.c5.large ready")
        self.timings["spare ready"] = time.monotonic() - t0

    def test_2_a_slurm_cluster_of_machines_comes_in_service(self):
        t0 = time.monotonic()
        self.create_cluster([("controller", TYPE, 1), ("workers", TYPE, 2)])
        c = self.wait_status(self.cluster_name, ["InService", "Failed"], timeout=900)
        self.timings["create->InService"] = time.monotonic() - t0
        self.assertEqual(c["ClusterStatus"], "InService",
                         f"{c.get('FailureMessage')}\n{self.lifecycle_logs()}")
        details = self.node_details(self.cluster_name)
        self.assertEqual(len(details), 3)
        addresses = {m.address for m in self.fleet.machines}
        for d in details:
            self.assertIn(d["PrivatePrimaryIp"], addresses, d)
            self.assertEqual(d["InstanceStatus"]["Status"], "Running", d)
            # The node's hostname is what the API says, set over ssh on the machine.
            m = self.fleet_machine(d["PrivatePrimaryIp"])
            self.assertEqual(m.ssh("hostname", check=True).stdout.strip(),
                             d["PrivateDnsHostname"].split(".")[0])
        in_use = [r for r in self.machines() if r["State"] == "in-use"]
        self.assertEqual(len(in_use), 3, self.machines())
        self.assertEqual({r["ClusterId"] for r in in_use}, {self.cluster_id})
        # Both workers are Slurm nodes, idle.
        rows = wait_until(lambda: (r := self.sinfo()) and
                          all(s == "idle" for s, _, _ in r.values()) and r,
                          timeout=120, interval=1, what="both workers idle in Slurm")
        self.assertEqual({n for n, _ in rows}, set(self.worker_hostnames()))

    def test_3_a_killed_worker_machine_is_replaced_by_the_spare_and_the_job_resumes(self):
        # The cluster may have taken the spare (Allocate grants a ready spare first) and the
        # pool refills it from the free machine.
        spare = wait_until(lambda: [r for r in self.machines() if r["State"] == "spare-ready"],
                           timeout=600, interval=1, what="a ready hot spare")
        self.assertEqual(len(spare), 1, self.machines())
        job = self.start_training("killed")
        host, iid = sorted(self.workers().items())[0]
        victim = self.machine_of_node(iid)
        victim_id = self.machine_of(victim)["MachineId"]
        t0 = time.time()
        victim.kill()

        def replacement():
            for d in self.node_details(self.cluster_name):
                if (d["InstanceGroupName"] == "workers" and d["InstanceId"] != iid
                        and d["PrivatePrimaryIp"] == spare[0]["Address"]
                        and d["InstanceStatus"]["Status"] == "Running"):
                    return d
            return None
        new = wait_until(replacement, timeout=600, interval=1,
                         what="the spare Running in the killed worker's place")
        self.timings["kill->replacement Running"] = time.time() - t0
        self.finish(job, "killed", requeued=True)
        self.assertNotIn(iid, self.workers().values())
        # Another machine, another address, but the replaced node's name: Slurm's node stays
        # (NodeName kept, NodeAddr moved), as HyperPod keeps the name.
        self.assertEqual(new["PrivateDnsHostname"].split(".")[0], host, new)
        self.assertEqual(self.workers().get(host), new["InstanceId"])
        # Events name the spare and the node it became, and the quarantined machine.
        descriptions = [e.get("Description", "") for e in self.events()]
        self.assertTrue(any(spare[0]["MachineId"] in d and new["InstanceId"] in d
                            for d in descriptions), descriptions)
        self.assertTrue(any(victim_id in d and "quarantined" in d for d in descriptions),
                        descriptions)
        # `machines list` shows the killed machine quarantined, and why.
        record = self.machine_of(victim)
        self.assertEqual(record["State"], "quarantined", record)
        self.assertIn(iid, record.get("StateReason", ""), record)
        # The pool refills: the free machine becomes the next spare.
        wait_until(lambda: [s for s in self.spares() if s["InstanceType"] == TYPE
                            and s["Ready"] == 1], timeout=600, interval=1,
                   what="the pool's spare refilled")

    def test_4_a_node_reboots_for_real_and_slurm_takes_it_back(self):
        host, iid = sorted(self.workers().items())[-1]
        m = self.machine_of_node(iid)
        boot = m.boot_id()
        reboots = m.reboot_count
        t0 = time.monotonic()
        out = self.aws("sagemaker", "batch-reboot-cluster-nodes", "--cluster-name",
                       self.cluster_name, "--node-ids", iid)
        self.assertEqual(out.get("Successful"), [iid], out)
        wait_until(lambda: m.reboot_count > reboots, timeout=300, interval=0.5,
                   what=f"{m.name} to reboot")
        wait_until(lambda: self.aws("sagemaker", "describe-cluster-node", "--cluster-name",
                                    self.cluster_name, "--node-id", iid)["NodeDetails"]
                   ["InstanceStatus"]["Status"] == "Running" and m.boot_id() != boot,
                   timeout=300, interval=1, what="the rebooted node Running on a new boot")
        self.timings["reboot->Running"] = time.monotonic() - t0
        wait_until(lambda: self.sinfo().get((host, "dev"), ("",))[0] == "idle", timeout=120,
                   interval=1, what=f"{host} idle in Slurm after its reboot")

    def test_5_deleting_the_cluster_leaves_the_machines_clean_and_free(self):
        served = {d["PrivatePrimaryIp"] for d in self.node_details(self.cluster_name)}
        quarantined = [r for r in self.machines() if r["State"] == "quarantined"]
        self.assertEqual(len(quarantined), 1, self.machines())
        self.aws("sagemaker", "delete-cluster", "--cluster-name", self.cluster_name)
        wait_until(lambda: self.cluster_name not in self.cluster_names(), timeout=300,
                   interval=1, what="the cluster deleted")
        # The killed machine (test 3) powers on again and an operator returns it: the return
        # check cleans what its node left.
        for r in quarantined:
            m = self.fleet_machine(r["Address"])
            if not m.running():
                m.start()
            self.hf("machines", "return", r["MachineId"])
            served.add(r["Address"])

        def settled():
            states = sorted(r["State"] for r in self.machines())
            return states == ["free"] * (len(states) - 1) + ["spare-ready"]
        wait_until(settled, timeout=300, interval=1,
                   what="every machine free but the one hot spare")
        for address in sorted(served):
            self.assert_clean(self.fleet_machine(address))
        # No spare kept: the spare goes back to free too, without a node identity.
        self.hf("machines", "spares", TYPE, "0")
        wait_until(lambda: all(r["State"] == "free" for r in self.machines()), timeout=300,
                   interval=1, what="every machine free")
        for m in self.fleet.machines:
            self.assert_clean(m, served_node=m.address in served)

if __name__ == "__main__":
    main()
