"""HyperPod AMI facts on real nodes (docs/nodes.md "AMI facts"): every node has the NVIDIA
driver facts that base-config's hotfix/mock-gpu-driver-deb.sh reads (`modinfo -F version
nvidia`, an apt record of libnvidia-compute-<major>, also after `apt-get update`) and nothing
more (no nvidia-smi); /opt/dlami/nvme and /opt/sagemaker are real mounts where the instance
type has NVMe or InstanceStorageConfigs asks for an EBS volume, with dlami-nvme.service active
on every node. The server runs under umask 077 (as scripts/quickstart's does): what it writes
into nodes must keep the modes of HyperPod's AMI. Needs root and the node image; skipped
otherwise."""

import json
import os
import tempfile
import textwrap
import unittest

from e2e_nodes import NodeFixture
from harness import BINARY, main

STAND_IN_VERSION = "595.91.07"  # ami_facts.h kStandInDriverVersion

ON_CREATE = textwrap.dedent("""\
    #!/bin/bash
    set -euo pipefail
    echo "ami facts node $(hostname)"
    """)

# base-config's hotfix/mock-gpu-driver-deb.sh up to equivs (which needs the Debian mirror):
# the same commands, in the same order, on the same names.
MOCK_GPU_DRIVER_LOOKUP = textwrap.dedent("""\
    set -euo pipefail
    cd "$(mktemp -d)"
    DRV_VERSION=$(modinfo -F version nvidia)
    DRV_VERSION_MAJOR=${DRV_VERSION%%.*}
    MOCK_PKG=libnvidia-compute-${DRV_VERSION_MAJOR}
    for SUFFIX in "-1ubuntu1" "-0ubuntu1" ""; do
        if apt-cache show ${MOCK_PKG}=${DRV_VERSION}${SUFFIX} 2>/dev/null | grep -E '^Package|^Version|^Provides' &> ${MOCK_PKG}; then
            echo "Found package with suffix: ${SUFFIX}"
            break
        fi
    done
    [ -s ${MOCK_PKG} ] || { echo "no record of ${MOCK_PKG}" >&2; exit 1; }
    cat ${MOCK_PKG}
    """)


def host_driver_version():
    """The host's loaded NVIDIA driver (nodes report it instead of the stand-in), or None."""
    for path in ("/sys/module/nvidia/version", "/proc/driver/nvidia/version"):
        try:
            with open(path) as f:
                for word in f.read().split():
                    if word[:1].isdigit() and "." in word:
                        return word
        except OSError:
            pass
    return None


