"""The ssh test machines of tests/e2e/ssh_machines.py (the fixture issue 18's tests use): each
is reached over ssh with its own pinned host key, a wrong key runs nothing, kill() is a dead
machine (refused at once), link_down() a dead network (timeouts), a reboot over ssh boots it
again, and nothing of a fleet outlives it, even when its test process was killed."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import harness
import ssh_machines


def host_state(slot):
    """What fleet slot `slot` has on this host: netns, links, mounts, cgroup dirs, state."""
    netns = sorted(n for n in os.listdir("/run/netns")
                   if re.match(rf"^hfsm{slot}-\d+$", n)) if os.path.isdir("/run/netns") else []
    links = [l for l in ssh_machines._links() if re.match(rf"^hfsm{slot}(v\d+)?$", l)]
    mounts = ssh_machines._mounts_under(os.path.join(ssh_machines.STATE, str(slot)))
    cgroups = [r for r in ssh_machines._cgroup_roots()
               if os.path.exists(os.path.join(r, "hfsm", str(slot)))]
    state = os.path.exists(os.path.join(ssh_machines.STATE, str(slot)))
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return {"netns": netns, "links": links, "mounts": mounts, "cgroups": cgroups,
            "state_dir": state, "nft": f"hfsm{slot}" in tables.split()}


EMPTY = {"netns": [], "links": [], "mounts": [], "cgroups": [], "state_dir": False, "nft": False}


def alive(pids):
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1][0] != "Z":
                    left.append(pid)
        except OSError:
            pass
    return left


@unittest.skipUnless(os.geteuid() == 0, "needs root (network namespaces, systemd-nspawn)")
class ThreeMachines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        started = time.monotonic()
        ssh_machines.ensure_image("site")
        print(f"\nimage ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
        started = time.monotonic()
        cls.fleet = ssh_machines.Fleet(3).start()
        print(f"3 machines answer ssh {time.monotonic() - started:.2f} s after the fleet "
              "started", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def test_each_machine_answers_with_its_own_identity(self):
        seen = set()
        for m in self.fleet.machines:
            r = m.ssh("hostname; cat /etc/machine-id; cat /etc/ssh/ssh_host_ed25519_key.pub; "
                      "nproc; grep MemTotal /proc/meminfo; test -c /dev/fuse && echo fuse; "
                      "systemctl is-system-running", check=True)
            hostname, machine_id, key, nproc, mem, fuse, state = r.stdout.splitlines()
            self.assertEqual(hostname, m.name)
            self.assertEqual(" ".join(key.split()[:2]), m.host_key_pub)
            self.assertEqual(m.known_hosts_line, f"{m.address} {m.host_key_pub}")
            self.assertEqual(int(nproc), os.cpu_count())
            with open("/proc/meminfo") as f:
                self.assertEqual(mem.split(), f.readline().split())  # the host's memory
            self.assertEqual(fuse, "fuse")
            self.assertEqual(state, "running")  # no failed unit
            seen.add((machine_id, key))
        self.assertEqual(len(seen), 3, "machine-ids and host keys must differ")

    def test_site_layer_has_the_node_packages_installed_but_off(self):
        m = self.fleet.machines[2]
        packages = ssh_machines.site_packages()
        self.assertIn("slurmd", packages)
        self.assertNotIn("libcurl4", packages)  # packages.txt's last section: not installed
        r = m.ssh("dpkg-query -W -f '${Status}\\n' " + " ".join(packages), check=True)
        self.assertEqual(set(r.stdout.splitlines()), {"install ok installed"})
        r = m.ssh("systemctl is-enabled munge slurmd slurmctld slurmdbd mariadb")
        self.assertEqual(set(r.stdout.split()), {"disabled"})
        self.assertEqual(m.ssh("test -e /etc/ssh/ssh_host_rsa_key").returncode, 1)

    def test_wrong_pinned_key_is_refused_and_runs_nothing(self):
        a, b = self.fleet.machines[0], self.fleet.machines[1]
        with tempfile.NamedTemporaryFile("w", suffix=".known_hosts") as wrong:
            wrong.write(f"{a.address} {b.host_key_pub}\n")  # a's address, b's key
            wrong.flush()
            r = a.ssh("touch /root/ran-with-wrong-key", known_hosts=wrong.name)
        self.assertEqual(r.returncode, 255)
        self.assertIn("Host key verification failed", r.stderr)
        self.assertEqual(a.ssh("ls /root/ran-with-wrong-key").returncode, 2)

    def test_machines_reach_the_host_address_and_nothing_else(self):
        m = self.fleet.machines[0]
        with socket.socket() as srv:
            srv.bind(("0.0.0.0", 0))
            srv.listen(4)
            srv.settimeout(10)
            port = srv.getsockname()[1]
            r = m.ssh(f"echo hello > /dev/tcp/{self.fleet.host_address}/{port}")
            self.assertEqual(r.returncode, 0, r.stderr)
            conn, peer = srv.accept()
            conn.close()
            self.assertEqual(peer[0], m.address)
            # No route beyond the subnet; with one added by root, the host's other addresses
            # stay out of reach (the fleet's nftables table).
            r = m.ssh("ip route get 10.224.0.1")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("unreachable", r.stderr)
            other = host_address_outside()
            m.ssh(f"ip route add default via {self.fleet.host_address}", check=True)
            try:
                r = m.ssh(f"timeout 2 bash -c 'echo x > /dev/tcp/{other}/{port}'")
                self.assertNotEqual(r.returncode, 0)
                r = m.ssh(f"timeout 5 bash -c 'echo x > /dev/tcp/{self.fleet.machines[1].address}/22'")
                self.assertEqual(r.returncode, 0, "machines reach each other")
            finally:
                m.ssh("ip route del default", check=True)

    def test_a_login_user_with_sudo(self):
        m = self.fleet.machines[0]
        m.add_login_user("operator1")
        r = m.ssh("id -un; sudo -n id -u", user="operator1", check=True)
        self.assertEqual(r.stdout.split(), ["operator1", "0"])

    def test_sshfs_mounts_inside_a_machine(self):
        # /dev/fuse is bound in: sshfs in passive mode (SFTP on stdin/stdout, as /fsx is
        # served to machines) mounts, reads and writes.
        m = self.fleet.machines[1]
        r = m.ssh("set -e; mkdir -p /srv/fuse-src /mnt/fuse; echo hi > /srv/fuse-src/f; "
                  "rm -f /tmp/sftp-in /tmp/sftp-out; mkfifo /tmp/sftp-in /tmp/sftp-out; "
                  "(/usr/lib/openssh/sftp-server </tmp/sftp-in >/tmp/sftp-out 2>/dev/null &); "
                  "(sshfs -o passive :/srv/fuse-src /mnt/fuse >/tmp/sftp-in </tmp/sftp-out "
                  "2>/dev/null &); "
                  "for i in $(seq 50); do mountpoint -q /mnt/fuse && break; sleep 0.1; done; "
                  "cat /mnt/fuse/f; echo w > /mnt/fuse/g; cat /srv/fuse-src/g; "
                  "fusermount3 -u /mnt/fuse", timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, "hi\nw\n"), r.stderr)

    def test_kill_refuses_within_a_second_and_start_boots_the_same_disk(self):
        m = self.fleet.machines[2]
        m.ssh("echo kept > /root/disk-mark", check=True)
        boot_before = m.boot_id()
        pids = m.pids()
        self.assertGreaterEqual(len(pids), 5)
        m.kill()
        self.assertEqual(alive(pids), [])
        started = time.monotonic()
        r = m.ssh("true", connect_timeout=5)
        elapsed = time.monotonic() - started
        self.assertEqual(r.returncode, 255)
        self.assertIn("Connection refused", r.stderr)
        self.assertLess(elapsed, 1.0)
        print(f"\nkill: ssh refused {elapsed:.3f} s after", file=sys.stderr)
        started = time.monotonic()
        m.start()
        print(f"start after kill: ssh answers in {time.monotonic() - started:.2f} s",
              file=sys.stderr)
        self.assertEqual(m.ssh("cat /root/disk-mark", check=True).stdout, "kept\n")
        self.assertNotEqual(m.boot_id(), boot_before)

    def test_link_down_times_out_and_link_up_answers_again(self):
        m = self.fleet.machines[1]
        m.link_down()
        try:
            started = time.monotonic()
            # Longer than the host's ARP probes last (~3 s): still a timeout, not "No route".
            r = m.ssh("touch /root/ran-while-down", connect_timeout=5)
            elapsed = time.monotonic() - started
            self.assertEqual(r.returncode, 255)
            self.assertIn("timed out", r.stderr)
            self.assertGreaterEqual(elapsed, 4.9)
        finally:
            m.link_up()
        harness.wait_until(lambda: m.ssh("true", connect_timeout=2).returncode == 0, 20,
                           "ssh after link_up")
        self.assertEqual(m.ssh("ls /root/ran-while-down").returncode, 2)

    def test_poweroff_ends_every_process_and_start_boots_again(self):
        m = self.fleet.machines[1]
        pids = m.pids()
        m.poweroff()
        self.assertEqual(alive(pids), [])
        self.assertEqual(m.ssh("true", connect_timeout=2).returncode, 255)
        m.start()
        m.ssh("true", check=True)

    def test_reboot_over_ssh_boots_it_again(self):
        m = self.fleet.machines[0]
        boot_before, count_before = m.boot_id(), m.reboot_count
        m.ssh("echo t > /tmp/cleared-at-boot; systemctl reboot")
        started = time.monotonic()
        harness.wait_until(lambda: m.reboot_count == count_before + 1, 30, "the reboot")
        harness.wait_until(lambda: m.ssh("true", connect_timeout=2).returncode == 0, 30,
                           "ssh after the reboot")
        print(f"\nreboot: ssh answers {time.monotonic() - started:.2f} s after the machine "
              "went down", file=sys.stderr)
        self.assertNotEqual(m.boot_id(), boot_before)
        self.assertEqual(m.ssh("ls /tmp/cleared-at-boot").returncode, 2)


def host_address_outside():
    """An address of this host that is not on a test bridge (its first global IPv4)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("10.250."):
            return addr
    return "127.0.0.1"


