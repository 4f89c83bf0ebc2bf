#!/usr/bin/env python3
"""Checks that every program Hyperfleet, its scripts and its tests execute comes from a
Debian package that is sure to be there.

The programs are derived from the code itself, not from a list kept by hand:
  - C++ (src/, apps/): the first element of a braced argv passed to a launcher (`Run({"ip",
    ...})`, `argv = {"systemd-nspawn", ...}`), paths given to exec*(), `HaveProgram("x")`,
    and the first word of shell snippets handed to the node's shell (`CaptureNodeShell("...")`);
  - shell (scripts/, data/, examples/, tests/, bench/): the command word of every simple
    command, read by a small tokenizer (below);
  - Python (tests/, bench/, tools/): literal argv lists given to subprocess.

Each program is placed where it runs: on the host (the control plane, scripts/, the node
image build, tests) or in a node (the node agent in src/agent/, the Slurm helpers in
data/slurm/, the example lifecycle scripts, commands run with in_root inside the image
build). It is then found on this machine (host side) or in the node image's package set
(node side), mapped to its package with `dpkg -S`, and accepted only when that package is

  host: Essential or Priority required, or named by scripts/setup (or installed by the
        script that runs it, e.g. debootstrap before an image build), or one of the
        Kubernetes binaries scripts/kubernetes builds from Debian's source package;
  node: Essential or Priority required (debootstrap --variant=minbase installs those), or
        named in data/node-image/packages.txt (or eks/packages.txt), or a dependency of one
        of those.

Usage: tools/check_programs.py [--list] [REPO]   (exit 1 and a report on any violation)
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

# Shell builtins (bash and dash): never programs.
SHELL_BUILTINS = {
    ".", ":", "[", "[[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command",
    "compgen", "complete", "continue", "declare", "dirs", "disown", "echo", "enable", "eval",
    "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history",
    "jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd",
    "read", "readarray", "readonly", "return", "set", "shift", "shopt", "source", "suspend",
    "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset",
    "wait",
}
# Programs and builtins whose arguments hold another command: how many words after the
# options to skip before it (None: options and VAR=value words only).
WRAPPERS = {"sudo": None, "exec": None, "nohup": None, "setsid": None, "env": None,
            "command": None, "xargs": None, "stdbuf": None, "nice": None, "ionice": None,
            "timeout": 1, "chroot": 1, "in_root": 0, "flock": 1, "unshare": None,
            "nsenter": None}
# Their options that take a value (the word after them is not the command).
WITH_VALUE = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}, "env": {"-u", "-C", "-S"},
    "nice": {"-n"}, "ionice": {"-c", "-n", "-p"}, "timeout": {"-s", "-k"},
    "flock": {"-w", "-E"}, "xargs": {"-I", "-n", "-P", "-L", "-d", "-a", "-s", "-E"},
    "stdbuf": {"-i", "-o", "-e"}, "nsenter": {"-t", "--target"},
}
# Wrappers that run the command inside the node image's root (build.sh, ami-layer.sh).
INTO_NODE = {"in_root", "chroot"}
# Wrappers given a shell program as a string: `sh -c '...'` is parsed as shell too.
SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash"}


def _literal(word):
    """The text of a shell word made only of literal and quoted-literal parts, or None."""
    text = ""
    for part in word.get("Parts", []):
        if part.get("Type") == "Lit":
            text += part.get("Value", "")
        elif part.get("Type") == "SglQuoted":
            text += part.get("Value", "")
        elif part.get("Type") == "DblQuoted" and all(
                p.get("Type") == "Lit" for p in part.get("Parts", [])):
            text += "".join(p.get("Value", "") for p in part.get("Parts", []))
        else:
            return None
    return text


def _walk(node, out):
    if isinstance(node, dict):
        if node.get("Type") == "CallExpr" and node.get("Args"):
            out.append([_literal(a) for a in node["Args"]])
        if node.get("Type") == "FuncDecl":
            out.append(("func", node.get("Name", {}).get("Value", "")))
        for value in node.values():
            _walk(value, out)
    elif isinstance(node, list):
        for value in node:
            _walk(value, out)


def _parse(text, dialect="bash"):
    r = subprocess.run(["shfmt", "--to-json", "-ln", dialect], input=text, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise ValueError(r.stderr.strip())
    import json
    calls = []
    _walk(json.loads(r.stdout), calls)
    return calls


def shell_commands(text, dialect="bash"):
    """Yields (command word, into_node) for every simple command of a shell program, parsed
    by shfmt (Debian's shfmt); words built from variables or substitutions are skipped."""
    calls = _parse(text, dialect)
    functions = {c[1] for c in calls if isinstance(c, tuple)}
    for args in calls:
        if isinstance(args, tuple):
            continue
        yield from _command_of(args, functions, into_node=False)


def _command_of(args, functions, into_node):
    if not args or args[0] is None:
        return
    w = args[0]
    if w not in WRAPPERS and (w in functions or w in SHELL_BUILTINS):
        return
    if w in SHELLS and len(args) >= 3 and args[1] == "-c" and args[2] is not None:
        yield (w, into_node)
        for word, node in shell_commands(args[2], "posix" if w.endswith("sh") and
                                         "bash" not in w else "bash"):
            yield (word, node or into_node)
        return
    if w in WRAPPERS:
        if w not in INTO_NODE and w not in SHELL_BUILTINS:
            yield (w, into_node)
        rest = list(args[1:])
        if "--" in rest:  # unshare --propagation private -- cmd
            rest = rest[rest.index("--"):]
        skip = WRAPPERS[w]
        while rest and rest[0] is not None and (rest[0].startswith("-") or
                                                (skip is None and "=" in rest[0])):
            takes_value = rest[0] in WITH_VALUE.get(w, ())
            rest = rest[2:] if takes_value else rest[1:]
        rest = rest[skip or 0:]
        yield from _command_of(rest, functions, into_node or w in INTO_NODE)
        return
    yield (w, into_node)


LAUNCHERS = r"(?:Run|RunOk|run|Capture|RunCapture|Spawn|Launch)"
CPP_ARGV = [
    re.compile(LAUNCHERS + r"\(\s*\{\s*\"([^\"]+)\""),
    re.compile(r"\bargv\s*=\s*\{\s*\"([^\"]+)\""),
    re.compile(r"std::vector<std::string>\s+(?:argv|args|cmd|command)\s*=\s*\{\s*\"([^\"]+)\""),
    re.compile(r"\bexec[lv]p?e?\(\s*\"([^\"]+)\""),
    re.compile(r"\bpath\s*=\s*\"(/[^\"]+)\""),
    re.compile(r"HaveProgram\(\s*\"([^\"]+)\"\)"),
    re.compile(r"FindProgram\(\s*\"([^\"]+)\"\)"),
]
CPP_SHELL_SNIPPET = re.compile(r"(?:CaptureNodeShell|RunNodeShell)\(\s*\"([^\"]+)\"")
PY_ARGV = re.compile(
    r"subprocess\.(?:run|Popen|check_output|check_call|call)\(\s*\[\s*[\"']([^\"']+)[\"']")

# Node-side code: runs inside nodes (the agent and what it runs), not on the host.
NODE_CPP = ("src/agent/", "src/cli/agent_command.cc", "src/cli/auto_resume_command.cc")
NODE_SHELL = ("data/slurm/", "examples/", "data/node-image/eks/node/")
# Files left out, each with its reason.
EXEMPT = {
    "bench/slurm_side_by_side.py": "checks its own prerequisites (Slurm, MariaDB) at start and "
                                   "prints the apt-get line; bench/README.md lists them",
    "bench/slurm_sbs/cluster.py": "the daemons of bench/slurm_side_by_side.py, which checks "
                                  "them at start (see the entry above)",
}


def cpp_programs(path, text):
    node = str(path).startswith(NODE_CPP)
    for pattern in CPP_ARGV:
        for m in pattern.finditer(text):
            yield m.group(1), node
    for m in CPP_SHELL_SNIPPET.finditer(text):
        for word, _ in shell_commands(m.group(1).replace("\\n", "\n"), "posix"):
            yield word, True


def collect(repo):
    """Returns {(program, where): set of files}, where is 'host' or 'node'."""
    found = {}

    def add(program, node, rel):
        program = program.strip()
        if not program or program.endswith((".sh", ".py")) or \
                ("/" in program and not program.startswith("/")):
            return  # the project's own scripts
        found.setdefault((program, "node" if node else "host"), set()).add(rel)

    def files(*patterns):
        for pattern in patterns:
            for p in sorted(repo.glob(pattern)):
                if p.is_file() and "node_modules" not in p.parts:
                    yield p

    for p in files("src/**/*.cc", "src/**/*.h", "apps/**/*.cc"):
        rel = str(p.relative_to(repo))
        for program, node in cpp_programs(rel, p.read_text(errors="replace")):
            add(program, node, rel)
    shell_files = set(files("scripts/*", "data/**/*.sh", "examples/**/*.sh", "examples/**/*.sbatch",
                            "tests/**/*.sh", "bench/**/*.sh", ".ci/run"))
    for p in sorted(shell_files):
        text = p.read_text(errors="replace")
        if p.suffix not in (".sh", ".sbatch") and not text.startswith("#!") \
                or (text.startswith("#!") and "sh" not in text.splitlines()[0]):
            continue
        rel = str(p.relative_to(repo))
        node_file = rel.startswith(NODE_SHELL) or rel == "data/node-image/ami-layer.sh" and False
        for program, into_node in shell_commands(text):
            add(program, node_file or into_node, rel)
    for p in files("tests/**/*.py", "bench/**/*.py", "tools/**/*.py", "examples/**/*.py"):
        rel = str(p.relative_to(repo))
        if rel in EXEMPT:
            continue
        for m in PY_ARGV.finditer(p.read_text(errors="replace")):
            add(m.group(1), rel.startswith("examples/"), rel)
    return found


def dpkg_query(fields, packages):
    r = subprocess.run(["dpkg-query", "-W", "-f", fields, *packages], capture_output=True,
                       text=True, env={**os.environ, "LC_ALL": "C"})
    return r.stdout


def resolve_in_root(path, root):
    """`path` with its symbolic links followed as the tree at `root` sees them (an absolute
    link such as /usr/bin/awk -> /etc/alternatives/awk stays inside the tree)."""
    parts, seen = [p for p in path.split("/") if p], 0
    done = ""
    while parts and seen < 40:
        head = parts.pop(0)
        here = os.path.join(root, (done + "/" + head).lstrip("/"))
        if os.path.islink(here):
            seen += 1
            target = os.readlink(here)
            if target.startswith("/"):
                done = ""
            parts = [p for p in target.split("/") if p] + parts
        elif head == "..":
            done = done.rsplit("/", 1)[0]
        elif head != ".":
            done = done + "/" + head
    return done or "/"


def package_of(path, root="/"):
    """The package that owns `path` in the Debian tree at `root` (following symlinks and
    alternatives inside it), or None."""
    admin = ["--admindir", os.path.join(root, "var/lib/dpkg")]
    for candidate in (path, resolve_in_root(path, root)):
        r = subprocess.run(["dpkg", *admin, "-S", candidate], capture_output=True, text=True,
                           env={**os.environ, "LC_ALL": "C"})
        for line in r.stdout.splitlines():
            if ": " in line and not line.startswith("diversion"):
                return line.split(": ", 1)[0].split(",")[0].split(":")[0].strip()
        # Merged /usr: dpkg knows /bin/x as /usr/bin/x or the other way round.
        alt = candidate[4:] if candidate.startswith("/usr/") else "/usr" + candidate
        r = subprocess.run(["dpkg", *admin, "-S", alt], capture_output=True, text=True,
                           env={**os.environ, "LC_ALL": "C"})
        for line in r.stdout.splitlines():
            if ": " in line and not line.startswith("diversion"):
                return line.split(": ", 1)[0].split(",")[0].split(":")[0].strip()
    return None


def setup_packages(repo):
    """Every package name that scripts/setup, scripts/quickstart and scripts/kubernetes install."""
    names = set()
    for script in ("scripts/setup", "scripts/quickstart", "scripts/kubernetes"):
        if not (repo / script).is_file():
            continue
        text = (repo / script).read_text()
        for m in re.finditer(r"packages\+?=\(([^)]*)\)", text, re.S):
            body = re.sub(r"#[^\n]*", "", m.group(1))
            names.update(w for w in body.split() if re.match(r"^[a-z0-9][a-z0-9.+-]+$", w))
        for m in re.finditer(r"packages\+=\((\w[\w.+-]*)\)", text):
            names.add(m.group(1))
        for m in re.finditer(r"apt-get install[^\n]*?((?:\s+[a-z0-9][a-z0-9.+-]+)+)\s*(?:>|$)",
                             text, re.M):
            names.update(w for w in m.group(1).split() if not w.startswith("-"))
    return names


def kubernetes_binaries(repo):
    """The programs scripts/kubernetes builds from Debian's source into its cache (its
    `binaries=(...)` list): on the host they come from there, run by path from that cache."""
    script = repo / "scripts/kubernetes"
    if not script.is_file():
        return set()
    m = re.search(r"^binaries=\(([^)]*)\)", script.read_text(), re.M)
    return set(m.group(1).split()) if m else set()


def image_packages(repo):
    """The node images' package lists: the base image's and the EKS image's additions (a
    program of the EKS layer may come from either; Slurm-side files run on both)."""
    names = set()
    for rel in ("data/node-image/packages.txt", "data/node-image/eks/packages.txt"):
        if not (repo / rel).is_file():
            continue
        text = (repo / rel).read_text()
        names |= {w for line in text.splitlines() for w in line.split("#")[0].split()}
    return names


def with_dependencies(packages):
    """The packages and everything they depend on (Depends and Pre-Depends, recursively)."""
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                        *sorted(packages)], capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"})
    out = set(packages)
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(?:\|)?(?:Pre)?Depends:\s*<?([a-z0-9][a-z0-9.+-]*)", line)
        if m:
            out.add(m.group(1))
        elif re.match(r"^[a-z0-9][a-z0-9.+-]*$", line.strip()) and not line.startswith(" "):
            out.add(line.strip())
    return out


