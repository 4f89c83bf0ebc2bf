#!/usr/bin/env python3
"""Lints the programs the repository ships as files: every Lua file (`luac -p`, Lua 5.1,
the interpreter of Debian's Slurm job_submit/lua plugin) and every shell program (`bash -n`
or `sh -n` by its #! line, then `shellcheck -S warning`) under data/, scripts/, examples/,
tests/, bench/ and tools/. A shell program is a *.sh file or a file whose #! line names sh
or bash.

Usage: tests/tools/lint_programs.py [REPO]
Exit status: 0 clean; 1 a finding (each printed with its file); 77 no finding, but a linter
is missing (luac5.1 from lua5.1, shellcheck: scripts/setup --test installs them).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOTS = ("data", "scripts", "examples", "tests", "bench", "tools")
SKIP_DIRS = {"node_modules", "__pycache__", ".git"}
SHEBANG = re.compile(rb"^#!\s*(?:/usr/bin/env\s+)?(?:/usr)?(?:/bin/)?(sh|bash)\b")
# Linters' output must not depend on the caller's locale (shellcheck reads files as UTF-8).
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def programs(repo):
    """(lua files, [(shell file, "sh"|"bash")]) under ROOTS, sorted."""
    lua, shell = [], []
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(repo / root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if name.endswith(".lua"):
                    lua.append(path)
                    continue
                with open(path, "rb") as f:
                    first = f.readline()
                m = SHEBANG.match(first)
                if m:
                    shell.append((path, m.group(1).decode()))
                elif name.endswith(".sh"):
                    shell.append((path, "sh"))
    return lua, shell


def run(argv):
    """(exit status, output) of argv."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV,
                       check=False)
    return p.returncode, p.stdout.decode(errors="replace")


def main():
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    lua, shell = programs(repo)
    if not lua or not shell:
        print(f"lint_programs: found {len(lua)} Lua and {len(shell)} shell programs under "
              f"{repo}: wrong repository?")
        return 1
    luac = shutil.which("luac5.1", path=ENV["PATH"])
    shellcheck = shutil.which("shellcheck", path=ENV["PATH"])
    findings, missing = [], []
    for path in lua:
        if luac is None:
            break
        rc, out = run([luac, "-p", str(path)])
        if rc != 0:
            findings.append(f"{path.relative_to(repo)}: luac5.1 -p:\n{out}")
    for path, dialect in shell:
        rc, out = run(["/bin/bash" if dialect == "bash" else "/bin/sh", "-n", str(path)])
        if rc != 0:
            findings.append(f"{path.relative_to(repo)}: {dialect} -n:\n{out}")
        if shellcheck is not None:
            rc, out = run([shellcheck, "-S", "warning", "-s", dialect, str(path)])
            if rc != 0:
                findings.append(f"{path.relative_to(repo)}: shellcheck:\n{out}")
    if luac is None:
        missing.append("luac5.1 (package lua5.1)")
    if shellcheck is None:
        missing.append("shellcheck (package shellcheck)")
    for f in findings:
        print(f)
    print(f"lint_programs: {len(lua)} Lua and {len(shell)} shell programs, "
          f"{len(findings)} findings" + (f"; not run: {', '.join(missing)}" if missing else ""))
    if findings:
        return 1
    return 77 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
