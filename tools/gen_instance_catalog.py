#!/usr/bin/env python3
"""Writes data/instance-types.json, the hardware of every HyperPod ClusterInstanceType.

Reads a table instance-types.csv compiled from the sources data/instance-types.SOURCE.md
lists (columns: instance_type, vcpus, memory_gib,
accelerator_kind, accelerator_model, accelerator_count, accelerator_memory_gib,
efa_interfaces, network, nvme_gb, source) and writes one JSON document:

  {"generated_by": "tools/gen_instance_catalog.py",
   "instance_types": [ {"name": "ml.c5.xlarge", "vcpus": 4, "memory_gib": 8, ...}, ... ]}

sorted by name. Per type:
  vcpus                    integer
  memory_gib               number, GiB (EC2's MiB / 1024)
  accelerator_kind         "none" | "nvidia-gpu" | "aws-trainium" | "aws-inferentia"
  accelerator_model        e.g. "H100", "A10G", "Trainium2"; "" when none
  accelerator_count        integer (GPUs or Neuron devices)
  accelerator_memory_gib   number, GiB, all accelerators together; null when unknown
  efa_interfaces           integer, EFA interfaces (0: no EFA); null when unknown
  network                  text as published, e.g. "up to 10 Gbps", "3200 Gbps"
  network_gbps             number, the figure in `network` (the burst ceiling for "up to")
  network_burstable        true when `network` reads "up to ..."
  nvme_gb                  integer, local instance store in GB (0: EBS only); null unknown

Empty cells in the CSV are unknown values (null), never zero. The per-row "source" column is
summarised in data/instance-types.SOURCE.md, not copied into the JSON.

Usage: tools/gen_instance_catalog.py CSV [--out data/instance-types.json]
Python 3 standard library only.
"""

import argparse
import csv
import json
import os
import re
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "data", "instance-types.json")

KINDS = {"none", "nvidia-gpu", "aws-trainium", "aws-inferentia"}
NAME = re.compile(r"ml\.[a-z0-9-]+\.[a-z0-9]+")
# "25 Gbps", "up to 12.5 Gbps", "400 Gbps (4x100)"
NETWORK = re.compile(r"(up to )?([0-9]+(?:\.[0-9]+)?) Gbps(?: \([0-9]+x[0-9]+\))?")


def number(text, field, name, integer=False):
    """A number from a cell; None for an empty cell (unknown)."""
    text = text.strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        sys.exit(f"{name}: {field} is not a number: {text!r}")
    if integer:
        if value != int(value):
            sys.exit(f"{name}: {field} is not an integer: {text!r}")
        return int(value)
    return int(value) if value == int(value) else value


def convert(row):
    name = row["instance_type"].strip()
    if not NAME.fullmatch(name):
        sys.exit(f"bad instance type name {name!r}")
    kind = row["accelerator_kind"].strip()
    if kind not in KINDS:
        sys.exit(f"{name}: unknown accelerator_kind {kind!r}")
    network = row["network"].strip()
    m = NETWORK.fullmatch(network)
    if not m:
        sys.exit(f"{name}: unparsable network {network!r}")
    out = {
        "name": name,
        "vcpus": number(row["vcpus"], "vcpus", name, integer=True),
        "memory_gib": number(row["memory_gib"], "memory_gib", name),
        "accelerator_kind": kind,
        "accelerator_model": row["accelerator_model"].strip(),
        "accelerator_count": number(row["accelerator_count"], "accelerator_count", name,
                                    integer=True),
        "accelerator_memory_gib": number(row["accelerator_memory_gib"],
                                         "accelerator_memory_gib", name),
        "efa_interfaces": number(row["efa_interfaces"], "efa_interfaces", name, integer=True),
        "network": network,
        "network_gbps": number(m.group(2), "network", name),
        "network_burstable": m.group(1) is not None,
        "nvme_gb": number(row["nvme_gb"], "nvme_gb", name, integer=True),
    }
    for required in ("vcpus", "memory_gib", "accelerator_count"):
        if out[required] is None:
            sys.exit(f"{name}: {required} is empty")
    if kind == "none":
        if out["accelerator_count"] != 0 or out["accelerator_model"]:
            sys.exit(f"{name}: accelerator fields set for kind none")
        out["accelerator_memory_gib"] = 0
    elif out["accelerator_count"] <= 0 or not out["accelerator_model"]:
        sys.exit(f"{name}: accelerator kind {kind} without model or count")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="the table (columns above)")
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = [convert(r) for r in csv.DictReader(f)]
    names = [r["name"] for r in rows]
    if len(set(names)) != len(names):
        sys.exit("duplicate instance types in the CSV")
    rows.sort(key=lambda r: r["name"])
    doc = {"generated_by": "tools/gen_instance_catalog.py", "instance_types": rows}
    with open(args.out, "w", encoding="utf-8") as f:
        # One type per line: small diffs when the table changes.
        f.write('{"generated_by": "tools/gen_instance_catalog.py",\n "instance_types": [\n')
        f.write(",\n".join("  " + json.dumps(r) for r in rows))
        f.write("\n]}\n")
    json.loads(open(args.out, encoding="utf-8").read())  # the output must parse
    print(f"wrote {len(rows)} instance types to {args.out}")


if __name__ == "__main__":
    main()