def base_packages(root="/"):
    """Essential and Priority required packages (on every Debian, and in minbase)."""
    text = subprocess.run(["dpkg-query", "--admindir", os.path.join(root, "var/lib/dpkg"), "-W",
                           "-f", "${Package} ${Essential} ${Priority}\n"], capture_output=True,
                          text=True, env={**os.environ, "LC_ALL": "C"}).stdout
    base = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and ("yes" in parts[1:] or "required" in parts[1:]):
            base.add(parts[0])
    return base


SEARCH_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
               "/opt/slurm/bin", "/opt/slurm/sbin")


def find_program(program, root="/"):
    """The program's path inside the tree at `root` (as that tree sees it), or None."""
    candidates = [program] if program.startswith("/") else [f"{d}/{program}" for d in SEARCH_PATH]
    for c in candidates:
        full = os.path.join(root, c.lstrip("/"))
        if os.path.lexists(full) and (os.path.isdir(full) is False):
            return c
    return None


def image_root(binary, eks=False):
    """The built node image's rootfs (`hyperfleet image path [--eks]`), or None."""
    if not binary or not os.access(binary, os.X_OK):
        return None
    r = subprocess.run([binary, "image", "path", *(["--eks"] if eks else [])],
                       capture_output=True, text=True)
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    return path if path and os.path.isdir(os.path.join(path, "var/lib/dpkg")) else None


