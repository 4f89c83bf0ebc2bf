"""The node agent endpoint over TLS (`hyperfleet server --agent-listen`, docs/nodes.md "The
agent endpoint over TLS"): the real server with the fake provider, a client that pins the
printed certificate as agents on machines do, and raw sockets for what must get nothing."""

import hashlib
import hmac
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import shutil
import unittest

import boto3
import botocore.config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def start_server(data_dir=None, agent_args=("--agent-listen", "127.0.0.1:0")):
    """A server with the TLS agent endpoint, started under umask 0 (its key must still be
    owner-only)."""
    old = os.umask(0)
    try:
        return harness.Server(data_dir=data_dir, extra_args=agent_args).start()
    finally:
        os.umask(old)


def node_token(data_dir, instance_id):
    with open(os.path.join(data_dir, "local", "node-secret"), "rb") as f:
        return hmac.new(f.read(), instance_id.encode(), hashlib.sha256).hexdigest()


class AgentTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = start_server()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def request(self, path, instance_id, body, pin=None):
        token = node_token(self.server.data_dir, instance_id)
        return harness.agent_request(
            self.server.agent_endpoint, pin or self.server.agent_cert_sha256, "POST", path,
            body=json.dumps(body).encode(),
            headers={"Authorization": f"HyperfleetNode {instance_id}:{token}",
                     "Content-Type": "application/json"})

    def instance(self, name):
        sm = boto3.session.Session().client(
            "sagemaker", endpoint_url=self.server.endpoint, region_name=harness.REGION,
            aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
            config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))
        sm.create_cluster(**harness.cluster_spec(name, [("workers", "ml.c5.large", 1)]))
        return harness.wait_until(
            lambda: [s["InstanceId"] for s in
                     sm.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]],
            what=f"the instance of {name}")[0]

    def test_pinned_agent_registers_and_heartbeats(self):
        iid = self.instance("tls-agent")
        status, body = self.request("/agent/v1/register", iid, {"version": 1, "boot_id": "b1"})
        self.assertEqual(status, 200, body)
        registered = json.loads(body)
        self.assertEqual(registered["instance_id"], iid)
        self.assertEqual(registered["cluster_name"], "tls-agent")
        status, body = self.request("/agent/v1/heartbeat", iid, {"version": 1, "boot_id": "b1"})
        self.assertEqual(status, 200, body)
        # The URL machines are told is where this endpoint is, with the same certificate.
        self.assertEqual(self.server.agent_url, self.server.agent_endpoint)

    def test_another_pin_is_refused_before_anything_is_sent(self):
        with self.assertRaises(ssl.SSLError):
            self.request("/agent/v1/register", "i-0000000000000000a", {"version": 1},
                         pin="0" * 64)

    def test_plain_http_to_the_tls_port_gets_no_http_answer(self):
        host, port = self.server.agent_endpoint.split("://", 1)[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /agent/v1/register HTTP/1.1\r\nHost: x\r\n"
                      b"Authorization: HyperfleetNode i-1:abc\r\nContent-Length: 2\r\n\r\n{}")
            reply = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        self.assertNotIn(b"HTTP/", reply)

    def test_certificate_and_key_files(self):
        tls_dir = os.path.join(self.server.data_dir, "agent-tls")
        with open(os.path.join(tls_dir, "cert.pem")) as f:
            der = ssl.PEM_cert_to_DER_cert(f.read())
        self.assertEqual(hashlib.sha256(der).hexdigest(), self.server.agent_cert_sha256)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(tls_dir, "key.pem")).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(tls_dir).st_mode), 0o700)
        decoded = ssl._ssl._test_decode_cert(os.path.join(tls_dir, "cert.pem"))
        self.assertIn(("IP Address", "127.0.0.1"), decoded["subjectAltName"])


class AgentTlsRestartAndFlagsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hf-it-agent-tls-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_certificate_survives_a_restart(self):
        server = start_server(self.dir)
        first = server.agent_cert_sha256
        server.stop()
        server = start_server(self.dir)
        try:
            self.assertEqual(server.agent_cert_sha256, first)
            self.assertRegex(first, r"^[0-9a-f]{64}$")
        finally:
            server.stop()

    def test_advertised_address_for_a_wildcard_listener(self):
        server = start_server(self.dir, ("--agent-listen", "0.0.0.0:0",
                                         "--agent-address", "192.0.2.5:8443"))
        try:
            self.assertEqual(server.agent_url, "https://192.0.2.5:8443")
            decoded = ssl._ssl._test_decode_cert(os.path.join(self.dir, "agent-tls", "cert.pem"))
            self.assertIn(("IP Address", "192.0.2.5"), decoded["subjectAltName"])
        finally:
            server.stop()

    def test_an_ipv6_listener(self):
        server = start_server(self.dir, ("--agent-listen", "[::1]:0"))
        try:
            self.assertRegex(server.agent_url, r"^https://\[::1\]:[0-9]+$")
            status, _ = harness.agent_request(
                server.agent_endpoint, server.agent_cert_sha256, "POST", "/agent/v1/register",
                body=b"{}", headers={"Authorization": "HyperfleetNode i-0000000000000000a:00"})
            self.assertEqual(status, 403)  # served over TLS; that node does not exist
        finally:
            server.stop()

    def test_bad_flags_are_refused_with_a_message(self):
        cases = [
            (["--agent-listen", "0.0.0.0:0"], "--agent-address"),
            (["--agent-address", "192.0.2.5"], "--agent-address needs --agent-listen"),
            (["--agent-listen", "127.0.0.1:0", "--agent-address", "192.0.2.5:0"],
             "port from 1 to 65535"),
            (["--agent-listen", "127.0.0.1:0", "--agent-address", "0.0.0.0:9443"],
             "the host machines reach"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                result = subprocess.run(
                    [harness.BINARY, "server", "--provider", "fake", "--listen", "127.0.0.1:0",
                     "--data-dir", self.dir, *args],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.dir, "agent-tls")))


if __name__ == "__main__":
    harness.main()
