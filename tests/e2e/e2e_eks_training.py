"""The training example on an EKS-orchestrated HyperPod cluster (docs/kubernetes.md "Registry
and images"): the server runs the local registry (docker-registry); scripts/training-image
builds the training image from Debian's packages and pushes it there with skopeo; the two
Jobs of examples/training/train-eks.yaml (one per rank, pinned by HyperPod's node labels,
anti-affine) pull it on two nodes, train through the nodes' shared /fsx and end with PASS and
the same weights sha256 as train.py run on this host with the same settings and world size
(the Slurm run's result: same code, same Debian numpy and BLAS). kubectl logs shows the
result, kubectl exec runs a command in a pod of that image, and a user's own image (a static
binary packed with umoci) pushed with skopeo runs as a pod. Needs root, the node image, the
Kubernetes binaries, docker-registry, skopeo and python3-numpy (scripts/setup --eks --test);
skipped otherwise."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time
import unittest

import boto3

from harness import (ACCOUNT, BINARY, EKS_ROLE as ROLE, EKS_VPC as VPC, REGION, ACCESS_KEY,
                     SECRET_KEY, Kubectl, Server, gone, kubernetes_bin, main, wait_until)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGE_DIR = os.environ.get("HYPERFLEET_IMAGE_DIR", "/var/lib/hyperfleet/images")
EKS_NAME, HP_NAME = "train-k1", "train-hp"
HOST_PYTHON = "/usr/bin/python3"  # Debian's, with python3-numpy: the Slurm nodes' numpy

HELLO_C = textwrap.dedent("""\
    #include <stdio.h>
    int main(void) { puts("hello from a user image"); return 0; }
    """)


def free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


class EksTrainingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        missing = [p for p in ("docker-registry", "skopeo", "umoci", "gcc")
                   if shutil.which(p) is None]
        if missing or subprocess.run([HOST_PYTHON, "-c", "import numpy"]).returncode != 0:
            raise unittest.SkipTest(f"missing {missing or 'python3-numpy'} (scripts/setup --eks)")
        cls.kubernetes_bin = kubernetes_bin()

    def test_training_on_two_nodes(self):
        self.port = free_port()
        server = Server(provider="local",
                        extra_args=["--heartbeat-interval", "2", "--image-dir", IMAGE_DIR,
                                    "--registry-port", str(self.port)])
        bucket = os.path.join(server.data_dir, "s3", "train-lcs", "base")
        os.makedirs(bucket)
        with open(os.path.join(bucket, "on_create.sh"), "w") as f:
            f.write("#!/bin/bash\necho lifecycle ran\n")
        server.start()
        try:
            self.exercise(server)
        except BaseException:
            with open(os.path.join(server.data_dir, "server.log"), errors="replace") as f:
                print("server.log (end):\n" + "".join(f.readlines()[-60:]))
            raise
        finally:
            self.clean_up(server)

    def clean_up(self, server):
        session = boto3.session.Session(aws_access_key_id=ACCESS_KEY,
                                        aws_secret_access_key=SECRET_KEY, region_name=REGION)
        sm = session.client("sagemaker", endpoint_url=server.endpoint)
        try:
            sm.delete_cluster(ClusterName=HP_NAME)
        except sm.exceptions.ClientError:
            pass
        nodes = os.path.join(server.data_dir, "local", "nodes")
        try:
            wait_until(lambda: not os.path.isdir(nodes) or not os.listdir(nodes), timeout=120,
                       what="nodes removed")
        finally:
            server.stop()  # before the control plane goes, or its controller restarts it
            subprocess.run([BINARY, "eks-control-plane", "remove", "--data-dir",
                            server.data_dir, EKS_NAME], capture_output=True, timeout=60)
            server.cleanup()

    def push_training_image(self):
        """scripts/training-image --push: the cached (or built) image into the registry."""
        started = time.monotonic()
        r = run([os.path.join(REPO, "scripts", "training-image"), "--image-dir", IMAGE_DIR,
                 "--push", f"localhost:{self.port}"], timeout=900)
        lines = r.stdout.split("\n")
        ref = [l for l in lines if l.startswith(f"localhost:{self.port}/")][0]
        built = [l for l in lines if "@@step built" in l]
        print(f"[ metric ] training image {'built (cold) and ' if built else '(cached) '}"
              f"pushed in {time.monotonic() - started:.1f} s"
              + (f"; {built[0].split('@@step ')[1]}" if built else ""))
        # The registry has it: the tags list of the repository.
        tags = run(["skopeo", "list-tags", "--tls-verify=false",
                    f"docker://localhost:{self.port}/hyperfleet/training"], timeout=60).stdout
        self.assertIn("latest", json.loads(tags)["Tags"])
        return ref

    def reference_hash(self):
        """train.py's two ranks on this host (Slurm's settings: 2 ranks, defaults)."""
        run_dir = tempfile.mkdtemp(prefix="hf-train-ref-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        procs = [subprocess.Popen([HOST_PYTHON, os.path.join(REPO, "examples", "training",
                                                             "train.py"),
                                   "--rank", str(r), "--world-size", "2", "--run-dir", run_dir],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in (0, 1)]
        out = [p.communicate(timeout=300)[0] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], out)
        return re.search(r"weights sha256 ([0-9a-f]{64})", out[0]).group(1)

    def exercise(self, server):
        session = boto3.session.Session(aws_access_key_id=ACCESS_KEY,
                                        aws_secret_access_key=SECRET_KEY, region_name=REGION)
        eks = session.client("eks", endpoint_url=server.endpoint)
        sm = session.client("sagemaker", endpoint_url=server.endpoint)
        ref = self.push_training_image()
        arn = eks.create_cluster(name=EKS_NAME, roleArn=ROLE, resourcesVpcConfig=VPC,
                                 version="1.31",
                                 accessConfig={"authenticationMode": "API"})["cluster"]["arn"]
        wait_until(lambda: eks.describe_cluster(name=EKS_NAME)["cluster"]["status"] == "ACTIVE",
                   timeout=120, interval=0.5, what="EKS cluster ACTIVE")
        sm.create_cluster(ClusterName=HP_NAME, Orchestrator={"Eks": {"ClusterArn": arn}},
                          InstanceGroups=[{
                              "InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge",
                              "InstanceCount": 2,
                              "LifeCycleConfig": {"SourceS3Uri": "s3://train-lcs/base/",
                                                  "OnCreate": "on_create.sh"},
                              "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/HyperPodRole"}])

        def in_service():
            d = sm.describe_cluster(ClusterName=HP_NAME)
            self.assertNotIn(d["ClusterStatus"], ("Failed", "RollingBack"), d.get("FailureMessage"))
            return d["ClusterStatus"] == "InService"

        wait_until(in_service, timeout=420, interval=1, what="HyperPod cluster InService")
        kubectl = Kubectl(server, self.kubernetes_bin, EKS_NAME)

        # The example's two Jobs, with this server's registry port.
        with open(os.path.join(REPO, "examples", "training", "train-eks.yaml")) as f:
            manifest = f.read().replace("localhost:5000/", f"localhost:{self.port}/")
        path = os.path.join(server.data_dir, "train-eks.yaml")
        with open(path, "w") as f:
            f.write(manifest)
        started = time.monotonic()
        kubectl("apply", "-f", path)

        def jobs_done():
            jobs = json.loads(kubectl("get", "jobs", "-l", "app=hyperfleet-train", "-o",
                                      "json").stdout)["items"]
            for j in jobs:
                self.assertFalse(j["status"].get("failed"), kubectl("logs", "-l",
                                 "app=hyperfleet-train", "--tail", "20", check=False).stdout)
            return len(jobs) == 2 and all(j["status"].get("succeeded") == 1 for j in jobs)

        wait_until(jobs_done, timeout=300, interval=1, what="both training Jobs complete")
        print(f"[ metric ] training Jobs (2 ranks, 200 steps) applied -> both complete in "
              f"{time.monotonic() - started:.1f} s (image pulls included)")
        pods = json.loads(kubectl("get", "pods", "-l", "app=hyperfleet-train", "-o",
                                  "json").stdout)["items"]
        self.assertEqual(len({p["spec"]["nodeName"] for p in pods}), 2, "two different nodes")
        self.print_pull_times(kubectl)

        log = kubectl("logs", "job/hyperfleet-train-0").stdout
        self.assertIn("(threshold 0.05): PASS", log)
        h = re.search(r"weights sha256 ([0-9a-f]{64})", log).group(1)
        took = re.search(r"took ([0-9.]+) s", log)
        print(f"[ metric ] train.py rank 0 in its pod: {took.group(1) if took else '?'} s")
        self.assertEqual(h, self.reference_hash(), "the pods' weights differ from the host run")
        print(f"[ metric ] weights sha256 {h}: the pods' and the host's reference run agree")

        self.check_exec(kubectl, ref)
        self.check_user_image(server, kubectl)

        sm.delete_cluster(ClusterName=HP_NAME)
        wait_until(lambda: gone(sm.describe_cluster, sm.exceptions.ResourceNotFound,
                                ClusterName=HP_NAME), timeout=180, interval=1,
                   what="HyperPod cluster deleted")

    def print_pull_times(self, kubectl):
        events = json.loads(kubectl("get", "events", "-o", "json").stdout)["items"]
        for e in events:
            m = re.search(r'Successfully pulled image "([^"]+)" in ([0-9.]+m?s)',
                          e.get("message", ""))
            if m:
                print(f"[ metric ] pull of {m.group(1)} on {e['source'].get('host')}: "
                      f"{m.group(2)}")

    def check_exec(self, kubectl, ref):
        """kubectl exec in a running pod of the training image (a finished Job's pod has no
        process left to exec in)."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-shell"},
               "spec": {"nodeSelector": {"sagemaker.amazonaws.com/node-health-status":
                                         "Schedulable"},
                        "containers": [{"name": "c", "image": ref,
                                        "command": ["sleep", "600"]}]}}
        path = os.path.join(tempfile.mkdtemp(prefix="hf-train-"), "shell.json")
        with open(path, "w") as f:
            json.dump(pod, f)
        kubectl("apply", "-f", path)
        kubectl("wait", "--for=condition=Ready", "pod/train-shell", "--timeout=120s",
                timeout=150)
        out = kubectl("exec", "train-shell", "--", "python3", "-c",
                      "import numpy, os; print(numpy.__version__, sorted(os.listdir('.')))")
        self.assertIn("train.py", out.stdout)
        kubectl("delete", "pod", "train-shell", "--wait=false")

    def check_user_image(self, server, kubectl):
        """A user's own image: a static binary packed with umoci, pushed with skopeo."""
        work = tempfile.mkdtemp(prefix="hf-user-image-")
        self.addCleanup(shutil.rmtree, work, True)
        with open(os.path.join(work, "hello.c"), "w") as f:
            f.write(HELLO_C)
        run(["gcc", "-static", "-O2", "-s", "-o", os.path.join(work, "hello"),
             os.path.join(work, "hello.c")])
        image = os.path.join(work, "oci") + ":hello"
        run(["umoci", "init", "--layout", os.path.join(work, "oci")])
        run(["umoci", "new", "--image", image])
        run(["umoci", "unpack", "--image", image, os.path.join(work, "bundle")])
        shutil.copy(os.path.join(work, "hello"), os.path.join(work, "bundle", "rootfs", "hello"))
        run(["umoci", "repack", "--image", image, os.path.join(work, "bundle")])
        run(["umoci", "config", "--image", image, "--config.entrypoint", "/hello"])
        user_ref = f"localhost:{self.port}/someone/hello:v1"
        run(["skopeo", "copy", "--dest-tls-verify=false", f"oci:{image}", f"docker://{user_ref}"],
            timeout=120)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user-hello"},
               "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": user_ref}]}}
        path = os.path.join(work, "pod.json")
        with open(path, "w") as f:
            json.dump(pod, f)
        kubectl("apply", "-f", path)

        def succeeded():
            p = json.loads(kubectl("get", "pod", "user-hello", "-o", "json").stdout)
            self.assertNotEqual(p["status"].get("phase"), "Failed", p["status"])
            return p["status"].get("phase") == "Succeeded"

        wait_until(succeeded, timeout=120, interval=1, what="the user's pod Succeeded")
        self.assertIn("hello from a user image", kubectl("logs", "user-hello").stdout)


if __name__ == "__main__":
    main()
