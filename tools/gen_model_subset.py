#!/usr/bin/env python3
"""Writes the SageMaker service-model subset that Hyperfleet serves.

Reads botocore's sagemaker/2017-07-24/{service-2,paginators-1}.json and writes, under
data/aws-models/ of this repository:

  sagemaker/2017-07-24/service-2.json    the HyperPod operations and every shape they reach
  sagemaker/2017-07-24/paginators-1.json paginators of those operations only
  SOURCE.md                              where the data came from, and its license

The result is still a valid botocore model (same "version", full "metadata"), so the
directory works as AWS_DATA_PATH for botocore and the aws CLI. Documentation strings are
dropped to keep the embedded copy small; every other key is kept, in the source's order.

With --logs [BOTOCORE_DATA_DIR] it writes the CloudWatch Logs subset instead:

  logs/2014-03-28/service-2.json         the four read operations that Hyperfleet serves
  logs/2014-03-28/paginators-1.json      their paginators
  logs/SOURCE.md                         where the data came from, and its license

With --eks [BOTOCORE_DATA_DIR] it writes the EKS subset:

  eks/2017-11-01/service-2.json          the cluster, tag and access-entry operations
  eks/2017-11-01/paginators-1.json       their paginators
  eks/2017-11-01/waiters-2.json          their waiters (`aws eks wait cluster-active`)
  eks/SOURCE.md                          where the data came from, and its license

BOTOCORE_DATA_DIR defaults to the data directory of the installed botocore.

Usage: tools/gen_model_subset.py [SOURCE_DIR] [--out DATA_DIR]
       tools/gen_model_subset.py --logs [BOTOCORE_DATA_DIR] [--out DATA_DIR]
       tools/gen_model_subset.py --eks [BOTOCORE_DATA_DIR] [--out DATA_DIR]
  SOURCE_DIR defaults to sagemaker/2017-07-24 in the installed botocore's data directory.
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

OPERATIONS = [
    "CreateCluster", "DescribeCluster", "ListClusters", "UpdateCluster", "DeleteCluster",
    "UpdateClusterSoftware", "ListClusterNodes", "DescribeClusterNode",
    "BatchAddClusterNodes", "BatchDeleteClusterNodes", "BatchRebootClusterNodes",
    "BatchReplaceClusterNodes", "StartClusterHealthCheck", "AttachClusterNodeVolume",
    "DetachClusterNodeVolume", "ListClusterEvents", "DescribeClusterEvent",
    "CreateClusterSchedulerConfig", "DescribeClusterSchedulerConfig",
    "UpdateClusterSchedulerConfig", "DeleteClusterSchedulerConfig",
    "ListClusterSchedulerConfigs", "CreateComputeQuota", "DescribeComputeQuota",
    "UpdateComputeQuota", "DeleteComputeQuota", "ListComputeQuotas",
    "AddTags", "ListTags", "DeleteTags",
]

LOGS_OPERATIONS = ["DescribeLogGroups", "DescribeLogStreams", "GetLogEvents", "FilterLogEvents"]

EKS_OPERATIONS = [
    "CreateCluster", "DescribeCluster", "ListClusters", "DeleteCluster",
    "TagResource", "UntagResource", "ListTagsForResource",
    "CreateAccessEntry", "DescribeAccessEntry", "ListAccessEntries", "DeleteAccessEntry",
    "AssociateAccessPolicy", "DisassociateAccessPolicy", "ListAssociatedAccessPolicies",
    "ListAccessPolicies",
]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "data", "aws-models")


def without_docs(obj):
    """A copy of a model node without its "documentation" key (one level only)."""
    return {k: v for k, v in obj.items() if k != "documentation"}


def strip_ref(ref):
    """A shape reference ({"shape": ..., ...}) without documentation."""
    return without_docs(ref)


def strip_shape(shape):
    # Structure-aware so that a member that happens to be named "documentation" survives.
    out = {}
    for key, value in shape.items():
        if key == "documentation":
            continue
        if key == "members":
            value = {name: strip_ref(ref) for name, ref in value.items()}
        elif key in ("member", "key", "value"):
            value = strip_ref(value)
        out[key] = value
    return out


def strip_operation(op):
    out = {}
    for key, value in op.items():
        if key in ("documentation", "documentationUrl"):
            continue
        if key in ("input", "output"):
            value = strip_ref(value)
        elif key == "errors":
            value = [strip_ref(ref) for ref in value]
        out[key] = value
    return out


def reachable_shapes(model, operations):
    """Names of every shape reachable from the operations' inputs, outputs and errors."""
    shapes = model["shapes"]
    seen = set()
    stack = []
    for name in operations:
        op = model["operations"][name]
        for key in ("input", "output"):
            if key in op:
                stack.append(op[key]["shape"])
        stack.extend(ref["shape"] for ref in op.get("errors", []))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        if name not in shapes:
            raise SystemExit(f"shape {name!r} is referenced but not defined")
        seen.add(name)
        shape = shapes[name]
        stack.extend(ref["shape"] for ref in shape.get("members", {}).values())
        for key in ("member", "key", "value"):
            if key in shape:
                stack.append(shape[key]["shape"])
    return seen


