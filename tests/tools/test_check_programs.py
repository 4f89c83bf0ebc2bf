#!/usr/bin/env python3
"""Tests of tools/check_programs.py: which words of a script are programs, and that a
program from a package nobody installs is reported. Needs shfmt and dpkg (Debian)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import check_programs  # noqa: E402


def write(root, rel, text, mode=0o644):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


@unittest.skipUnless(shutil.which("shfmt") and shutil.which("dpkg"), "needs shfmt and dpkg")
class ShellWords(unittest.TestCase):
    def programs(self, text):
        return sorted({w for w, _ in check_programs.shell_commands(text)})

    def test_commands_in_every_position(self):
        text = ('f() { grep -q x "$1"; }\n'
                'if [ -x /x ]; then v=$(ls -l | sort -u); fi\n'
                'X=1 sudo -u me tar -cf - . && env A=b nice -n 5 gzip || true\n'
                'case $a in b) sed -n p ;; esac\n'
                'cat <<EOF\nnot_a_command here\nEOF\n'
                'for i in 1 2; do "$cmd" arg; $other; done\n'
                'timeout 5 curl -s x; f a\n')
        self.assertEqual(self.programs(text),
                         ["cat", "curl", "env", "grep", "gzip", "ls", "nice", "sed", "sort",
                          "sudo", "tar", "timeout"])

    def test_into_node_and_shell_strings(self):
        text = ("in_root() { unshare --mount --propagation private -- /bin/sh -c 'mount x y && "
                "exec chroot \"$1\"'; }\nin_root useradd -m ubuntu\n"
                "bash -c 'jq . f | head -1'\n")
        found = set(check_programs.shell_commands(text))
        self.assertIn(("useradd", True), found)  # runs inside the image
        self.assertIn(("unshare", False), found)
        self.assertIn(("/bin/sh", False), found)
        self.assertIn(("mount", False), found)
        self.assertIn(("jq", False), found)
        self.assertIn(("head", False), found)
        self.assertNotIn("private", {w for w, _ in found})

    def test_cpp_launch_sites(self):
        text = ('RunOk({"ip", "link", "add"});\n'
                'std::vector<std::string> argv = {\n  "systemd-nspawn", "--boot"};\n'
                'spec.path = "/bin/sh";\n'
                'CaptureNodeShell("squeue -h -o x | tail -1");\n'
                'std::vector<std::string> env = {"PATH=/usr/bin"};\n')
        found = set(check_programs.cpp_programs("src/agent/x.cc", text))
        self.assertEqual({w for w, _ in found}, {"ip", "systemd-nspawn", "/bin/sh", "squeue",
                                                  "tail"})
        self.assertTrue(all(node for _, node in found))  # src/agent/ runs in nodes


class InsideATree(unittest.TestCase):
    def test_absolute_links_stay_inside_the_tree(self):
        root = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, root)
        (root / "usr/bin").mkdir(parents=True)
        (root / "etc/alternatives").mkdir(parents=True)
        (root / "usr/bin/mawk").write_text("")
        os.symlink("/etc/alternatives/awk", root / "usr/bin/awk")
        os.symlink("/usr/bin/mawk", root / "etc/alternatives/awk")
        os.symlink("usr/bin", root / "bin")  # merged /usr, relative
        self.assertEqual(check_programs.resolve_in_root("/usr/bin/awk", str(root)), "/usr/bin/mawk")
        self.assertEqual(check_programs.resolve_in_root("/bin/awk", str(root)), "/usr/bin/mawk")
        self.assertEqual(check_programs.find_program("awk", str(root)), "/usr/bin/awk")


@unittest.skipUnless(shutil.which("shfmt") and shutil.which("dpkg") and shutil.which("ip"),
                     "needs shfmt, dpkg and ip (iproute2)")
class WholeRepo(unittest.TestCase):
    def make_repo(self, setup_packages):
        root = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, root)
        write(root, "scripts/setup",
              f"#!/bin/bash\npackages=(g++ {setup_packages})\napt-get install -y x\n", 0o755)
        write(root, "scripts/run", "#!/bin/bash\nset -e\nip link show\ncat /etc/hostname\n",
              0o755)
        write(root, "data/node-image/packages.txt", "systemd\n")
        return root

    def test_program_from_a_package_nobody_installs_is_reported(self):
        problems, _, _ = check_programs.check(self.make_repo(""))
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("ip (host; used in scripts/run)", problems[0])
        self.assertIn("iproute2", problems[0])

    def test_named_in_setup_or_essential_passes(self):
        problems, _, count = check_programs.check(self.make_repo("iproute2"))
        self.assertEqual(problems, [])
        self.assertEqual(count, 3)  # ip; cat (Essential coreutils); apt-get (required apt)

    def test_unknown_program_is_reported(self):
        root = self.make_repo("iproute2")
        write(root, "scripts/more", "#!/bin/sh\nhf-no-such-tool --x\n", 0o755)
        problems, _, _ = check_programs.check(root)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("hf-no-such-tool", problems[0])
        self.assertIn("not found on this machine", problems[0])

    def test_kubernetes_binaries_come_from_scripts_kubernetes(self):
        root = self.make_repo("iproute2")
        write(root, "scripts/kubernetes", "#!/bin/bash\nbinaries=(kube-apiserver kubectl)\n",
              0o755)
        write(root, "src/eks/x.cc", 'RunOk({"kubectl", "apply"});\nRunOk({"kubeadm", "x"});\n')
        problems, _, _ = check_programs.check(root)
        self.assertEqual(len(problems), 1, problems)  # kubeadm: not built, not on this machine
        self.assertIn("kubeadm (host; used in src/eks/x.cc)", problems[0])


if __name__ == "__main__":
    unittest.main()
