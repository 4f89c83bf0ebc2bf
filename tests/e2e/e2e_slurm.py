"""A Slurm fleet end to end (docs/slurm.md): the example cluster with the example lifecycle
scripts (examples/lifecycle/) on real nodes brings up Debian's Slurm the way HyperPod's
scripts do; srun, sinfo, sbatch, sacct and the example training job work on it; scaling
adds and removes Slurm nodes; deleting the cluster leaves nothing behind. Needs root and
the node image (scripts/setup builds it); skipped otherwise."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from harness import BINARY, main, wait_until
from e2e_nodes import IMAGE_DIR, NodeFixture, image_built
from harness import Server, aws_env

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "slurm-e2e"


def catalog_entry(instance_type):
    """The instance catalog's entry (data/instance-types.json) for `instance_type`."""
    with open(os.path.join(REPO, "data", "instance-types.json")) as f:
        types = json.load(f)["instance_types"]
    return next(t for t in types if t["name"] == instance_type)


def numpy_python():
    """A python3 with numpy (the test's own may be a virtual environment without it)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([candidate, "-c", "import numpy"], capture_output=True).returncode == 0:
            return candidate
    raise AssertionError("no python3 with numpy here (scripts/setup --test installs "
                         "python3-numpy)")


class SlurmClusterFixture(NodeFixture):
    """One cluster for the whole class, from examples/cluster-spec.json (controller
    ml.c5.xlarge x1, workers ml.c5.4xlarge x2) with the example lifecycle scripts. Subclasses
    name it (cluster_name) and may add server flags (server_args)."""
    cluster_name = NAME
    server_args = ["--heartbeat-interval", "2"]

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        if not image_built():
            raise unittest.SkipTest(f"no node image under {IMAGE_DIR} (run scripts/setup)")
        cls.server = Server(provider="local",
                            extra_args=cls.server_args + ["--image-dir", IMAGE_DIR])
        shutil.copytree(os.path.join(REPO, "examples", "lifecycle"),
                        os.path.join(cls.server.data_dir, "s3", "lcs-bucket", "slurm"))
        cls.server.start()
        cls.env = aws_env(cls.server.endpoint)
        with open(os.path.join(REPO, "examples", "cluster-spec.json")) as f:
            spec = json.load(f)
        cls.groups = [(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"])
                      for g in spec["InstanceGroups"]]
        arn = cls.create(cls.cluster_name, cls.groups, prefix="slurm")["ClusterArn"]
        cls.cluster_id = arn.rsplit("/", 1)[1]
        c = cls.wait_status(cls.cluster_name, ["InService", "Failed"], timeout=300)
        if c["ClusterStatus"] != "InService":
            raise AssertionError(f"cluster {cls.cluster_name} is {c['ClusterStatus']}: "
                                 f"{c.get('FailureMessage')}\n{cls.lifecycle_logs()}")
        cls.fsx = os.path.join(cls.server.data_dir, "local", "clusters", cls.cluster_id, "fsx")

    @classmethod
    def check_nothing_left(cls, local):
        # Deleting the cluster leaves nothing behind: no cluster directory, no node process.
        wait_until(lambda: not os.path.exists(os.path.join(local, "clusters", cls.cluster_id)),
                   timeout=60, what="cluster directory removed")
        left = subprocess.run(["pgrep", "-f", local], capture_output=True,
                              text=True).stdout.split()
        if left:
            raise AssertionError(f"processes of deleted nodes remain: {left}")

    # -- helpers ------------------------------------------------------------------------

    @classmethod
    def lifecycle_logs(cls):
        r = subprocess.run(
            [os.environ.get("HYPERFLEET_BIN", "build/bin/hyperfleet"), "logs", "tail",
             f"/aws/sagemaker/Clusters/{cls.cluster_name}/{cls.cluster_id}", "--endpoint-url",
             cls.server.endpoint], env=cls.env, capture_output=True, text=True, timeout=60)
        return r.stdout[-6000:] + r.stderr[-2000:]

    def controller(self):
        nodes = [n for n in self.nodes(self.cluster_name) if n["InstanceGroupName"] == "controller"]
        self.assertEqual(len(nodes), 1, nodes)
        return nodes[0]["InstanceId"]

    def why(self, job):
        """`hyperfleet jobs why <job>` for this cluster (must succeed): its stdout."""
        r = subprocess.run([BINARY, "jobs", "why", job, "--cluster-name", self.cluster_name,
                            "--endpoint-url", self.server.endpoint],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def why_once_reported(self, job, timeout=90):
        """`hyperfleet jobs why <job>` once governance knows the job: the controller's agent
        reports Slurm's jobs every second or so, so a job submitted just now is not known
        yet (and `jobs why` says so)."""
        def known():
            r = subprocess.run([BINARY, "jobs", "why", job, "--cluster-name", self.cluster_name,
                                "--endpoint-url", self.server.endpoint],
                               env=self.env, capture_output=True, text=True, timeout=60)
            return r.stdout if r.returncode == 0 else None
        return wait_until(known, timeout=timeout, interval=0.5, what=f"governance to know job {job}")

    def on_controller(self, command):
        """Runs `command` on the controller; returns its stdout (fails the test on a
        non-zero exit)."""
        r = self.run_on(self.cluster_id, "controller", self.controller(), command)
        self.assertEqual(r.returncode, 0, f"{command!r} on the controller: {r.stdout}{r.stderr}")
        return r.stdout

    def worker_hostnames(self):
        return sorted(d["PrivateDnsHostname"].split(".")[0] for d in self.node_details(self.cluster_name)
                      if d["InstanceGroupName"] == "workers"
                      and d["InstanceStatus"]["Status"] == "Running")

    def sinfo(self):
        """{(node, partition): (state, cpus, memory MiB)} from `sinfo -N`."""
        out = self.on_controller("sinfo -N -h -o '%N|%P|%T|%c|%m'")
        rows = {}
        for line in out.split():
            node, partition, state, cpus, memory = line.split("|")
            rows[(node, partition.rstrip("*"))] = (state, int(cpus), int(memory))
        return rows

    def copy_training_job(self):
        """Copies examples/training/{train.py,train.sbatch} to /fsx/train/ (the cluster's)."""
        os.makedirs(os.path.join(self.fsx, "train"), exist_ok=True)
        for f in ("train.py", "train.sbatch"):
            shutil.copy(os.path.join(REPO, "examples", "training", f),
                        os.path.join(self.fsx, "train", f))


def reference_result(*train_args):
    """result.json of the example training job run here, without Slurm, as two local ranks
    (train.py arguments `train_args`): what any run with those arguments must reproduce."""
    train = os.path.join(REPO, "examples", "training")
    with tempfile.TemporaryDirectory() as run_dir:
        python = numpy_python()
        ranks = [subprocess.Popen([python, os.path.join(train, "train.py"),
                                   "--rank", str(r), "--world-size", "2",
                                   "--run-dir", run_dir, *train_args],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(2)]
        outputs = [p.communicate(timeout=300)[0] for p in ranks]
        if [p.returncode for p in ranks] != [0, 0]:
            raise AssertionError(f"local reference run failed: {outputs}")
        with open(os.path.join(run_dir, "result.json")) as f:
            return json.load(f)


class SlurmFleetTest(SlurmClusterFixture):
    """Slurm on the example cluster, tests in name order."""

    # -- tests (one cluster, in name order) ---------------------------------------------

    def test_1_srun_runs_on_both_workers(self):
        out = self.on_controller("srun -N2 hostname")
        self.assertEqual(sorted(out.split()), self.worker_hostnames())
        self.assertEqual(len(self.worker_hostnames()), 2)

    def test_2_sinfo_shows_workers_idle_with_their_instance_types_resources(self):
        spec = catalog_entry("ml.c5.4xlarge")
        vcpus, memory_mib = spec["vcpus"], int(spec["memory_gib"] * 1024)
        rows = self.sinfo()
        for host in self.worker_hostnames():
            for partition in ("dev", "workers"):
                self.assertIn((host, partition), rows, rows)
                self.assertEqual(rows[(host, partition)], ("idle", vcpus, memory_mib), rows)
        # The controller runs slurmctld, not slurmd: it is no Slurm node.
        self.assertEqual({n for n, _ in rows}, set(self.worker_hostnames()))
        self.assertIn("Default=YES", self.on_controller("scontrol show partition dev"))

    def test_3_sbatch_writes_to_fsx_and_sacct_records_it(self):
        out = self.on_controller(
            "sbatch --parsable --wait -N1 --wrap 'hostname > /fsx/sbatch-$SLURM_JOB_ID'")
        job = out.strip().split(";")[0]
        self.assertRegex(job, r"^\d+$")
        with open(os.path.join(self.fsx, f"sbatch-{job}")) as f:
            self.assertIn(f.read().strip(), self.worker_hostnames())
        # Accounting (MariaDB + slurmdbd, set up by the example's controller script).
        state = wait_until(
            lambda: self.on_controller(f"sacct -j {job} -n -X -P -o State").strip() or None,
            timeout=120, what="sacct to know the job", interval=0.5)
        self.assertEqual(state, "COMPLETED")

    def test_4_training_job_reaches_the_result_of_an_undisturbed_run(self):
        self.copy_training_job()
        out = self.on_controller("sbatch --parsable --wait /fsx/train/train.sbatch")
        job = out.strip().split(";")[0]
        with open(os.path.join(self.fsx, "train", "hyperfleet-train", "result.json")) as f:
            result = json.load(f)
        with open(os.path.join(self.fsx, "train", f"hyperfleet-train-{job}.out")) as f:
            output = f.read()
        self.assertTrue(result["passed"], output)
        self.assertEqual(result["world_size"], 2)
        self.assertIn("PASS", output)
        # The same job run here, without Slurm, as two local ranks, reproduces the weights.
        self.assertEqual(result["weights_sha256"], reference_result()["weights_sha256"])

    def test_5_scaling_adds_and_removes_slurm_nodes(self):
        before = set(self.worker_hostnames())
        groups = [{"InstanceGroupName": g, "InstanceType": t, "InstanceCount": n + (g == "workers"),
                   "LifeCycleConfig": {"SourceS3Uri": "s3://lcs-bucket/slurm/",
                                       "OnCreate": "on_create.sh"},
                   "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole"}
                  for g, t, n in self.groups]
        self.aws("sagemaker", "update-cluster", "--cluster-name", NAME,
                 "--instance-groups", json.dumps(groups))
        wait_until(lambda: len(self.worker_hostnames()) == 3, timeout=180, interval=0.5,
                   what="a third worker Running")
        (added,) = set(self.worker_hostnames()) - before
        # Its lifecycle scripts end once the controller sees it idle.
        rows = self.sinfo()
        self.assertEqual(rows[(added, "dev")][0], "idle", rows)
        self.assertEqual(rows[(added, "workers")][0], "idle", rows)
        self.assertEqual(sorted(self.on_controller("srun -N3 hostname").split()),
                         self.worker_hostnames())

        for g in groups:
            g["InstanceCount"] -= g["InstanceGroupName"] == "workers"
        self.aws("sagemaker", "update-cluster", "--cluster-name", NAME,
                 "--instance-groups", json.dumps(groups))
        wait_until(lambda: len([n for n in self.nodes(NAME)
                                if n["InstanceGroupName"] == "workers"]) == 2,
                   timeout=120, interval=0.5, what="the workers group back to 2")
        remaining = set(self.worker_hostnames())
        # It leaves Slurm: the controller's slurm.conf and sinfo no longer name it.
        wait_until(lambda: {n for n, _ in self.sinfo()} == remaining, timeout=120,
                   interval=0.5, what="sinfo to show only the remaining workers")
        self.assertEqual(sorted(self.on_controller("srun -N2 hostname").split()),
                         sorted(remaining))

    def test_6_reboot_keeps_the_node_and_its_disk_and_slurm_takes_it_back(self):
        worker = next(d for d in self.node_details(NAME) if d["InstanceGroupName"] == "workers")
        iid, host = worker["InstanceId"], worker["PrivateDnsHostname"].split(".")[0]
        r = self.run_on(self.cluster_id, "workers", iid,
                        "echo kept > /root/disk-marker && touch /run/boot-marker")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.aws("sagemaker", "batch-reboot-cluster-nodes", "--cluster-name", NAME,
                       "--node-ids", iid)
        self.assertEqual(out.get("Successful"), [iid], out)
        wait_until(lambda: self.aws("sagemaker", "describe-cluster-node", "--cluster-name",
                                    NAME, "--node-id", iid)["NodeDetails"]["InstanceStatus"]
                   ["Status"] == "Running" and
                   self.run_on(self.cluster_id, "workers", iid,
                               "test ! -e /run/boot-marker").returncode == 0,
                   timeout=120, interval=0.5, what="the rebooted node Running on a new boot")
        r = self.run_on(self.cluster_id, "workers", iid, "cat /root/disk-marker")
        self.assertEqual(r.stdout.strip(), "kept")
        # Its enabled slurmd started at boot; the lifecycle scripts did not run again.
        wait_until(lambda: self.sinfo().get((host, "dev"), ("",))[0] == "idle", timeout=180,
                   interval=0.5, what=f"{host} idle in Slurm after its reboot")
        events = self.aws("sagemaker", "list-cluster-events", "--cluster-name", NAME)["Events"]
        descriptions = [e.get("Description", "") for e in events]
        self.assertTrue(any(d.startswith(f"Instance {iid} rebooted") for d in descriptions),
                        descriptions)
        self.assertEqual(sum(1 for d in descriptions
                             if d == f"Instance lifecycle script execution for EC2InstanceId "
                                     f"{iid} has Succeeded"), 1, descriptions)

    def test_7_replace_gives_a_new_instance_with_the_same_name_and_address(self):
        worker = next(d for d in self.node_details(NAME) if d["InstanceGroupName"] == "workers")
        iid, logical = worker["InstanceId"], worker["NodeLogicalId"]
        host, ip = worker["PrivateDnsHostname"].split(".")[0], worker["PrivatePrimaryIp"]
        r = self.run_on(self.cluster_id, "workers", iid, "echo old > /root/replace-marker")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.aws("sagemaker", "batch-replace-cluster-nodes", "--cluster-name", NAME,
                       "--node-ids", iid, "i-00000000000000000")
        self.assertEqual(out.get("Successful"), [iid], out)
        self.assertEqual([f["ErrorCode"] for f in out.get("Failed", [])], ["InstanceIdNotFound"])

        def successor():
            for d in self.node_details(NAME):
                if (d["NodeLogicalId"] == logical and d["InstanceId"] != iid
                        and d["InstanceStatus"]["Status"] == "Running"):
                    return d
            return None
        new = wait_until(successor, timeout=180, interval=0.5, what="the replacement Running")
        self.assertEqual(new["PrivatePrimaryIp"], ip)
        self.assertEqual(new["PrivateDnsHostname"].split(".")[0], host)
        self.assertNotIn(iid, [n["InstanceId"] for n in self.nodes(NAME)])
        # A fresh disk: the lifecycle scripts ran on it, and Slurm has the node back.
        r = self.run_on(self.cluster_id, "workers", new["InstanceId"],
                        "test ! -e /root/replace-marker && systemctl is-active slurmd")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        wait_until(lambda: self.sinfo().get((host, "dev"), ("",))[0] == "idle", timeout=180,
                   interval=0.5, what=f"{host} idle in Slurm after its replacement")
        self.assertEqual(sorted(self.on_controller("srun -N2 hostname").split()),
                         self.worker_hostnames())


if __name__ == "__main__":
    main()