def subset(model, operations):
    missing = [name for name in operations if name not in model["operations"]]
    if missing:
        raise SystemExit(f"operations missing from the source model: {', '.join(missing)}")
    keep_ops = set(operations)
    keep_shapes = reachable_shapes(model, operations)
    out = {}
    for key, value in model.items():
        if key == "documentation":
            continue
        if key == "operations":
            value = {n: strip_operation(op) for n, op in value.items() if n in keep_ops}
        elif key == "shapes":
            value = {n: strip_shape(s) for n, s in value.items() if n in keep_shapes}
        out[key] = value
    return out


def waiter_subset(waiters, operations):
    """The waiters whose operation is kept."""
    keep = set(operations)
    out = {}
    for key, value in waiters.items():
        if key == "waiters":
            value = {n: w for n, w in value.items() if w.get("operation") in keep}
        out[key] = value
    return out


def paginator_subset(paginators, operations):
    keep = set(operations)
    out = {}
    for key, value in paginators.items():
        if key == "pagination":
            value = {n: p for n, p in value.items() if n in keep}
        out[key] = value
    return out


def dump(obj, path):
    text = json.dumps(obj, indent=1, separators=(",", ":"), ensure_ascii=False) + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return len(text.encode("utf-8"))


def source_note(source_dir):
    """The upstream line of SOURCE.txt (botocore commit), or a fallback."""
    path = os.path.join(source_dir, "SOURCE.txt")
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError:
        return ["(SOURCE.txt not found beside the source model)"]
    return [line for line in lines if line.strip()]