def check(repo, binary=None, list_only=False):
    """Returns (problems, notes, count): programs not covered, programs left unverified."""
    found = collect(repo)
    host_ok = base_packages() | with_dependencies(setup_packages(repo))
    image = image_root(binary)
    eks_image = image_root(binary, eks=True)  # a superset of the base image
    node_ok = with_dependencies(image_packages(repo)) | (base_packages(image) if image else set())
    built = kubernetes_binaries(repo)
    problems, notes, rows = [], [], []
    for (program, where), sources in sorted(found.items()):
        used_in = ", ".join(sorted(sources)[:3])
        if program == "hyperfleet":
            continue  # our own binary
        # Programs only the EKS layer's node scripts run are in the EKS image only.
        eks_only = all(src.startswith("data/node-image/eks/") for src in sources)
        # Built from Debian's kubernetes source package by scripts/kubernetes; the EKS layer
        # copies the kubelet and kube-proxy into its image's /usr/local/bin.
        if (where == "host" and program in built) or (
                where == "node" and eks_only and program.startswith("/usr/local/bin/")
                and os.path.basename(program) in built):
            rows.append(f"{where:4} {program:24} {'scripts/kubernetes':24} {used_in}")
            continue
        root = image if where == "node" else "/"
        if where == "node" and eks_only:
            root = eks_image
        if root is None and eks_only:
            notes.append(f"{program} (EKS node; used in {used_in}): not verified, no EKS node "
                         "image is built (hyperfleet image build --eks)")
            continue
        if root is None:
            notes.append(f"{program} (node; used in {used_in}): not verified, no node image "
                         "is built (hyperfleet image build)")
            continue
        path = find_program(program, root)
        package = package_of(path, root) if path else None
        ok = package is not None and package in (node_ok if where == "node" else host_ok)
        rows.append(f"{where:4} {program:24} {package or '?':24} {used_in}")
        if not ok:
            where_text = "in the node image" if where == "node" else "on this machine"
            why = (f"not found {where_text}" if path is None else
                   f"{path} belongs to no package {where_text}" if package is None else
                   f"package {package} is neither Essential/required nor installed by " +
                   ("data/node-image/packages.txt" if where == "node" else "scripts/setup"))
            problems.append(f"{program} ({where}; used in {used_in}): {why}")
    if list_only:
        print("\n".join(rows))
    return problems, notes, len(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--list", action="store_true", help="print every program found")
    parser.add_argument("--hyperfleet", help="the hyperfleet binary (finds the node image)")
    args = parser.parse_args()
    problems, notes, count = check(Path(args.repo), args.hyperfleet, args.list)
    for n in notes:
        print("note:", n)
    for p in problems:
        print("MISSING:", p)
    print(f"check_programs: {count} programs, {len(problems)} not covered by a package")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