class AmiFactsTest(NodeFixture):

    @classmethod
    def setUpClass(cls):
        # The server and what it starts inherit both.
        old, lang = os.umask(0o077), os.environ.get("LANG")
        os.environ["LANG"] = "de_DE.UTF-8"
        try:
            super().setUpClass()
        finally:
            os.umask(old)
            if lang is None:
                os.environ.pop("LANG", None)
            else:
                os.environ["LANG"] = lang
        cls.write(f"{cls.bucket}/ami/on_create.sh", ON_CREATE)

    @classmethod
    def create_with_storage(cls, name, groups):
        """groups: (name, type, InstanceStorageConfigs or None)."""
        spec = {"ClusterName": name, "InstanceGroups": []}
        for g, t, storage in groups:
            group = {"InstanceGroupName": g, "InstanceType": t, "InstanceCount": 1,
                     "LifeCycleConfig": {"SourceS3Uri": "s3://lcs-bucket/ami/",
                                         "OnCreate": "on_create.sh"},
                     "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole"}
            if storage is not None:
                group["InstanceStorageConfigs"] = storage
            spec["InstanceGroups"].append(group)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            return cls.aws("sagemaker", "create-cluster", "--cli-input-json", f"file://{f.name}")
        finally:
            os.unlink(f.name)

    def test_ami_facts(self):
        arn = self.create_with_storage("ami", [
            ("cpu", "ml.c5.xlarge", None),                      # no NVMe, no storage config
            ("nvme", "ml.i3en.large", None),                    # 1250 GB of instance store
            ("ebs", "ml.c5.xlarge", [{"EbsVolumeConfig": {"VolumeSizeInGB": 100}},
                                     {"EbsVolumeConfig": {"VolumeSizeInGB": 200,
                                                          "RootVolume": True}}]),
        ])["ClusterArn"]
        cluster_id = arn.rsplit("/", 1)[1]
        c = self.wait_status("ami", ["InService", "Failed"])
        self.assertEqual(c["ClusterStatus"], "InService", c.get("FailureMessage"))
        node = {d["InstanceGroupName"]: d["InstanceId"] for d in self.node_details("ami")}

        def on(group, command):
            return self.run_on(cluster_id, group, node[group], command)

        version = host_driver_version() or STAND_IN_VERSION
        major = version.split(".")[0]
        package = f"libnvidia-compute-{major}"

        # The driver facts, on every node.
        for group in ("cpu", "nvme", "ebs"):
            r = on(group, "modinfo -F version nvidia")
            self.assertEqual((r.returncode, r.stdout), (0, version + "\n"), r.stderr)
            r = on(group, "command -v nvidia-smi; nvidia-smi")
            self.assertEqual(r.returncode, 127, "no nvidia-smi stand-in: " + r.stdout)
        r = on("cpu", MOCK_GPU_DRIVER_LOOKUP)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Found package with suffix: -0ubuntu1", r.stdout)
        self.assertIn(f"Package: {package}\n", r.stdout)
        self.assertIn(f"Version: {version}-0ubuntu1\n", r.stdout)
        self.assertIn("Provides: libcuda.so.1", r.stdout)
        r = on("cpu", f"apt-cache policy {package}")
        self.assertIn("Installed: (none)", r.stdout)  # a record, not an installed package
        self.assertIn(f"Candidate: {version}-0ubuntu1", r.stdout)
        # base-config's apply_hotfix.sh runs `apt-get update` first: the record survives it
        # (the Debian mirror may be unreachable from nodes: its failure does not matter here).
        r = on("cpu", "timeout 240 apt-get update -q -o Acquire::Retries=0; "
                      "apt-cache show " + f"{package}={version}-0ubuntu1")
        self.assertIn(f"Package: {package}\n", r.stdout, r.stderr)
        r = on("cpu", MOCK_GPU_DRIVER_LOOKUP)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # Users other than root read them too.
        r = on("cpu", "sudo -u ubuntu modinfo -F version nvidia && "
                      f"sudo -u ubuntu apt-cache show {package} | head -1")
        self.assertEqual(r.stdout, f"{version}\nPackage: {package}\n", r.stderr)

        # Storage: dlami-nvme.service is active everywhere (scripts wait for it); the mounts
        # exist only where the type or the storage configs ask for them.
        mounts = {"cpu": (False, False), "nvme": (True, False), "ebs": (False, True)}
        for group, (nvme, ebs) in mounts.items():
            r = on(group, "systemctl show -p ActiveState -p ExecMainStatus dlami-nvme")
            self.assertEqual(sorted(r.stdout.split()), ["ActiveState=active", "ExecMainStatus=0"],
                             f"{group}: {r.stdout} {r.stderr}")
            for path, want in (("/opt/dlami/nvme", nvme), ("/opt/sagemaker", ebs)):
                r = on(group, f"mountpoint -q {path}")
                self.assertEqual(r.returncode == 0, want, f"{group}: {path}")
                if want:
                    parent = os.path.dirname(path)
                    r = on(group, f"stat -c %a {parent} {path} && touch {path}/w && "
                                  f"rm {path}/w && sudo -u ubuntu ls {path} && echo ok")
                    self.assertEqual(r.stdout, "755\n755\nok\n", f"{group}: {path}: {r.stderr}")
                else:
                    self.assertNotEqual(on(group, f"test -e {path}").returncode, 0, path)

        # Modes of what the provider writes into a node, whatever the server's umask.
        expected = {
            "/etc/hyperfleet": "755", "/opt/ml": "755", "/opt/ml/config": "755",
            "/opt/sagemaker_cluster": "755", "/opt/hyperfleet": "755",
            "/opt/hyperfleet/bin": "755", "/fsx": "755",
            "/var/lib/hyperfleet-ami/apt": "755", "/var/lib/hyperfleet-ami/apt/Packages": "644",
            "/etc/apt/sources.list.d/hyperfleet-ami.list": "644",
        }
        if os.path.exists(os.path.join(os.path.dirname(BINARY), "hyperfleet_auto_resume.so")):
            expected["/opt/hyperfleet/lib"] = "755"
        if not host_driver_version():
            kernel = os.uname().release
            expected[f"/lib/modules/{kernel}"] = "755"
            expected[f"/lib/modules/{kernel}/kernel/drivers/video/nvidia.ko"] = "644"
            expected[f"/lib/modules/{kernel}/modules.dep.bin"] = "644"
            # The stand-in lives in the node's root only, never in the host's.
            self.assertFalse(os.path.exists(
                f"/lib/modules/{kernel}/kernel/drivers/video/nvidia.ko"))
        paths = " ".join(expected)
        r = on("cpu", f"stat -c '%n %a' {paths}")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines())
        self.assertEqual(got, expected)


if __name__ == "__main__":
    main()