def write_source_md(out_dir, source_dir, model, n_shapes, n_paginators):
    notes = source_note(source_dir)
    commit = ""
    for line in notes:
        m = re.search(r"\b([0-9a-f]{40})\b", line)
        if m:
            commit = m.group(1)
            break
    lines = [
        "# AWS service model data",
        "",
        "Generated by `tools/gen_model_subset.py`; do not edit. Re-run the generator to refresh.",
        "",
        "## Source",
        "",
        "botocore (github.com/boto/botocore), `botocore/data/sagemaker/2017-07-24/`"
        + (f", commit `{commit}`." if commit else "."),
        "",
        "Upstream SOURCE.txt:",
        "",
    ]
    lines += ["> " + line for line in notes]
    lines += [
        "",
        "## License",
        "",
        "The model files are from botocore and are licensed under the Apache License, Version 2.0",
        "(https://www.apache.org/licenses/LICENSE-2.0). Changes made here: only the operations",
        "listed below and the shapes they reach are kept, and `documentation` strings are removed.",
        "",
        "## Contents",
        "",
        f"- `sagemaker/2017-07-24/service-2.json`: {len(model['operations'])} operations, "
        f"{n_shapes} shapes (apiVersion {model['metadata'].get('apiVersion')}).",
        f"- `sagemaker/2017-07-24/paginators-1.json`: {n_paginators} paginators.",
        "",
        "This directory works as `AWS_DATA_PATH` for botocore / aws-cli, which then know exactly",
        "these operations of `sagemaker`.",
        "",
        "Operations: " + ", ".join(sorted(model["operations"])) + ".",
        "",
    ]
    with open(os.path.join(out_dir, "SOURCE.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))


def botocore_data_dir():
    import botocore  # only the --logs and --eks modes need it
    return os.path.join(os.path.dirname(botocore.__file__), "data")


def load_json_maybe_gz(path):
    """Loads `path`, or `path`.gz as recent botocore releases ship their models."""
    import gzip
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    with gzip.open(path + ".gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def write_service(data_dir, out_dir, service, operations, title, flag):
    """Writes the subset of botocore service `service` (its newest API version) keeping
    `operations`, with its paginators and, when botocore has them, its waiters."""
    import botocore
    versions = sorted(os.listdir(os.path.join(data_dir, service)))
    source = os.path.join(data_dir, service, versions[-1])
    model = load_json_maybe_gz(os.path.join(source, "service-2.json"))
    paginators = load_json_maybe_gz(os.path.join(source, "paginators-1.json"))
    small = subset(model, operations)
    pages = paginator_subset(paginators, operations)
    api_version = model["metadata"]["apiVersion"]
    model_dir = os.path.join(out_dir, service, api_version)
    size = dump(small, os.path.join(model_dir, "service-2.json"))
    dump(pages, os.path.join(model_dir, "paginators-1.json"))
    waiters = None
    waiters_path = os.path.join(source, "waiters-2.json")
    if os.path.exists(waiters_path) or os.path.exists(waiters_path + ".gz"):
        waiters = waiter_subset(load_json_maybe_gz(waiters_path), operations)
        dump(waiters, os.path.join(model_dir, "waiters-2.json"))
    contents = [
        f"- `{service}/{api_version}/service-2.json`: {len(small['operations'])} operations, "
        f"{len(small['shapes'])} shapes (apiVersion {api_version}).",
        f"- `{service}/{api_version}/paginators-1.json`: "
        f"{len(pages.get('pagination', {}))} paginators.",
    ]
    if waiters is not None:
        contents.append(f"- `{service}/{api_version}/waiters-2.json`: "
                        f"{len(waiters.get('waiters', {}))} waiters "
                        f"({', '.join(sorted(waiters.get('waiters', {})))}).")
    lines = [
        f"# {title} service model data",
        "",
        f"Generated by `tools/gen_model_subset.py {flag}`; do not edit. Re-run the generator to "
        "refresh.",
        "",
        "## Source",
        "",
        f"botocore {botocore.__version__} (github.com/boto/botocore, PyPI package `botocore`), "
        f"`botocore/data/{service}/{api_version}/`.",
        "",
        "## License",
        "",
        "The model files are from botocore and are licensed under the Apache License, Version 2.0",
        "(https://www.apache.org/licenses/LICENSE-2.0). Changes made here: only the operations",
        "listed below and the shapes they reach are kept (paginators and waiters of those",
        "operations only), and `documentation` strings are removed.",
        "",
        "## Contents",
        "",
    ] + contents + [
        "",
        "Operations: " + ", ".join(sorted(small["operations"])) + ".",
        "",
    ]
    with open(os.path.join(out_dir, service, "SOURCE.md"), "w", encoding="utf-8",
              newline="\n") as f:
        f.write("\n".join(lines))
    print(f"wrote {model_dir}/service-2.json ({size} bytes, {len(small['operations'])} "
          f"operations, {len(small['shapes'])} shapes), paginators-1.json"
          f"{', waiters-2.json' if waiters is not None else ''}, {out_dir}/{service}/SOURCE.md")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=None,
                        help="directory holding botocore's service-2.json and paginators-1.json "
                             "(with --logs: botocore's data directory)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output data directory (aws-models)")
    parser.add_argument("--logs", action="store_true",
                        help="write the CloudWatch Logs subset instead of SageMaker's")
    parser.add_argument("--eks", action="store_true",
                        help="write the EKS subset instead of SageMaker's")
    args = parser.parse_args(argv)
    if args.logs:
        return write_service(args.source or botocore_data_dir(), args.out, "logs",
                             LOGS_OPERATIONS, "CloudWatch Logs", "--logs")
    if args.eks:
        return write_service(args.source or botocore_data_dir(), args.out, "eks",
                             EKS_OPERATIONS, "EKS", "--eks")
    args.source = args.source or os.path.join(botocore_data_dir(), "sagemaker", "2017-07-24")

    with open(os.path.join(args.source, "service-2.json"), encoding="utf-8") as f:
        model = json.load(f)
    with open(os.path.join(args.source, "paginators-1.json"), encoding="utf-8") as f:
        paginators = json.load(f)

    small = subset(model, OPERATIONS)
    pages = paginator_subset(paginators, OPERATIONS)
    api_version = model["metadata"]["apiVersion"]
    model_dir = os.path.join(args.out, "sagemaker", api_version)
    size = dump(small, os.path.join(model_dir, "service-2.json"))
    dump(pages, os.path.join(model_dir, "paginators-1.json"))
    write_source_md(args.out, args.source, small, len(small["shapes"]),
                    len(pages.get("pagination", {})))
    print(f"wrote {model_dir}/service-2.json ({size} bytes, {len(small['operations'])} operations, "
          f"{len(small['shapes'])} shapes), paginators-1.json "
          f"({len(pages.get('pagination', {}))} paginators), {args.out}/SOURCE.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