@unittest.skipUnless(os.geteuid() == 0, "needs root (network namespaces, systemd-nspawn)")
class Cleanup(unittest.TestCase):
    def test_close_leaves_nothing(self):
        old_umask = os.umask(0o077)  # a caller's umask does not reach the machines
        try:
            fleet = ssh_machines.Fleet(2).start()
        finally:
            os.umask(old_umask)
        with fleet:
            slot = fleet.slot
            r = fleet.machines[1].ssh("stat -c %a / /etc/hostname /root/.ssh/authorized_keys",
                                      check=True)
            self.assertEqual(r.stdout.split(), ["755", "644", "600"])
            pids = set().union(*(m.pids() for m in fleet.machines))
            fleet.machines[0].kill()  # a killed machine is cleaned up too
            self.assertNotEqual(host_state(slot), EMPTY)
        self.assertEqual(host_state(slot), EMPTY)
        self.assertEqual(alive(pids), [])

    def test_a_killed_test_run_is_cleaned_at_the_next_start(self):
        code = ("import sys, time, ssh_machines\n"
                "f = ssh_machines.Fleet(1).start()\n"
                "print(f.slot, ' '.join(map(str, f.machines[0].pids())), flush=True)\n"
                "time.sleep(600)\n")
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        try:
            line = child.stdout.readline().split()
            self.assertTrue(line, "the child fleet did not start")
            slot, pids = int(line[0]), [int(p) for p in line[1:]]
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
        self.assertNotEqual(host_state(slot), EMPTY)
        self.assertTrue(alive(pids), "its machine runs on after the test process died")
        with ssh_machines.Fleet(1, slot=slot) as fleet:
            self.assertEqual(alive(pids), [])
            fleet.machines[0].ssh("true", check=True)
        self.assertEqual(host_state(slot), EMPTY)


@unittest.skipUnless(os.geteuid() == 0, "needs root (network namespaces, systemd-nspawn)")
class Figures(unittest.TestCase):
    def test_boot_of_1_and_10_machines(self):
        ssh_machines.ensure_image("site")
        with ssh_machines.Fleet(0) as fleet:
            started = time.monotonic()
            fleet.add()
            one = time.monotonic() - started
            started = time.monotonic()
            for _ in range(10):
                fleet.add(boot=False)
            fleet.boot_all(fleet.machines[1:])
            ten = time.monotonic() - started
            memory = [m.memory_bytes() for m in fleet.machines]
            started = time.monotonic()
        close = time.monotonic() - started
        print(f"\nboot to ssh: 1 machine {one:.2f} s, 10 more at once {ten:.2f} s; memory per "
              f"machine (cgroup) {min(memory) / 2**20:.0f}-{max(memory) / 2**20:.0f} MiB; "
              f"teardown of 11 {close:.2f} s", file=sys.stderr)
        self.assertLess(one, 30)
        self.assertLess(ten, 120)


if __name__ == "__main__":
    harness.main()
