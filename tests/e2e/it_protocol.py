"""Integration: the wire protocol of the API front door, spoken by hand over http.client.
SigV4 (missing, unknown key, wrong secret, clock skew), the JSON 1.1 envelope (target,
Content-Type, malformed / non-object / oversized / deeply nested bodies, methods), response
headers, and keep-alive. Every rejected mutating request must change nothing."""

import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import resource
import shutil
import socket
import tempfile
import unittest

import botocore.auth
import botocore.awsrequest
import botocore.credentials

import harness

JSON_11 = "application/x-amz-json-1.1"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def sigv4_headers(host, target, body, when=None, key=harness.ACCESS_KEY,
                  secret=harness.SECRET_KEY, content_type=JSON_11, path="/",
                  region=harness.REGION, service="sagemaker"):
    """Headers of a request signed per the SigV4 spec (hmac/hashlib, no SDK), dated `when`
    (UTC; default now), signing content-type, host, x-amz-date and x-amz-target."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    headers = {"Host": host, "X-Amz-Date": amz_date}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if target is not None:
        headers["X-Amz-Target"] = target
    names = sorted(h.lower() for h in headers)
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    canonical = "\n".join(["POST", path, "", *[f"{n}:{lower[n]}" for n in names], "",
                           ";".join(names), hashlib.sha256(body).hexdigest()])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers


class Response:
    def __init__(self, r):
        self.status = r.status
        self.headers = {k.lower(): v for k, v in r.getheaders()}
        self.raw = r.read()
        try:
            self.json = json.loads(self.raw) if self.raw else None
        except ValueError:
            self.json = None

    def __repr__(self):
        return f"<{self.status} {self.raw[:300]!r}>"


class ProtocolTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=100).start()
        cls.host = f"127.0.0.1:{cls.server.port}"
        # One cluster, so that "changes nothing" compares a non-empty list.
        r = cls.send_cls("CreateCluster", json.dumps(harness.cluster_spec("proto-one")).encode())
        assert r.status == 200, r

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    @classmethod
    def send_cls(cls, op, body, conn=None, **sign):
        return cls.raw(body=body, headers=sigv4_headers(
            cls.host, None if op is None else f"SageMaker.{op}", body, **sign), conn=conn)

    @classmethod
    def raw(cls, method="POST", path="/", body=b"", headers=None, conn=None):
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", cls.server.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            return Response(conn.getresponse())
        finally:
            if own:
                conn.close()

    def send(self, op, body=b"{}", **kw):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        return self.send_cls(op, body, **kw)

    def clusters(self):
        r = self.send("ListClusters", {"MaxResults": 100})
        self.assertEqual(r.status, 200, r)
        return sorted((c["ClusterArn"], c["ClusterName"]) for c in r.json["ClusterSummaries"])

    def assertError(self, r, status, code, message=None):
        """An AWS JSON error: status, body {"__type", "message"}, x-amzn-ErrorType, request id."""
        self.assertEqual(r.status, status, r)
        self.assertIsInstance(r.json, dict, r)
        self.assertEqual(r.json.get("__type"), code, r)
        self.assertIsInstance(r.json.get("message"), str, r)
        self.assertTrue(r.json["message"], r)
        self.assertEqual(r.headers.get("x-amzn-errortype"), code)
        self.assertEqual(r.headers.get("content-type"), JSON_11)
        self.assertRegex(r.headers.get("x-amzn-requestid", ""), UUID)
        if message is not None:
            self.assertRegex(r.json["message"], message)
        return r.json["message"]

    def assertRejectedCreate(self, make_request, status, code, message=None):
        """A CreateCluster the server must refuse, leaving the cluster list as it was."""
        before = self.clusters()
        r = make_request(json.dumps(harness.cluster_spec("proto-rejected")).encode())
        self.assertError(r, status, code, message)
        self.assertEqual(self.clusters(), before, "a rejected CreateCluster changed the clusters")
        return r

    # ---- SigV4 ------------------------------------------------------------------------------

    def test_success_headers(self):
        r = self.send("ListClusters")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("content-type"), JSON_11)
        self.assertRegex(r.headers.get("x-amzn-requestid", ""), UUID)
        self.assertNotIn("x-amzn-errortype", r.headers)
        self.assertIn(("proto-one"), [c["ClusterName"] for c in r.json["ClusterSummaries"]])
        again = self.send("ListClusters")
        self.assertNotEqual(again.headers["x-amzn-requestid"], r.headers["x-amzn-requestid"])

    def test_botocore_signed_request_is_accepted(self):
        body = json.dumps({"ClusterName": "proto-one"}).encode()
        req = botocore.awsrequest.AWSRequest(
            method="POST", url=f"{self.server.endpoint}/", data=body,
            headers={"Content-Type": JSON_11, "X-Amz-Target": "SageMaker.DescribeCluster"})
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(
            harness.ACCESS_KEY, harness.SECRET_KEY), "sagemaker", harness.REGION).add_auth(req)
        r = self.raw(body=body, headers=dict(req.headers.items()))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ClusterName"], "proto-one")

    def test_missing_authorization(self):
        def unsigned(body):
            return self.raw(body=body, headers={"Content-Type": JSON_11,
                                                "X-Amz-Target": "SageMaker.CreateCluster"})
        self.assertRejectedCreate(unsigned, 400, "MissingAuthenticationTokenException")

    def test_unknown_access_key(self):
        self.assertRejectedCreate(
            lambda b: self.send("CreateCluster", b, key="AKIANOSUCHKEY0000000"),
            400, "UnrecognizedClientException",
            r"^The security token included in the request is invalid\.$")

    def test_wrong_secret(self):
        self.assertRejectedCreate(
            lambda b: self.send("CreateCluster", b, secret="not-the-secret"),
            400, "InvalidSignatureException", "signature")

    def test_tampered_body(self):
        def tampered(body):
            headers = sigv4_headers(self.host, "SageMaker.CreateCluster", body)
            return self.raw(body=body.replace(b"proto-rejected", b"proto-tampered"),
                            headers=headers)
        self.assertRejectedCreate(tampered, 400, "InvalidSignatureException")

    def test_wrong_scope(self):
        self.assertRejectedCreate(lambda b: self.send("CreateCluster", b, region="eu-west-1"),
                                  400, "InvalidSignatureException", "region")
        self.assertRejectedCreate(lambda b: self.send("CreateCluster", b, service="s3"),
                                  400, "InvalidSignatureException", "service")

    def test_clock_skew(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        minutes = lambda m: now + datetime.timedelta(minutes=m)
        self.assertRejectedCreate(lambda b: self.send("CreateCluster", b, when=minutes(-20)),
                                  400, "InvalidSignatureException", r"^Signature expired")
        self.assertRejectedCreate(lambda b: self.send("CreateCluster", b, when=minutes(20)),
                                  400, "InvalidSignatureException", r"^Signature not yet current")
        for m in (-14, 14):
            with self.subTest(minutes=m):
                r = self.send("DescribeCluster", {"ClusterName": "proto-one"}, when=minutes(m))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json["ClusterName"], "proto-one")

    # ---- JSON 1.1 envelope ------------------------------------------------------------------

    def test_unknown_operation(self):
        msg = self.assertError(self.send("NoSuchOperation"), 400, "UnknownOperationException")
        self.assertIn("NoSuchOperation", msg)
        # An operation of the model that Hyperfleet does not implement.
        msg = self.assertError(self.send("UpdateClusterSoftware", {"ClusterName": "proto-x"}),
                               400, "UnknownOperationException")
        self.assertIn("Hyperfleet does not implement", msg)

    def test_missing_or_foreign_target(self):
        self.assertRejectedCreate(lambda b: self.send(None, b), 400, "UnknownOperationException")
        self.assertRejectedCreate(
            lambda b: self.raw(body=b, headers=sigv4_headers(
                self.host, "AmazonSageMaker.CreateCluster", b)),
            400, "UnknownOperationException")

    def test_wrong_content_type(self):
        for ct in ("application/json", "text/plain", None):
            with self.subTest(content_type=ct):
                self.assertRejectedCreate(lambda b: self.send("CreateCluster", b, content_type=ct),
                                          400, "UnknownOperationException")

    def test_malformed_json(self):
        for body in (b'{"ClusterName": "proto-rejected"', b"{not json}", b"\xff\xfe{}",
                     b'{"ClusterName": "a"} trailing'):
            with self.subTest(body=body):
                before = self.clusters()
                self.assertError(self.send("CreateCluster", body), 400, "SerializationException")
                self.assertEqual(self.clusters(), before)

    def test_non_object_json(self):
        for body in (b"[]", b'"CreateCluster"', b"42", b"null", b"true"):
            with self.subTest(body=body):
                before = self.clusters()
                self.assertError(self.send("CreateCluster", body), 400, "SerializationException")
                self.assertEqual(self.clusters(), before)

    def test_failed_validation_changes_nothing(self):
        def bad_name(body):
            spec = json.loads(body)
            spec["ClusterName"] = "bad_name!"
            return self.send("CreateCluster", spec)
        self.assertRejectedCreate(bad_name, 400, "ValidationException",
                                  "failed to satisfy constraint")
        self.assertRejectedCreate(
            lambda b: self.send("CreateCluster", {"ClusterName": "proto-rejected",
                                                  "NodeRecovery": "Sometimes"}),
            400, "ValidationException", "enum")
        # A member of the wrong JSON type is a SerializationException, as in AWS.
        self.assertRejectedCreate(
            lambda b: self.send("CreateCluster", {"ClusterName": "proto-rejected",
                                                  "NodeRecovery": ["Automatic"]}),
            400, "SerializationException", "nodeRecovery")

    def test_deeply_nested_json(self):
        depth = 10000
        body = (b'{"ClusterName": "proto-rejected", "InstanceGroups": ' + b"[" * depth
                + b"]" * depth + b"}")
        before = self.clusters()
        self.assertError(self.send("CreateCluster", body), 400, "SerializationException")
        self.assertEqual(self.clusters(), before)
        objects = b'{"a":' * depth + b"1" + b"}" * depth
        self.assertError(self.send("CreateCluster", objects), 400, "SerializationException")
        # The server is still there.
        self.assertEqual(self.send("ListClusters").status, 200)

    def test_body_over_8_mib(self):
        spec = harness.cluster_spec("proto-rejected")
        spec["Pad"] = "x" * (8 * 1024 * 1024)
        body = json.dumps(spec).encode()
        before = self.clusters()
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        try:
            try:
                conn.request("POST", "/", body=body,
                             headers=sigv4_headers(self.host, "SageMaker.CreateCluster", body))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer before it has read the whole body
            r = Response(conn.getresponse())
        finally:
            conn.close()
        self.assertEqual(r.status, 413, r)
        self.assertIsInstance(r.json, dict, r)
        self.assertIn("__type", r.json)
        self.assertIn("message", r.json)
        self.assertEqual(self.clusters(), before)

    def test_other_methods(self):
        for method in ("GET", "PUT", "DELETE"):
            with self.subTest(method=method):
                r = self.raw(method=method, headers={"Host": self.host})
                self.assertGreaterEqual(r.status, 400, r)
                self.assertLess(r.status, 500, r)
                self.assertIsInstance(r.json, dict, r)
                self.assertTrue(r.json.get("__type"), r)
                self.assertTrue(r.json.get("message"), r)
                self.assertEqual(r.headers.get("x-amzn-errortype"), r.json["__type"])

    def test_any_path_is_served(self):
        # botocore keeps an endpoint's path (/sm); the JS SDK adds a slash (/sm/).
        for path in ("/sm", "/sm/"):
            with self.subTest(path=path):
                body = b"{}"
                r = self.raw(path=path, body=body, headers=sigv4_headers(
                    self.host, "SageMaker.ListClusters", body, path=path))
                self.assertEqual(r.status, 200, r)

    # ---- connections ------------------------------------------------------------------------

    def test_keep_alive(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            conn.connect()
            first = conn.sock
            ids = set()
            for i in range(50):
                body = json.dumps({"ClusterName": "proto-one"} if i % 2 else {}).encode()
                op = "DescribeCluster" if i % 2 else "ListClusters"
                r = self.send_cls(op, body, conn=conn)
                self.assertEqual(r.status, 200, (i, r))
                self.assertIs(conn.sock, first, f"the connection was closed after request {i}")
                ids.add(r.headers["x-amzn-requestid"])
            self.assertEqual(len(ids), 50)
            # An error answer does not close the connection either.
            r = self.send_cls("DescribeCluster", b'{"ClusterName": "nope"}', conn=conn)
            self.assertError(r, 400, "ResourceNotFound")
            self.assertIs(conn.sock, first)
            self.assertEqual(self.send_cls("ListClusters", b"{}", conn=conn).status, 200)
        finally:
            conn.close()

    def test_unknown_members_are_ignored_and_never_stored(self):
        spec = harness.cluster_spec("proto-junk")
        spec["Junk"] = "x" * 1000
        spec["InstanceGroups"][0]["LifeCycleConfig"]["Junk"] = "y" * 1000
        spec["InstanceGroups"][0]["Extra"] = {"deep": [1, 2, 3]}
        r = self.send("CreateCluster", spec)
        self.assertEqual(r.status, 200, r)
        d = self.send("DescribeCluster", {"ClusterName": "proto-junk"})
        self.assertEqual(d.status, 200, d)
        self.assertNotIn("Junk", json.dumps(d.json))
        self.assertNotIn("Extra", json.dumps(d.json))
        self.assertEqual(d.json["InstanceGroups"][0]["LifeCycleConfig"]["OnCreate"], "on_create.sh")

    def test_a_bare_cluster_id_is_not_a_cluster_name(self):
        arn = self.send("DescribeCluster", {"ClusterName": "proto-one"}).json["ClusterArn"]
        cluster_id = arn.rsplit("/", 1)[1]
        # A cluster may be named like another cluster's id; names and ARNs never mix up.
        r = self.send("CreateCluster", harness.cluster_spec(cluster_id))
        self.assertEqual(r.status, 200, r)
        by_name = self.send("DescribeCluster", {"ClusterName": cluster_id})
        self.assertEqual(by_name.json["ClusterName"], cluster_id)
        self.assertNotEqual(by_name.json["ClusterArn"], arn)
        self.assertEqual(self.send("DescribeCluster", {"ClusterName": arn}).json["ClusterName"],
                         "proto-one")

    def test_far_future_time_filters(self):
        r = self.send("ListClusters", {"CreationTimeAfter": 1e300})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["ClusterSummaries"], [])
        r = self.send("ListClusters", {"CreationTimeBefore": 1e300, "MaxResults": 100})
        self.assertEqual(len(r.json["ClusterSummaries"]), len(self.clusters()))

    def test_a_second_server_on_the_same_data_dir_is_refused(self):
        second = harness.Server(data_dir=self.server.data_dir)
        with self.assertRaises(AssertionError):
            second.start()
        with open(os.path.join(self.server.data_dir, "server.log")) as f:
            self.assertIn("another hyperfleet server", f.read())
        # The first one still serves.
        self.assertEqual(self.send("ListClusters", {}).status, 200)

    def test_the_server_raises_its_open_file_limit(self):
        # systemd's soft limit is 1024; connections, node consoles and /proc reads must not
        # starve at it. The server raises its soft limit to the hard one.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard <= 256:
            self.skipTest(f"the hard limit ({hard}) leaves nothing to raise")
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # what the child inherits
        try:
            server = harness.Server()
            server.start()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        try:
            with open(f"/proc/{server.proc.pid}/limits") as f:
                line = next(l for l in f if l.startswith("Max open files"))
            self.assertEqual(line.split()[3:5], [str(hard), str(hard)], line)
        finally:
            server.cleanup()

    def test_the_data_dir_is_made_owner_only(self):
        # The node image cache (or an admin) may have made the directory 0755 first.
        data_dir = tempfile.mkdtemp(prefix="hf-it-mode-")
        os.chmod(data_dir, 0o755)
        server = harness.Server(data_dir=data_dir)
        try:
            server.start()
            self.assertEqual(os.stat(data_dir).st_mode & 0o777, 0o700)
            for name in ("state.db", "credentials"):
                mode = os.stat(os.path.join(data_dir, name)).st_mode & 0o777
                self.assertEqual(mode & 0o077, 0, f"{name} is {oct(mode)}")
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)

    def test_garbage_on_the_socket(self):
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=30) as s:
            s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        self.assertRegex(data, rb"^HTTP/1\.[01] 4\d\d ")
        self.assertEqual(self.send("ListClusters").status, 200)


if __name__ == "__main__":
    harness.main()
