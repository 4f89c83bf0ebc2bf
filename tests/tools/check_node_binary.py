#!/usr/bin/env python3
"""Checks that a binary runs on the machines the ssh provider supports (Debian 12, Ubuntu
22.04 and 24.04) whatever their library versions: the portable node binary, hyperfleet-node
(cmake/static_link.cmake).

  - the highest GLIBC_ symbol version it asks for (objdump -T) is at most 2.35 (Ubuntu
    22.04's glibc; Debian 12 has 2.36, Ubuntu 24.04 2.39);
  - no GLIBCXX_, CXXABI_ or GCC_ versions: libstdc++ and libgcc are linked in, not loaded;
  - its NEEDED libraries (readelf -d) are glibc's only: libc.so.6, libm.so.6,
    ld-linux-x86-64.so.2, and libdl.so.2 / libpthread.so.0 (stubs since glibc 2.34).

Usage: check_node_binary.py BINARY   (exit 0, or 1 with one line per violation)
"""
import re
import subprocess
import sys

MAX_GLIBC = (2, 35)
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "libdl.so.2",
                  "libpthread.so.0"}
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def run(argv):
    return subprocess.run(argv, env=ENV, check=True, capture_output=True, text=True).stdout


def violations(binary):
    """The reasons `binary` would not load on every supported machine (empty: none)."""
    out = []
    dynamic = run(["objdump", "-T", binary])
    too_new = {}
    for line in dynamic.splitlines():
        m = re.search(r"\((GLIBC_(\d+)\.(\d+)(?:\.\d+)?)\)\s+(\S+)\s*$", line)
        if m and (int(m.group(2)), int(m.group(3))) > MAX_GLIBC:
            too_new.setdefault(m.group(1), []).append(m.group(4))
    for version, symbols in sorted(too_new.items()):
        out.append(f"{binary}: needs {version} (> GLIBC_{MAX_GLIBC[0]}.{MAX_GLIBC[1]}) for "
                   + ", ".join(sorted(symbols)[:10]))
    for prefix in ("GLIBCXX_", "CXXABI_", "GCC_"):
        found = sorted(set(re.findall(r"\((" + prefix + r"[0-9.]+)\)", dynamic)),
                       key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
        if found:
            out.append(f"{binary}: asks for {', '.join(found[-3:])}: libstdc++/libgcc must be "
                       "linked statically (-static-libstdc++ -static-libgcc)")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]))
    extra = [n for n in needed if n not in ALLOWED_NEEDED]
    if extra:
        out.append(f"{binary}: loads {', '.join(extra)}: only glibc may be a shared library")
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problems = violations(sys.argv[1])
    for p in problems:
        print(p)
    if not problems:
        print(f"{sys.argv[1]}: portable (glibc <= {MAX_GLIBC[0]}.{MAX_GLIBC[1]}, glibc only)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
