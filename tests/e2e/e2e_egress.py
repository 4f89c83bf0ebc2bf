"""Node egress and isolation of local clusters (issue 15; docs/nodes.md "Network"): with
--node-egress nat a node resolves and fetches from the Debian mirror and a lifecycle script's
`apt-get update` works; a node reaches on the host only its agent endpoint; clusters cannot
reach each other; with none nothing outside works, even after a node adds its own default
route; with proxy the server's http_proxy (a proxy on the host's loopback) reaches lifecycle
scripts and apt; deleting the clusters removes the fleet's nftables table and puts
net.ipv4.ip_forward back. The only outside address contacted is the Debian mirror. Needs root
and the node image (`hyperfleet image path`); skipped otherwise."""

import glob
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

from harness import BINARY, Server, aws_env, main, mirror_addresses, wait_until

MIRROR_URL = "http://deb.debian.org/debian/dists/bookworm/Release"
IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"

# Run with the host's python3 inside a node's network namespace (ip netns exec).
LISTENER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hello\\n"); c.close()
"""
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
except OSError as e:
    print(e); sys.exit(1)
"""

ON_CREATE_APT = "#!/bin/bash\nset -euo pipefail\napt-get update -q\necho apt-update-ok\n"
ON_CREATE = "#!/bin/bash\necho ok\n"
ON_CREATE_PROXY = (
    "#!/bin/bash\nset -euo pipefail\necho \"proxy=$http_proxy\"\n"
    f"code=$(curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' {MIRROR_URL})\n"
    "echo \"fetched=$code\"\n[ \"$code\" = 200 ]\n")


def image_ready():
    return subprocess.run([BINARY, "image", "path"], capture_output=True).returncode == 0


def hyperfleet_bridges():
    return sorted(os.path.basename(p) for p in glob.glob("/sys/class/net/hfb*"))


