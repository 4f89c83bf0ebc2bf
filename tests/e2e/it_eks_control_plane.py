"""EKS control planes on this host (eks::ProcessControlPlanes, driven through
`hyperfleet eks-control-plane`): two real Kubernetes control planes at once, each ready with
its bootstrap bindings and usable with kubectl; a second process adopts them instead of
starting another set; a killed component comes back; remove leaves no process and no data.
Prints the time from ensure to READY and the RSS of every process."""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

K8S_BIN = os.environ.get("HYPERFLEET_KUBERNETES_BIN",
                         "/var/lib/hyperfleet/kubernetes/current/bin")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


def kubectl_binary():
    """The kubectl scripts/kubernetes built (a fresh host has no other)."""
    return os.path.join(K8S_BIN, "kubectl")


def processes_under(directory):
    """{pid: program name (argv[0]'s base name)} of processes whose working directory is
    `directory` or below."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                comm = os.path.basename(f.read().split(b"\0")[0].decode())
        except OSError:
            continue
        if cwd == directory or cwd.startswith(directory + "/"):
            found[int(entry)] = comm
    return found


def read(path):
    with open(path) as f:
        return f.read()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class EksControlPlaneTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.kubernetes_bin()  # skips without them (fails under CI)
        if not shutil.which("etcd"):
            raise AssertionError("no etcd: scripts/setup --eks installs etcd-server")
        cls.data_dir = tempfile.mkdtemp(prefix="hf-eks-cp-")

    @classmethod
    def tearDownClass(cls):
        for name in ("alpha", "beta"):
            cls.cp("remove", name, check=False)
        shutil.rmtree(cls.data_dir, ignore_errors=True)

    @classmethod
    def cp(cls, action, name, *extra, check=True):
        """Runs `hyperfleet eks-control-plane ACTION NAME`; its JSON answer (ensure, status)."""
        argv = [harness.BINARY, "eks-control-plane", action, name, "--data-dir", cls.data_dir,
                "--kubernetes-bin", K8S_BIN, *extra]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=ENV)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return json.loads(proc.stdout) if action in ("ensure", "status") and proc.stdout else None

    def dir_of(self, name):
        return os.path.join(self.data_dir, "eks", name)

    def kubectl(self, name, *args):
        proc = subprocess.run(
            [kubectl_binary(), "--kubeconfig", os.path.join(self.dir_of(name), "admin.kubeconfig"),
             *args], capture_output=True, text=True, timeout=60, env=ENV)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout

    def components(self, name):
        """{component: pid} of the control plane `name`, each exactly once."""
        by_name = {}
        for pid, comm in processes_under(self.dir_of(name)).items():
            by_name.setdefault(comm, []).append(pid)
        for comm in COMPONENTS:
            self.assertEqual(len(by_name.get(comm, [])), 1, f"{name}: {by_name}")
        return {comm: by_name[comm][0] for comm in COMPONENTS}

    def test_two_control_planes(self):
        # Both at once, each with its own ports and pod range, each READY.
        took = {}
        for name in ("alpha", "beta"):
            start = time.monotonic()
            status = self.cp("ensure", name, "--wait", "180")
            took[name] = time.monotonic() - start
            self.assertEqual(status["phase"], "READY", status)
            self.assertTrue(status["served_version"].startswith("v1."), status)
            print(f"{name}: ensure -> READY in {took[name]:.1f} s, "
                  f"{status['served_version']} at {status['endpoint']}")
        plans = {n: json.loads(read(os.path.join(self.dir_of(n), "control-plane.json")))
                 for n in ("alpha", "beta")}
        ports = [set(p["ports"].values()) for p in plans.values()]
        self.assertEqual(len(ports[0] | ports[1]), 14, plans)
        self.assertNotEqual(plans["alpha"]["pod_cidr"], plans["beta"]["pod_cidr"])
        self.assertEqual(oct(os.stat(self.dir_of("alpha")).st_mode & 0o777), "0o700")

        for name in ("alpha", "beta"):
            # The endpoint as clients get it: its certificate names the host address.
            status = self.cp("status", name)
            context = ssl.create_default_context(
                cafile=os.path.join(self.dir_of(name), "pki", "ca.crt"))
            with urllib.request.urlopen(status["endpoint"] + "/readyz", context=context,
                                        timeout=10) as r:
                self.assertEqual(r.read(), b"ok")
            namespaces = self.kubectl(name, "get", "ns", "-o", "name")
            self.assertIn("namespace/kube-system", namespaces)
            for group, role in (("hyperfleet:eks:admin", "admin"),
                                ("hyperfleet:eks:edit", "edit"),
                                ("hyperfleet:eks:view", "view")):
                binding = json.loads(self.kubectl(name, "get", "clusterrolebinding", group,
                                                  "-o", "json"))
                self.assertEqual(binding["roleRef"]["name"], role)
                self.assertEqual(binding["subjects"][0]["name"], group)

        # Another process (a restarted server) adopts them: nothing new is started.
        before = {n: self.components(n) for n in ("alpha", "beta")}
        pid_file = os.path.join(self.dir_of("alpha"), "supervisor.pid")
        supervisor = read(pid_file)
        self.assertEqual(self.cp("ensure", "alpha")["phase"], "READY")
        self.assertEqual(read(pid_file), supervisor)
        self.assertEqual({n: self.components(n) for n in ("alpha", "beta")}, before)

        # Memory of each process, while both run.
        for name in ("alpha", "beta"):
            pids = processes_under(self.dir_of(name))
            figures = ", ".join(f"{comm} {rss_kib(pid) / 1024:.0f} MiB"
                                for pid, comm in sorted(pids.items(), key=lambda p: p[1]))
            print(f"{name} RSS: {figures}")

        # A component that dies is started again by the supervisor.
        os.kill(before["alpha"]["kube-scheduler"], signal.SIGKILL)
        harness.wait_until(
            lambda: self.components("alpha")["kube-scheduler"] != before["alpha"]["kube-scheduler"],
            timeout=30, what="a new kube-scheduler")

        # A killed supervisor: FAILED; ensure ends its orphaned components and starts anew.
        os.kill(int(read(os.path.join(self.dir_of("beta"), "supervisor.pid"))), signal.SIGKILL)
        harness.wait_until(lambda: self.cp("status", "beta", check=False)["phase"] == "FAILED",
                           timeout=10, what="beta FAILED")
        self.assertEqual(self.cp("ensure", "beta", "--wait", "180")["phase"], "READY")
        restarted = self.components("beta")
        self.assertFalse(set(restarted.values()) & set(before["beta"].values()), restarted)
        before["beta"] = restarted

        # remove: no process, no directory; the other is untouched until removed too.
        self.cp("remove", "alpha")
        self.assertFalse(os.path.exists(self.dir_of("alpha")))
        self.assertEqual(processes_under(self.dir_of("alpha")), {})
        self.assertEqual(self.cp("status", "alpha")["phase"], "ABSENT")
        self.assertEqual(self.components("beta"), before["beta"])
        self.cp("remove", "beta")
        self.assertEqual(processes_under(self.dir_of("beta")), {})
        self.assertFalse(os.path.exists(self.dir_of("beta")))
        leftovers = [p for p in os.listdir("/proc") if p.isdigit() and self._names(p)]
        self.assertEqual(leftovers, [])

    def _names(self, pid):
        """True when process `pid`'s command line names this test's data directory."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return self.data_dir.encode() in f.read()
        except OSError:
            return False

    def test_binary_replaced_while_running(self):
        """A server whose binary was replaced (a rebuild, an upgrade) still starts control
        planes: /proc/self/exe then reads '<path> (deleted)', which names nothing to run."""
        copy_dir = tempfile.mkdtemp(prefix="hf-eks-exe-")
        copy = os.path.join(copy_dir, "hyperfleet")
        shutil.copy2(harness.BINARY, copy)
        fd = os.open(copy, os.O_RDONLY)
        try:
            os.unlink(copy)  # runs from the open file, as a replaced binary does
            proc = subprocess.run(
                [f"/proc/self/fd/{fd}", "eks-control-plane", "ensure", "gamma", "--data-dir",
                 self.data_dir, "--kubernetes-bin", K8S_BIN, "--wait", "120"],
                capture_output=True, text=True, timeout=300, env=ENV, pass_fds=(fd,))
        finally:
            os.close(fd)
            shutil.rmtree(copy_dir, ignore_errors=True)
        try:
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual(json.loads(proc.stdout)["phase"], "READY", proc.stdout)
        finally:
            self.cp("remove", "gamma", check=False)
        self.assertFalse(os.path.exists(self.dir_of("gamma")))
        self.assertEqual(processes_under(self.dir_of("gamma")), {})

    def test_two_processes_create_at_once(self):
        """Two processes (e.g. the server and this command) creating control planes at the same
        moment choose different ports: without the data dir's lock both took the same, and one
        cluster's apiserver served the other's etcd."""
        argv = [harness.BINARY, "eks-control-plane", "ensure", "--data-dir", self.data_dir,
                "--kubernetes-bin", K8S_BIN, "--wait", "180"]
        procs = [subprocess.Popen(argv[:3] + [n] + argv[3:], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=ENV)
                 for n in ("delta", "epsilon")]
        try:
            outs = [p.communicate(timeout=300) for p in procs]
            for p, (out, err) in zip(procs, outs):
                self.assertEqual(p.returncode, 0, out + err)
                self.assertEqual(json.loads(out)["phase"], "READY", out)
            plans = [json.loads(read(os.path.join(self.dir_of(n), "control-plane.json")))
                     for n in ("delta", "epsilon")]
            ports = [set(p["ports"].values()) for p in plans]
            self.assertEqual(ports[0] & ports[1], set(), plans)
            for n in ("delta", "epsilon"):
                self.assertFalse(os.path.exists(os.path.join(self.dir_of(n), "failure.txt")), n)
        finally:
            for n in ("delta", "epsilon"):
                self.cp("remove", n, check=False)

    def node_kubectl(self, kubeconfig, *args, check=True):
        """kubectl as a node (its kubelet kubeconfig); the CompletedProcess."""
        proc = subprocess.run([kubectl_binary(), "--kubeconfig", kubeconfig, *args],
                              capture_output=True, text=True, timeout=60, env=ENV)
        if check:
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc

    def cp_out(self, action, name, *extra):
        """`hyperfleet eks-control-plane ACTION NAME ...`: (exit status, stdout, stderr)."""
        argv = [harness.BINARY, "eks-control-plane", action, name, *extra, "--data-dir",
                self.data_dir, "--kubernetes-bin", K8S_BIN]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=ENV)
        return proc.returncode, proc.stdout, proc.stderr

    def nodes(self, name):
        rc, out, err = self.cp_out("nodes", name)
        self.assertEqual(rc, 0, out + err)
        return {n["name"]: n for n in json.loads(out)}

    def test_nodes(self):
        """A node joins with the credentials nodeJoin made (its kubelet creates its own Node,
        and may not change another's); nodes lists them; updateNode sets and removes labels and
        taints; removeNode deletes the pods bound to the Node at once, the Node and its
        credentials."""
        name = "zeta"
        rc, _, err = self.cp_out("node-join", name, "hyperpod-i-1")
        self.assertNotEqual(rc, 0)
        self.assertIn("no control plane", err)
        try:
            self.assertEqual(self.cp("ensure", name, "--wait", "180")["phase"], "READY")
            rc, out, err = self.cp_out("node-join", name, "hyperpod-i-1")
            self.assertEqual(rc, 0, out + err)
            join = json.loads(out)
            self.assertEqual(self.cp_out("node-join", name, "hyperpod-i-1")[1], out)  # kept
            plan = json.loads(read(os.path.join(self.dir_of(name), "control-plane.json")))
            self.assertEqual(join["cluster_cidr"], plan["pod_cidr"])
            self.assertEqual(join["ca_pem"], read(os.path.join(self.dir_of(name), "pki", "ca.crt")))
            rc, _, err = self.cp_out("node-join", name, "Bad_Name")
            self.assertNotEqual(rc, 0)
            self.assertIn("DNS subdomain", err)

            kubelet = os.path.join(self.data_dir, "kubelet-1.kubeconfig")
            with open(kubelet, "w") as f:
                f.write(join["kubelet_kubeconfig"])
            proxy = os.path.join(self.data_dir, "kube-proxy.kubeconfig")
            with open(proxy, "w") as f:
                f.write(join["kube_proxy_kubeconfig"])

            def node_object(node):
                path = os.path.join(self.data_dir, node + ".json")
                with open(path, "w") as f:
                    json.dump({"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": node}}, f)
                return path

            # The node registers itself, as its kubelet does; another Node comes from the admin.
            self.node_kubectl(kubelet, "create", "-f", node_object("hyperpod-i-1"))
            self.kubectl(name, "create", "-f", node_object("hyperpod-i-2"))
            nodes = self.nodes(name)
            self.assertEqual(sorted(nodes), ["hyperpod-i-1", "hyperpod-i-2"])
            self.assertFalse(nodes["hyperpod-i-1"]["ready"])  # no kubelet posts its status

            # The node's credential acts for its own Node only.
            denied = self.node_kubectl(kubelet, "label", "node", "hyperpod-i-2", "x=y",
                                       check=False)
            self.assertNotEqual(denied.returncode, 0)
            self.assertIn("Forbidden", denied.stderr)
            self.node_kubectl(kubelet, "label", "node", "hyperpod-i-1", "own=yes")
            # ... and is no admin (the Node authorizer permits patching any Node: only the
            # NodeRestriction admission above tells them apart, which can-i does not ask).
            for verb in (("list", "secrets", "-A"), ("create", "clusterrolebindings")):
                # "no", or "no - <why>" (the Node authorizer explains some refusals).
                answer = self.node_kubectl(kubelet, "auth", "can-i", *verb,
                                           check=False).stdout.strip()
                self.assertTrue(answer == "no" or answer.startswith("no - "), (verb, answer))
            self.assertEqual(self.node_kubectl(proxy, "auth", "can-i", "list", "endpoints",
                                               check=False).stdout.strip(), "yes")

            # updateNode: a label and a taint, then both removed (and an absent taint).
            rc, out, err = self.cp_out("node-update", name, "hyperpod-i-1", "--label",
                                       "hyperfleet/group=workers", "--taint",
                                       "dedicated=gpu:NoSchedule")
            self.assertEqual(rc, 0, out + err)
            node = self.nodes(name)["hyperpod-i-1"]
            self.assertEqual(node["labels"].get("hyperfleet/group"), "workers")
            self.assertEqual(node["labels"].get("own"), "yes")
            self.assertIn({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                          node["taints"])
            rc, out, err = self.cp_out("node-update", name, "hyperpod-i-1", "--remove-label",
                                       "hyperfleet/group", "--remove-taint",
                                       "dedicated:NoSchedule", "--remove-taint",
                                       "absent:NoExecute")
            self.assertEqual(rc, 0, out + err)
            node = self.nodes(name)["hyperpod-i-1"]
            self.assertNotIn("hyperfleet/group", node["labels"])
            self.assertNotIn("dedicated", [t["key"] for t in node["taints"]])
            rc, _, err = self.cp_out("node-update", name, "hyperpod-absent", "--label", "a=b")
            self.assertNotEqual(rc, 0)
            self.assertIn("NOT_FOUND", err)

            # removeNode: its pods (in any namespace) go at once, then the Node and its files.
            def pod(pod_name, namespace, node):
                return {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pod_name, "namespace": namespace},
                        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                                 "containers": [{"name": "c", "image": "none"}]}}
            pods = os.path.join(self.data_dir, "pods.json")
            with open(pods, "w") as f:
                json.dump({"apiVersion": "v1", "kind": "List",
                           "items": [pod("p1", "default", "hyperpod-i-1"),
                                     pod("p2", "kube-system", "hyperpod-i-1"),
                                     pod("other", "default", "hyperpod-i-2")]}, f)
            # The default ServiceAccounts come from the controller-manager, a moment after
            # READY; until then the apiserver refuses the pods (apply: idempotent retries).
            harness.wait_until(lambda: subprocess.run(
                [kubectl_binary(), "--kubeconfig",
                 os.path.join(self.dir_of(name), "admin.kubeconfig"), "apply", "-f", pods],
                capture_output=True, env=ENV, timeout=60).returncode == 0,
                timeout=60, what="pods created", interval=0.5)
            self.assertEqual(self.kubectl(name, "get", "pods", "-A", "-o", "name").count("pod/"), 3)
            start = time.monotonic()
            rc, out, err = self.cp_out("node-remove", name, "hyperpod-i-1")
            self.assertEqual(rc, 0, out + err)
            print(f"removeNode with 2 pods took {time.monotonic() - start:.1f} s")
            left = self.kubectl(name, "get", "pods", "-A", "-o", "name").split()
            self.assertEqual(left, ["pod/other"])
            self.assertEqual(sorted(self.nodes(name)), ["hyperpod-i-2"])
            self.assertFalse(os.path.exists(os.path.join(self.dir_of(name), "nodes",
                                                         "hyperpod-i-1")))
            rc, out, err = self.cp_out("node-remove", name, "hyperpod-i-1")  # already gone
            self.assertEqual(rc, 0, out + err)
        finally:
            self.cp("remove", name, check=False)
        rc, _, err = self.cp_out("nodes", name)
        self.assertNotEqual(rc, 0)
        self.assertIn("no control plane", err)

    def test_bad_name_is_refused(self):
        proc = subprocess.run([harness.BINARY, "eks-control-plane", "ensure", "../x",
                               "--data-dir", self.data_dir, "--kubernetes-bin", K8S_BIN],
                              capture_output=True, text=True, timeout=30, env=ENV)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("name ../x", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "x")))


if __name__ == "__main__":
    harness.main()
