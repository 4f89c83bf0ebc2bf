"""End-to-end test of the CloudWatch Logs subset: events are put into <data-dir>/logs.db with
the store's schema (a writer beside the server, as the agent endpoint is), then read back with
the aws CLI (describe-log-groups, get-log-events, filter-log-events; `aws logs tail`, also
--follow, when an aws CLI v2 is installed: v1 has no tail) and with `hyperfleet logs tail`."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GROUP = "/aws/sagemaker/Clusters/demo/abc123def456"
STREAM = "LifecycleConfig/controller/i-0123456789abcdef0"
# The --follow tests append to their own group, so that the exact counts above hold in any order.
FOLLOW_GROUP = "/aws/sagemaker/Clusters/follow/fff123fff456"
SCHEMA = """
CREATE TABLE IF NOT EXISTS log_groups(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, creation_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS log_streams(
  id INTEGER PRIMARY KEY, group_id INTEGER NOT NULL, name TEXT NOT NULL,
  creation_ms INTEGER NOT NULL, first_event_ms INTEGER, last_event_ms INTEGER,
  last_ingestion_ms INTEGER, stored_bytes INTEGER NOT NULL DEFAULT 0,
  event_count INTEGER NOT NULL DEFAULT 0, UNIQUE(group_id, name));
CREATE TABLE IF NOT EXISTS log_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL, ts INTEGER NOT NULL,
  ingestion_ms INTEGER NOT NULL, message TEXT NOT NULL);
