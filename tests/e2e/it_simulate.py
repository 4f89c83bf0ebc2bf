"""Integration: `hyperfleet simulate` as a real process (docs/simulator.md). The terminal
table with its assumptions, the JSON on stdout (keys, intervals, reproducible from a seed),
the SVG charts written to a file, and bad flags refused with exit 2 and the flag named. Short
horizons and few replications keep it to seconds."""

import json
import os
import stat
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

import harness

SVG = "{http://www.w3.org/2000/svg}"
QUICK = ["--days", "7", "--replications", "3"]


def simulate(*args, cwd=None):
    """Runs `hyperfleet simulate ARGS` in a C-free environment (a decimal-comma locale asked
    for, an empty PATH) and returns the completed process."""
    env = {"LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8", "PATH": ""}
    return subprocess.run([os.path.abspath(harness.BINARY), "simulate", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or tempfile.gettempdir(), timeout=300)


class SimulateTest(unittest.TestCase):
    def run_ok(self, *args):
        p = simulate(*args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def run_json(self, *args):
        return json.loads(self.run_ok("--json", *args).stdout)

    def test_table_lists_each_strategy_with_its_assumptions(self):
        out = self.run_ok("--strategy", "B1,HF0,HF", *QUICK).stdout
        self.assertIn("ETTR", out)
        self.assertIn("B1 HyperPod classic", out)
        self.assertIn("HF0 Hyperfleet today", out)
        self.assertIn("HF Hyperfleet planned", out)
        self.assertIn("NCCL's 10-min watchdog", out)  # what happens today without Hyperfleet
        for head in ("hang-over", "q-healthy", "lemons", "bad-ret"):  # the JSON's names, in short
            self.assertIn(head, out)
        self.assertNotIn("A0 manual ops", out)
        self.assertIn("Model (FGUF-1", out)
        for topic in ("cause mix:", "lemons: 2 % of nodes", "fail-slow:", "repair pipeline:"):
            self.assertIn(topic, out)
        self.assertIn("hang detection not done", out)  # Hyperfleet's assumed values named

    def test_json_has_every_configuration_with_intervals(self):
        doc = self.run_json("--strategy", "all", "--spares", "0,16", "--rate", "3.8,6.5", *QUICK)
        self.assertEqual(doc["engine"], "parametric")
        for key in ("parameters", "results", "assumptions"):
            self.assertIn(key, doc)
        params = doc["parameters"]
        self.assertEqual(params["spares"], [0, 16])
        self.assertEqual(params["rates_per_1000_node_days"], [3.8, 6.5])
        self.assertEqual(params["replications"], 3)
        self.assertEqual(params["cause_mix"], "llama3")
        ids = {r["strategy"] for r in doc["results"]}
        self.assertEqual(ids, {"A0", "A0t", "A1", "B1", "B1b", "B2", "C", "HF0", "HF"})
        self.assertEqual(len(doc["results"]), 9 * 2 * 2)
        for r in doc["results"]:
            e = r["ettr"]
            self.assertLessEqual(e["lo"], e["mean"])
            self.assertLessEqual(e["mean"], e["hi"])
            self.assertTrue(0 <= e["mean"] <= 1, r)
            self.assertEqual(r["replications"], 3)
            for key in ("fleet_goodput", "loss_pct", "mttr_mean_min", "spare_exhaustions",
                        "hang_overevicted", "healthy_quarantined", "lemons_quarantined"):
                self.assertIn(key, r)

    def test_same_seed_same_numbers(self):
        a = self.run_json("--strategy", "B1", "--seed", "7", *QUICK)["results"]
        b = self.run_json("--strategy", "B1", "--seed", "7", *QUICK)["results"]
        c = self.run_json("--strategy", "B1", "--seed", "8", *QUICK)["results"]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_switches_change_the_model(self):
        doc = self.run_json("--strategy", "HF", "--no-lemons", "--no-fail-slow", "--hard-mix",
                            *QUICK)
        p = doc["parameters"]
        self.assertEqual(p["lemons"]["share"], 0)
        self.assertEqual(p["fail_slow"]["per_day"], 0)
        self.assertEqual(p["slow_nodes"]["share"], 0)
        self.assertEqual(p["cause_mix"], "hard")
        text = "\n".join(doc["assumptions"])
        self.assertIn("lemons: none (--no-lemons)", text)
        self.assertIn("fail-slow: none (--no-fail-slow)", text)

    def test_svg_charts_are_written(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ettr.svg")
            out = self.run_ok("--strategy", "B1,B2,HF", "--svg", path, *QUICK).stdout
            self.assertIn("Charts written to " + path, out)
            root = ET.parse(path).getroot()
            self.assertEqual(root.tag, SVG + "svg")
            charts = [g for g in root.iter(SVG + "g") if g.get("class") == "chart"]
            self.assertEqual(len(charts), 2)
            texts = [t.text for t in root.iter(SVG + "text")]
            self.assertIn("ETTR against hot spares", texts)
            self.assertIn("ETTR against failure rate", texts)
            for chart in charts:
                series = [g for g in chart.iter(SVG + "g") if g.get("class") == "series"]
                self.assertEqual([g.get("data-name") for g in series],
                                 ["B1 HyperPod classic", "B2 HyperPod checkpointless",
                                  "HF Hyperfleet planned"])
                for g in series:  # the default sweeps: 6 spare counts, 5 failure rates
                    points = g.find(SVG + "polyline").get("points").split()
                    self.assertIn(len(points), (5, 6))
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)

    def test_bad_flags_are_refused_with_exit_2_naming_the_flag(self):
        cases = [
            (["--nodes", "0"], "--nodes"),
            (["--nodes", "many"], "--nodes"),
            (["--nodes"], "--nodes"),
            (["--rate", "abc"], "--rate"),
            (["--rate", "-1"], "--rate"),
            (["--spares", "4,x"], "--spares"),
            (["--spares", "-2"], "--spares"),
            (["--strategy", "ZZ"], "--strategy"),
            (["--engine", "quantum"], "--engine"),
            (["--fleet", "100"], "--fleet"),
            (["--days", "0"], "--days"),
            (["--days", "1e-300"], "--days"),  # ran, and said ETTR 0
            (["--replications", "0"], "--replications"),
            (["--bogus"], "--bogus"),
            (["--nodes", "0x10"], "--nodes"),  # numbers are decimal (CLI11 took 0x10 as 16)
            (["--seed", "-1"], "--seed"),  # was taken as 2^64 - 1
            (["--replications", "0x3"], "--replications"),
            (["--nodes", "99999999999"], "--nodes"),
            (["--svg", "/nonexistent-dir/x.svg", "--strategy", "HF", *QUICK], "--svg"),
        ]
        for args, flag in cases:
            with self.subTest(args=args):
                p = simulate(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertTrue(p.stderr.startswith("hyperfleet simulate: "), p.stderr)
                self.assertIn(flag, p.stderr)
                self.assertEqual(p.stdout, "")

    def test_outputs_that_cannot_be_written_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            fifo = os.path.join(tmp, "pipe")
            os.mkfifo(fifo)  # the atomic write used to rename over it (as over /dev/null as root)
            for target, says in ((fifo, "not a regular file"), (tmp, "not a regular file"),
                                 ("", "needs a file name"),
                                 (os.path.join(tmp, "no", "x.svg"), "not a directory")):
                with self.subTest(svg=target):
                    p = simulate("--svg", target, "--strategy", "HF", *QUICK)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn("--svg", p.stderr)
                    self.assertIn(says, p.stderr)
            self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        with open("/dev/full", "w") as full:  # a full disk is not results written
            p = subprocess.run([os.path.abspath(harness.BINARY), "simulate", "--json", "--strategy",
                                "HF", *QUICK], stdout=full, stderr=subprocess.PIPE, text=True,
                               env={"PATH": ""}, timeout=300)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("cannot write the results", p.stderr)

    def test_headline_counts_in_words(self):
        out = self.run_ok("--strategy", "HF", "--nodes", "8", "--days", "1", "--replications",
                          "1").stdout
        self.assertIn("1 replication of 1 day per configuration", out)

    def test_numbers_are_decimal(self):
        doc = self.run_json("--strategy", "HF", "--nodes", "010", *QUICK)  # not octal 8
        self.assertEqual(doc["parameters"]["job_nodes"], [10])

    def test_a_value_given_twice_is_one_configuration(self):
        doc = self.run_json("--strategy", "HF", "--spares", "4,4", "--rate", "3.8,3.80", *QUICK)
        self.assertEqual(doc["parameters"]["spares"], [4])
        self.assertEqual(doc["parameters"]["rates_per_1000_node_days"], [3.8])
        self.assertEqual(len(doc["results"]), 1)

    def test_a_long_run_says_how_far_it_is(self):
        # 2-3 s a replication here (100,000 nodes for 10 years): the first line comes after 5 s.
        p = self.run_ok("--json", "--strategy", "HF", "--nodes", "100000", "--days", "3650",
                        "--replications", "5")
        self.assertRegex(p.stderr, r"replication [1-4] of 5 after \d+ s, about \d+ s left")
        quick = self.run_ok("--strategy", "HF", *QUICK)  # a short run stays quiet
        self.assertEqual(quick.stderr, "")

    def test_product_progress_counts_every_strategy(self):
        p = self.run_ok("--json", "--engine", "product", "--strategy", "HF0,HF", "--nodes", "16",
                        "--spares", "2", "--days", "1", "--replications", "1")
        self.assertIn("replication 2 of 2 ", p.stderr)
        self.assertNotIn("of 1 ", p.stderr)

    def test_product_json_is_json_at_a_high_failure_rate(self):
        # The controller warns that most nodes are silent; that went to stdout, into the JSON.
        doc = self.run_json("--engine", "product", "--nodes", "16", "--rate", "1000", "--days",
                            "2", "--replications", "1")
        self.assertEqual(doc["results"][0]["rate_per_1000_node_days"], 1000)

    def test_product_engine_refuses_what_would_run_for_hours(self):
        p = simulate("--engine", "product", "--nodes", "20000", "--days", "1", "--replications", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--nodes", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_product_engine_runs_hyperfleets_strategies_only(self):
        doc = self.run_json("--engine", "product", "--nodes", "16", "--spares", "2", "--days",
                            "1", "--replications", "2")
        self.assertEqual(doc["engine"], "product")
        self.assertEqual([r["strategy"] for r in doc["results"]], ["HF"])
        both = self.run_json("--engine", "product", "--strategy", "HF0,HF", "--nodes", "16",
                             "--spares", "2", "--days", "1", "--replications", "1")
        self.assertEqual([r["strategy"] for r in both["results"]], ["HF0", "HF"])
        r = doc["results"][0]
        self.assertEqual((r["job_nodes"], r["spares"], r["replications"]), (16, 2, 2))
        self.assertTrue(0 < r["ettr"]["mean"] <= 1, r["ettr"])
        p = simulate("--engine", "product", "--strategy", "B1,HF", *QUICK)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--strategy B1", p.stderr)

    def test_help(self):
        p = self.run_ok("--help")
        for flag in ("--engine", "--strategy", "--spares", "--rate", "--grid", "--svg"):
            self.assertIn(flag, p.stdout)


if __name__ == "__main__":
    harness.main()