class Fleet:
    """One server with the local provider and its own data dir and bucket."""

    def __init__(self, egress, scripts, env=None, allow=()):
        self.server = Server(provider="local",
                             extra_args=["--node-egress", egress, "--lifecycle-timeout", "300",
                                         "--heartbeat-interval", "2",
                                         *(["--node-egress-allow", ",".join(allow)] if allow
                                           else [])])
        self.env_override = env or {}
        for name, text in scripts.items():
            path = os.path.join(self.server.data_dir, "s3", "egress", name, "on_create.sh")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        self.clusters = {}  # name -> cluster id

    def start(self):
        saved = {k: os.environ.get(k) for k in self.env_override}
        os.environ.update(self.env_override)  # the server reads proxies from its environment
        try:
            self.server.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.env = aws_env(self.server.endpoint)
        with open(os.path.join(self.server.data_dir, "local", "fleet-id")) as f:
            self.fleet = f.read().strip()

    def aws(self, *args, check=True):
        r = subprocess.run(["aws", *args, "--output", "json", "--endpoint-url",
                            self.server.endpoint], env=self.env, capture_output=True, text=True,
                           timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)} failed: {r.stderr}")
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else r

    def create(self, name, count, script):
        spec = {"ClusterName": name, "InstanceGroups": [{
            "InstanceGroupName": "g", "InstanceType": "ml.c5.xlarge", "InstanceCount": count,
            "LifeCycleConfig": {"SourceS3Uri": f"s3://egress/{script}/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole"}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            arn = self.aws("sagemaker", "create-cluster", "--cli-input-json",
                           f"file://{f.name}")["ClusterArn"]
        finally:
            os.unlink(f.name)
        self.clusters[name] = arn.rsplit("/", 1)[1]

    def wait_in_service(self, name):
        def settled():
            c = self.aws("sagemaker", "describe-cluster", "--cluster-name", name)
            return c if c["ClusterStatus"] in ("InService", "Failed") else None
        c = wait_until(settled, timeout=420, interval=1, what=f"{name} InService")
        if c["ClusterStatus"] != "InService":
            raise AssertionError(f"{name} failed: {c.get('FailureMessage')} (see "
                                 f"{self.server.data_dir}/server.log)")

    def nodes(self, name):
        """[(instance id, private ip)] of a cluster."""
        out = []
        for n in self.aws("sagemaker", "list-cluster-nodes", "--cluster-name",
                          name)["ClusterNodeSummaries"]:
            d = self.aws("sagemaker", "describe-cluster-node", "--cluster-name", name,
                         "--node-id", n["InstanceId"])["NodeDetails"]
            out.append((d["InstanceId"], d["PrivatePrimaryIp"]))
        return sorted(out)

    def netns(self, iid):
        return f"hf-{self.fleet}-{iid}"

    def network(self, name):
        path = os.path.join(self.server.data_dir, "local", "clusters", self.clusters[name],
                            "network.json")
        with open(path) as f:
            return json.load(f)

    def host_address(self, name):
        return self.network(name)["host_address"]

    def run_on(self, name, iid, command):
        target = f"sagemaker-cluster:{self.clusters[name]}_g-{iid}"
        return subprocess.run([BINARY, "ssm", "start-session", "--endpoint-url",
                               self.server.endpoint, "--target", target, "--command", command],
                              env=self.env, capture_output=True, text=True, timeout=90)

    def delete_all(self):
        for name in list(self.clusters):
            self.aws("sagemaker", "delete-cluster", "--cluster-name", name, check=False)
        wait_until(lambda: not self.aws("sagemaker", "list-clusters")["ClusterSummaries"],
                   timeout=180, interval=1, what="clusters deleted")
        nodes = os.path.join(self.server.data_dir, "local", "nodes")
        wait_until(lambda: not os.path.isdir(nodes) or not os.listdir(nodes), timeout=120,
                   what="node directories removed")
        self.clusters.clear()


def probe(netns, host, port):
    """True when a TCP connection from `netns` (None: the host) to host:port succeeds."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    return subprocess.run([*prefix, sys.executable, "-c", PROBE, host, str(port)],
                          capture_output=True, timeout=20).returncode == 0


class Listener:
    """A TCP listener on 0.0.0.0:<free port> in `netns` (None: the host)."""

    def __init__(self, netns=None):
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.proc = subprocess.Popen([*prefix, sys.executable, "-c", LISTENER],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class OutsideHost:
    """A network namespace standing for a machine beyond this host: 198.51.100.2 (TEST-NET-2)
    behind a veth whose host end is 198.51.100.1, with a listener. Unlike the mirror it answers
    packets that were not masqueraded, so it shows what the host forwards; nothing leaves the
    machine."""

    def __init__(self):
        tag = os.urandom(3).hex()
        self.ns, self.veth, self.ip = f"hf-egress-out-{tag}", f"hfxo{tag}", "198.51.100.2"
        for cmd in (["ip", "netns", "add", self.ns],
                    ["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0",
                     "netns", self.ns],
                    ["ip", "addr", "add", "198.51.100.1/30", "dev", self.veth],
                    ["ip", "link", "set", self.veth, "up"],
                    ["ip", "-n", self.ns, "addr", "add", "198.51.100.2/30", "dev", "eth0"],
                    ["ip", "-n", self.ns, "link", "set", "eth0", "up"],
                    ["ip", "-n", self.ns, "route", "add", "default", "via", "198.51.100.1"]):
            subprocess.run(cmd, check=True)
        self.listener = Listener(self.ns)

    def close(self):
        self.listener.close()
        subprocess.run(["ip", "link", "del", self.veth])
        subprocess.run(["ip", "netns", "del", self.ns])


def nft_table(fleet):
    return subprocess.run(["nft", "list", "table", "inet", f"hyperfleet-{fleet}"],
                          capture_output=True, text=True, check=True).stdout


def table_exists(fleet):
    return subprocess.run(["nft", "list", "table", "inet", f"hyperfleet-{fleet}"],
                          capture_output=True).returncode == 0


class EgressTest(unittest.TestCase):
    """A nat fleet (cluster a: 1 node running apt-get update; cluster b: 2 nodes) and a none
    fleet (cluster n: 1 node)."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        if not image_ready():
            raise unittest.SkipTest("no node image (`hyperfleet image path` fails; run "
                                    "scripts/setup)")
        with open(IP_FORWARD) as f:
            cls.ip_forward_before = f.read().strip()
        cls.nat = Fleet("nat", {"apt": ON_CREATE_APT, "plain": ON_CREATE})
        cls.none = Fleet("none", {"plain": ON_CREATE})
        # nat, but only to the mirror (what the harness gives every other test's nodes).
        cls.allow = Fleet("nat", {"plain": ON_CREATE}, allow=mirror_addresses())
        cls.fleets = [cls.nat, cls.none, cls.allow]
        cls.outside = OutsideHost()
        try:
            for fleet in cls.fleets:
                fleet.start()
            cls.nat.create("eg-a", 1, "apt")
            cls.nat.create("eg-b", 2, "plain")
            cls.none.create("eg-n", 1, "plain")
            cls.allow.create("eg-w", 1, "plain")
            for fleet, name in [(cls.nat, "eg-a"), (cls.nat, "eg-b"), (cls.none, "eg-n"),
                                (cls.allow, "eg-w")]:
                fleet.wait_in_service(name)
            cls.a = cls.nat.nodes("eg-a")
            cls.b = cls.nat.nodes("eg-b")
            cls.n = cls.none.nodes("eg-n")
            cls.w = cls.allow.nodes("eg-w")
            cls.bridges = {f.network(name)["bridge"] for f in cls.fleets for name in f.clusters}
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for fleet in getattr(cls, "fleets", []):
            try:
                if fleet.server.proc and fleet.clusters:
                    fleet.delete_all()
            finally:
                fleet.server.cleanup()
        if getattr(cls, "outside", None):
            cls.outside.close()
            cls.outside = None

    def test_1_nat_resolves_and_fetches_from_the_mirror(self):
        iid = self.a[0][0]
        r = self.nat.run_on("eg-a", iid, "getent hosts deb.debian.org && curl -sS --max-time 5 "
                            f"-o /dev/null -w 'code=%{{http_code}}' {MIRROR_URL}")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("deb.debian.org", r.stdout)
        self.assertIn("code=200", r.stdout)
        # The lifecycle script's apt-get update worked (the cluster is InService) and said so.
        r = self.nat.run_on("eg-a", iid, "cat /var/log/provision/hyperfleet-lifecycle.log")
        self.assertIn("apt-update-ok", r.stdout)
        with open(IP_FORWARD) as f:
            self.assertEqual(f.read().strip(), "1")

    def test_2_host_services_are_closed_but_the_agent_endpoint(self):
        host = self.nat.host_address("eg-a")
        listener = Listener()
        try:
            self.assertTrue(probe(None, host, listener.port), "the host itself reaches it")
            ns = self.nat.netns(self.a[0][0])
            self.assertFalse(probe(ns, host, listener.port),
                             "a node reached a host service on 0.0.0.0")
            self.assertTrue(probe(ns, host, 9081), "the agent endpoint is closed to the node")
            # Another cluster's bridge host address is the host too: closed as well.
            self.assertFalse(probe(ns, self.nat.host_address("eg-b"), 9081))
        finally:
            listener.close()

    def test_3_clusters_cannot_reach_each_other(self):
        (b1, b1_ip), (b2, _) = self.b
        a1, a1_ip = self.a[0]
        in_b1 = Listener(self.nat.netns(b1))
        in_a1 = Listener(self.nat.netns(a1))
        try:
            self.assertTrue(probe(self.nat.netns(b2), b1_ip, in_b1.port), "within a cluster")
            self.assertFalse(probe(self.nat.netns(a1), b1_ip, in_b1.port), "cluster a to b")
            self.assertFalse(probe(self.nat.netns(b1), a1_ip, in_a1.port), "cluster b to a")
            # From another data dir's fleet (in none mode it has no route: add one first).
            n1 = self.none.netns(self.n[0][0])
            host_n = self.none.host_address("eg-n")
            subprocess.run(["ip", "-n", n1, "route", "add", b1_ip, "via", host_n], check=True)
            self.assertFalse(probe(n1, b1_ip, in_b1.port), "another fleet to cluster b")
        finally:
            in_b1.close()
            in_a1.close()

    def test_4b_an_allow_list_keeps_nodes_to_the_mirror(self):
        iid, _ = self.w[0]
        r = self.allow.run_on("eg-w", iid, "getent hosts deb.debian.org && curl -sS --max-time 5 "
                              f"-o /dev/null -w 'code=%{{http_code}}' {MIRROR_URL}")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("code=200", r.stdout)
        port = self.outside.listener.port
        self.assertFalse(probe(self.allow.netns(iid), self.outside.ip, port),
                         "a node reached a destination outside its allow list")
        self.assertTrue(probe(self.nat.netns(self.a[0][0]), self.outside.ip, port),
                        "a nat node without an allow list reaches it")
        table = nft_table(self.allow.fleet)  # nft prints a one-element set as the element
        for address in mirror_addresses():
            self.assertIn(f"ip daddr {address.removesuffix('/32')}", table.replace("{ ", ""))

    def test_4_none_reaches_nothing_outside(self):
        iid, _ = self.n[0]
        mirror_ip = socket.gethostbyname("deb.debian.org")
        r = self.none.run_on("eg-n", iid, "getent hosts deb.debian.org")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        r = self.none.run_on("eg-n", iid, f"curl -sS --max-time 5 -o /dev/null "
                             f"-H 'Host: deb.debian.org' http://{mirror_ip}/debian/")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        # Even with a default route of its own (IPv4 forwarding is on for the nat fleet), the
        # host forwards nothing from the node, while it does for a nat node.
        port = self.outside.listener.port
        self.assertTrue(probe(self.nat.netns(self.a[0][0]), self.outside.ip, port), "nat node")
        ns = self.none.netns(iid)
        host = self.none.host_address("eg-n")
        subprocess.run(["ip", "-n", ns, "route", "replace", "default", "via", host], check=True)
        try:
            self.assertFalse(probe(ns, self.outside.ip, port), "a none node got out")
            self.assertFalse(probe(ns, mirror_ip, 80), "a none node reached the mirror")
        finally:
            subprocess.run(["ip", "-n", ns, "route", "replace", "unreachable", "default"])
        self.assertTrue(probe(ns, host, 9081), "the agent endpoint stays open")

    def test_5_a_server_restart_keeps_the_rules(self):
        before = nft_table(self.nat.fleet)
        self.nat.server.stop()
        self.assertEqual(nft_table(self.nat.fleet), before, "the rules outlive the server")
        self.nat.start()  # adopts the running nodes and applies the same table again
        wait_until(lambda: self.nat.nodes("eg-a"), timeout=60, what="nodes listed again")
        self.assertEqual(nft_table(self.nat.fleet), before)
        port = self.outside.listener.port
        self.assertTrue(probe(self.nat.netns(self.a[0][0]), self.outside.ip, port))

    def test_9_deleting_clusters_removes_the_rules(self):
        for fleet in self.fleets:
            self.assertTrue(table_exists(fleet.fleet))
        for fleet in self.fleets:
            fleet.delete_all()
            self.assertFalse(table_exists(fleet.fleet), f"table of fleet {fleet.fleet} left")
        self.assertEqual(self.bridges & set(hyperfleet_bridges()), set(), "bridges left")
        if hyperfleet_bridges():
            print(f"other Hyperfleet bridges on this host ({hyperfleet_bridges()}): "
                  "ip_forward stays as they need it", file=sys.stderr)
            return
        with open(IP_FORWARD) as f:
            self.assertEqual(f.read().strip(), self.ip_forward_before)


class MirrorProxy(http.server.ThreadingHTTPServer):
    """A forward proxy for plain HTTP that only fetches from deb.debian.org."""

    def __init__(self):
        self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(h):
                self.seen.append(h.path)
                if urllib.request.urlparse(h.path).hostname != "deb.debian.org":
                    h.send_error(403)
                    return
                try:
                    with urllib.request.urlopen(h.path, timeout=20) as r:
                        body, status = r.read(), r.status
                except urllib.error.HTTPError as e:
                    body, status = e.read(), e.code
                h.send_response(status)
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)

            def log_message(h, *args):
                pass

        super().__init__(("0.0.0.0", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class ProxyEgressTest(unittest.TestCase):
    """--node-egress proxy with http_proxy on the host's loopback."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        if not image_ready():
            raise unittest.SkipTest("no node image (`hyperfleet image path` fails)")
        cls.proxy = MirrorProxy()
        port = cls.proxy.server_address[1]
        cls.fleet = Fleet("proxy", {"proxy": ON_CREATE_PROXY},
                          env={"http_proxy": f"http://127.0.0.1:{port}", "https_proxy": "",
                               "HTTP_PROXY": "", "HTTPS_PROXY": "", "no_proxy": "",
                               "NO_PROXY": ""})
        try:
            cls.fleet.start()
            cls.fleet.create("eg-p", 1, "proxy")
            cls.fleet.wait_in_service("eg-p")
            cls.p = cls.fleet.nodes("eg-p")
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        fleet = getattr(cls, "fleet", None)
        try:
            if fleet and fleet.server.proc and fleet.clusters:
                fleet.delete_all()
                assert not table_exists(fleet.fleet)
        finally:
            if fleet:
                fleet.server.cleanup()
            cls.proxy.shutdown()

    def test_lifecycle_scripts_and_apt_use_the_proxy_and_nothing_else(self):
        iid, _ = self.p[0]
        host = self.fleet.host_address("eg-p")
        port = self.proxy.server_address[1]
        # The lifecycle script fetched through the proxy (it is InService: curl said 200).
        self.assertIn(MIRROR_URL, self.proxy.seen)
        log = self.fleet.run_on("eg-p", iid, "cat /var/log/provision/hyperfleet-lifecycle.log")
        self.assertIn(f"proxy=http://{host}:{port}", log.stdout)
        apt = self.fleet.run_on("eg-p", iid, "cat /etc/apt/apt.conf.d/00hyperfleet-proxy")
        self.assertIn(f'Acquire::http::Proxy "http://{host}:{port}/";', apt.stdout)
        # Without the proxy nothing goes out, and other host ports stay closed.
        mirror_ip = socket.gethostbyname("deb.debian.org")
        ns = self.fleet.netns(iid)
        self.assertFalse(probe(ns, mirror_ip, 80))
        listener = Listener()
        try:
            self.assertFalse(probe(ns, host, listener.port))
        finally:
            listener.close()


if __name__ == "__main__":
    main()