"""


def append(db_path, group, stream, events):
    """What LogStore::append does, in Python (same schema as src/logs/log_store.cc)."""
    now = int(time.time() * 1000)
    db = sqlite3.connect(db_path, timeout=10)
    try:
        db.executescript(SCHEMA)
        db.execute("PRAGMA journal_mode=WAL")
        with db:
            db.execute("INSERT INTO log_groups(name, creation_ms) VALUES(?, ?) "
                       "ON CONFLICT(name) DO NOTHING", (group, now))
            gid = db.execute("SELECT id FROM log_groups WHERE name=?", (group,)).fetchone()[0]
            db.execute("INSERT INTO log_streams(group_id, name, creation_ms) VALUES(?, ?, ?) "
                       "ON CONFLICT(group_id, name) DO NOTHING", (gid, stream, now))
            sid = db.execute("SELECT id FROM log_streams WHERE group_id=? AND name=?",
                             (gid, stream)).fetchone()[0]
            for ts, msg in events:
                db.execute("INSERT INTO log_events(stream_id, ts, ingestion_ms, message) "
                           "VALUES(?, ?, ?, ?)", (sid, ts, now, msg))
            tss = [ts for ts, _ in events]
            db.execute("UPDATE log_streams SET first_event_ms=MIN(COALESCE(first_event_ms, ?), ?),"
                       " last_event_ms=MAX(COALESCE(last_event_ms, ?), ?), last_ingestion_ms=?,"
                       " stored_bytes=stored_bytes+?, event_count=event_count+? WHERE id=?",
                       (min(tss), min(tss), max(tss), max(tss), now,
                        sum(len(m.encode()) for _, m in events), len(events), sid))
    finally:
        db.close()


def aws_v2():
    """An aws CLI that has `logs tail` (v2), or None."""
    for candidate in [shutil.which("aws"), "/usr/bin/aws", "/usr/local/bin/aws"]:
        if candidate and os.path.exists(candidate):
            r = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            if (r.stdout + r.stderr).startswith("aws-cli/2"):
                return candidate
    return None


class LogsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(provider="fake")
        cls.db = os.path.join(cls.server.data_dir, "logs.db")
        now = int(time.time() * 1000)
        cls.t0 = now - 60_000
        append(cls.db, GROUP, STREAM, [(cls.t0, "[hyperfleet] OnCreate started"),
                                       (cls.t0 + 1000, "installing packages"),
                                       (cls.t0 + 2000, "ERROR: something failed")])
        append(cls.db, GROUP, "LifecycleConfig/worker/i-0fedcba9876543210",
               [(cls.t0 + 1500, "worker says hello")])
        append(cls.db, FOLLOW_GROUP, STREAM, [(cls.t0, "first line to follow")])
        cls.server.start()
        cls.env = harness.aws_env(cls.server.endpoint)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def aws(self, *args, binary="aws"):
        r = subprocess.run([binary, "logs", *args, "--endpoint-url", self.server.endpoint,
                            "--output", "json"], capture_output=True, text=True, timeout=60,
                           env=self.env)
        return r

    def hyperfleet(self, *args, timeout=60):
        return subprocess.run([harness.BINARY, "logs", *args, "--endpoint-url",
                               self.server.endpoint], capture_output=True, text=True,
                              timeout=timeout, env=self.env)

    def test_describe_log_groups(self):
        r = self.aws("describe-log-groups", "--log-group-name-prefix", "/aws/sagemaker/Clusters/demo")
        self.assertEqual(r.returncode, 0, r.stderr)
        groups = json.loads(r.stdout)["logGroups"]
        self.assertEqual([g["logGroupName"] for g in groups], [GROUP])
        self.assertTrue(groups[0]["arn"].startswith("arn:aws:logs:us-west-2:"))

    def test_get_log_events_and_errors(self):
        r = self.aws("get-log-events", "--log-group-name", GROUP, "--log-stream-name", STREAM,
                     "--start-from-head")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual([e["message"] for e in out["events"]],
                         ["[hyperfleet] OnCreate started", "installing packages",
                          "ERROR: something failed"])
        again = self.aws("get-log-events", "--log-group-name", GROUP, "--log-stream-name",
                         STREAM, "--next-token", out["nextForwardToken"])
        self.assertEqual(json.loads(again.stdout)["nextForwardToken"], out["nextForwardToken"])
        r = self.aws("get-log-events", "--log-group-name", "/nope", "--log-stream-name", "x")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ResourceNotFoundException", r.stderr)
        self.assertIn("The specified log group does not exist.", r.stderr)
        r = self.aws("get-log-events", "--log-group-name", GROUP, "--log-stream-name", "x")
        self.assertIn("The specified log stream does not exist.", r.stderr)
        r = self.aws("get-log-events", "--log-group-name", GROUP, "--log-stream-name", STREAM,
                     "--next-token", "garbage")
        self.assertIn("InvalidParameterException", r.stderr)
        self.assertIn("The specified nextToken is invalid.", r.stderr)

    def test_filter_log_events(self):
        r = self.aws("filter-log-events", "--log-group-name", GROUP, "--filter-pattern", "ERROR")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json.loads(r.stdout)["events"]
        self.assertEqual([e["message"] for e in events], ["ERROR: something failed"])
        r = self.aws("filter-log-events", "--log-group-name", GROUP,
                     "--log-stream-name-prefix", "LifecycleConfig/")
        messages = [e["message"] for e in json.loads(r.stdout)["events"]]
        self.assertEqual(messages[2], "worker says hello")  # interleaved by time
        self.assertEqual(len(messages), 4)

    def test_hyperfleet_logs_tail_and_streams(self):
        r = self.hyperfleet("tail", GROUP, "--since", "1h", "--format", "short")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[0].endswith(" [hyperfleet] OnCreate started"), lines)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.t0 / 1000))
        self.assertEqual(lines[0], f"{stamp} [hyperfleet] OnCreate started")
        r = self.hyperfleet("tail", GROUP, "--since", "1h")
        self.assertIn(f" {STREAM} installing packages", r.stdout)
        r = self.hyperfleet("streams", GROUP)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(STREAM, r.stdout)
        r = self.hyperfleet("tail", "/nope")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("An error occurred (ResourceNotFoundException) when calling the "
                      "FilterLogEvents operation: The specified log group does not exist.",
                      r.stderr)
        # Without credentials in the environment, the data dir's credentials file is used.
        env = dict(self.env)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.pop(k)
        r = subprocess.run([harness.BINARY, "logs", "streams", GROUP, "--endpoint-url",
                            self.server.endpoint, "--data-dir", self.server.data_dir],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def follow(self, argv, marker):
        """Runs a tail --follow, appends `marker` while it runs and waits until it printed it."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)
        try:
            first = proc.stdout.readline()  # it has printed the existing events
            self.assertTrue(first, proc.stderr.read() if proc.poll() is not None else "")
            append(self.db, FOLLOW_GROUP, STREAM, [(int(time.time() * 1000), marker)])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                if marker in line:
                    return line
            self.fail(f"{argv[0]} --follow did not print {marker!r}")
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def test_hyperfleet_logs_tail_follow(self):
        line = self.follow([harness.BINARY, "logs", "tail", FOLLOW_GROUP, "--since", "1h",
                            "--follow",
                            "--endpoint-url", self.server.endpoint], "followed by hyperfleet")
        self.assertIn(STREAM, line)

    def test_aws_logs_tail(self):
        binary = aws_v2()
        if not binary:
            self.skipTest("no aws CLI v2 (v1 has no `logs tail`)")
        r = subprocess.run([binary, "logs", "tail", GROUP, "--since", "1h", "--format", "short",
                            "--endpoint-url", self.server.endpoint], capture_output=True,
                           text=True, timeout=60, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        mine = self.hyperfleet("tail", GROUP, "--since", "1h", "--format", "short")
        self.assertEqual(r.stdout, mine.stdout)
        line = self.follow([binary, "logs", "tail", FOLLOW_GROUP, "--since", "1h", "--follow",
                            "--endpoint-url", self.server.endpoint], "followed by aws")
        self.assertIn(STREAM, line)


if __name__ == "__main__":
    harness.main()
