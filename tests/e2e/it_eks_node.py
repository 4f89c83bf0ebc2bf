"""EKS nodes on the local provider: builds the EKS node image if it is missing (`hyperfleet
image build --eks`, printing the build time and the image's size), then boots one EKS node
from it through the local provider (build/bin/local_eks_node_test's LocalEksNode test, which
starts containerd in the node, runs the shipped pause image with `ctr -n k8s.io run`, runs
`kubelet --version` and checks that the host's sysctls are unchanged).

Needs root and the Kubernetes binaries of scripts/kubernetes (harness.kubernetes_bin: skips
without them, fails under CI, where scripts/test builds them). $HF_IMAGE_DIR moves the image
cache (default /var/lib/hyperfleet/images, shared with the server)."""

import os
import subprocess
import time
import unittest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_TEST = os.path.join(os.path.dirname(harness.BINARY), "local_eks_node_test")
IMAGE_DIR = os.environ.get("HF_IMAGE_DIR", "/var/lib/hyperfleet/images")


def tree_bytes(path):
    r = subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


@unittest.skipUnless(os.geteuid() == 0, "needs root (image build, nspawn)")
class EksNodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bin = harness.kubernetes_bin()

    def image(self, *extra):
        return subprocess.run([harness.BINARY, "image", *extra, "--eks", "--image-dir",
                               IMAGE_DIR, "--kubernetes-bin", self.bin],
                              capture_output=True, text=True, timeout=1800)

    def test_build_and_boot_an_eks_node(self):
        found = self.image("path")
        if found.returncode != 0:
            started = time.monotonic()
            built = self.image("build")
            self.assertEqual(built.returncode, 0, built.stderr[-4000:])
            rootfs = built.stdout.strip()
            print(f"[ metric ] EKS node image built in {time.monotonic() - started:.0f} s "
                  "(including the base image when it was missing)")
        else:
            rootfs = found.stdout.strip()
            print("[ metric ] EKS node image already built")
        base = subprocess.run([harness.BINARY, "image", "path", "--image-dir", IMAGE_DIR],
                              capture_output=True, text=True, check=True).stdout.strip()
        size, base_size = tree_bytes(rootfs), tree_bytes(base)
        print(f"[ metric ] EKS node image {size / 2**20:.0f} MiB ({(size - base_size) / 2**20:.0f} "
              f"MiB over the base image's {base_size / 2**20:.0f})")
        # The same image again: found, not rebuilt.
        again = self.image("path")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.strip(), rootfs)

        r = subprocess.run([NODE_TEST, "--gtest_filter=LocalEksNode.*"],
                           env={**os.environ, "HF_TEST_EKS_NODE_IMAGE": rootfs},
                           capture_output=True, text=True, timeout=400)
        print(r.stdout[-3000:])
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-3000:])
        self.assertIn("[  PASSED  ] 1 test.", r.stdout)
        self.assertNotIn("SKIPPED", r.stdout)


if __name__ == "__main__":
    harness.main()
