#!/usr/bin/env python3
"""Checks the libraries' layering against the table "Library dependencies" in
docs/architecture.md, the source of truth.

The table has one row per library (`| hf_x | may use | notes |`). "may use" is a comma
separated list of areas (`store` stands for hf_store; `local_provider` for hf_local_provider),
third-party libraries (not checked here), backticked headers (`api/json_service.h`: that
header may be included, its library not linked) or "everything above" (every library of the
rows above). Text in parentheses is a remark. Notes starting with "runs inside nodes" make
the row strict: everything the library reaches, through links or includes, directly or not,
must be in its own list (no server code in the node agent).

What the code does is read from:
  - every hf_add_library(<name> SOURCES ... DEPS ...) in src/**/CMakeLists.txt: which library
    compiles which .cc, and which hf_* libraries it links;
  - every `#include "..."` of src/**/*.{h,cc} and include/hyperfleet/**/*.h that names a
    header of this repository ("hyperfleet/<area>/x.h", or "<area>/x.h" under src/, or a
    header next to the file). A header belongs to the library that compiles the .cc of the
    same name in its area, else to its directory's (or area's) library.

Fails (exit 1, one line per violation) when a library has no row or a row no library, links
or includes a library its row does not allow, or a node-side library reaches beyond its row.

Usage: tests/tools/check_layering.py [REPO]
"""
import re
import sys
from pathlib import Path

ROW = re.compile(r"^\|\s*`?(hf_[a-z_]+)`?\s*\|([^|]*)\|?([^|]*)\|?\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ADD_LIBRARY = re.compile(r"hf_add_library\(\s*([A-Za-z0-9_]+)(.*?)\)", re.S)


class Row:
    """One row of the table: what library `name` may use."""

    def __init__(self, name, libs, headers, node_side):
        self.name = name
        self.libs = libs  # hf_* names it may link and include
        self.headers = headers  # header paths under include/hyperfleet/ it may include
        self.node_side = node_side


def parse_table(text, known_areas):
    """The rows of "## Library dependencies" in docs/architecture.md, in order, and errors."""
    section = re.search(r"^## Library dependencies\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if section is None:
        return [], ["docs/architecture.md: no section \"## Library dependencies\""]
    rows, errors = [], []
    for line in section.group(1).splitlines():
        m = ROW.match(line.strip())
        if m is None:
            continue
        name, may_use, notes = m.group(1), m.group(2), m.group(3)
        libs, headers = set(), set()
        may_use = re.sub(r"\([^)]*\)", "", may_use)  # remarks
        for item in (i.strip() for i in may_use.split(",")):
            if not item:
                continue
            if item == "everything above":
                libs.update(r.name for r in rows)
            elif item.startswith("`") and item.endswith("`"):
                header = item.strip("`")
                if not (Path("include/hyperfleet") / header).as_posix().endswith(".h"):
                    errors.append(f"docs/architecture.md: {name}: {item} is not a header")
                headers.add(header)
            elif item in known_areas:
                libs.add("hf_" + item)
            elif item.startswith("hf_"):
                errors.append(f"docs/architecture.md: {name}: name areas, not {item!r}")
            # anything else names a third-party library
        rows.append(Row(name, libs, headers, notes.strip().startswith("runs inside nodes")))
    return rows, errors


def strip_cmake_comments(text):
    return "\n".join(re.sub(r"#.*", "", line) for line in text.splitlines())


def parse_libraries(repo):
    """{library: (CMakeLists directory, [source paths], [hf_* deps])} from src/."""
    libraries = {}
    for cmake in sorted((repo / "src").rglob("CMakeLists.txt")):
        text = strip_cmake_comments(cmake.read_text())
        for m in ADD_LIBRARY.finditer(text):
            name, args = m.group(1), m.group(2).split()
            sources, deps, key = [], [], None
            for a in args:
                if a in ("SOURCES", "DEPS"):
                    key = a
                elif key == "SOURCES" and "$" not in a:
                    sources.append((cmake.parent / a).resolve())
                elif key == "DEPS" and a.startswith("hf_"):
                    deps.append(a)
            libraries[name] = (cmake.parent.resolve(), sources, deps)
    return libraries


class Owners:
    """Which library each file of src/ and include/hyperfleet/ belongs to."""

    def __init__(self, repo, libraries):
        self.repo = repo.resolve()
        self.libraries = libraries
        self.by_source = {s: lib for lib, (_, srcs, _) in libraries.items() for s in srcs}

    def _of_dir(self, directory, area):
        """The library of `directory` (under src/): the one defined there, else the area's
        when several are, else its parent directory's."""
        src = self.repo / "src"
        while directory == src or src in directory.parents:
            here = [lib for lib, (d, _, _) in self.libraries.items() if d == directory]
            if len(here) == 1:
                return here[0]
            if here:
                return "hf_" + area if "hf_" + area in here else None
            directory = directory.parent
        return "hf_" + area if "hf_" + area in self.libraries else None

    def of(self, path):
        """The library `path` belongs to, or None."""
        path = path.resolve()
        rel = path.relative_to(self.repo)
        if path.suffix == ".cc":
            return self.by_source.get(path)
        if rel.parts[:2] == ("include", "hyperfleet"):
            area = rel.parts[2]
            base = self.repo / "src" / area
        else:
            area = rel.parts[1]
            base = path.parent
        for source, lib in self.by_source.items():
            if source.stem == path.stem and base in source.parents:
                return lib
        return self._of_dir(base, area)


def resolve_include(repo, including, name):
    """The repository file `#include "name"` in `including` means, or None (third-party)."""
    if name.startswith("hyperfleet/"):
        candidates = [repo / "include" / name]
    else:
        candidates = [repo / "src" / name, including.parent / name]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    return None


def main():
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    repo = repo.resolve()
    areas = {p.name for p in (repo / "src").iterdir() if p.is_dir()}
    libraries = parse_libraries(repo)
    known = areas | {lib[3:] for lib in libraries}
    rows, errors = parse_table((repo / "docs" / "architecture.md").read_text(), known)
    table = {r.name: r for r in rows}
    for lib in sorted(set(libraries) - set(table)):
        errors.append(f"{lib}: no row in docs/architecture.md \"Library dependencies\"")
    for lib in sorted(set(table) - set(libraries)):
        errors.append(f"docs/architecture.md: row {lib}: no such library in src/")
    for row in rows:
        for dep in sorted(row.libs - set(libraries)):
            errors.append(f"docs/architecture.md: row {row.name}: no library {dep}")

    # Links: each hf_* DEPS entry must be allowed.
    for lib, (directory, _, deps) in sorted(libraries.items()):
        if lib not in table:
            continue
        for dep in deps:
            if dep not in table[lib].libs:
                errors.append(f"{directory.relative_to(repo)}/CMakeLists.txt: {lib} links {dep}, "
                              f"which docs/architecture.md does not allow")

    # Includes: each repository header a file includes must be its own library's, an allowed
    # library's, or an allowed header.
    owners = Owners(repo, libraries)
    files = sorted(list((repo / "src").rglob("*.cc")) + list((repo / "src").rglob("*.h")) +
                   list((repo / "include" / "hyperfleet").rglob("*.h")))
    includes = {}  # file -> [(header, its library)]
    for f in files:
        owner = owners.of(f)
        if owner is None:
            errors.append(f"{f.relative_to(repo)}: belongs to no library")
            continue
        includes[f] = []
        for name in INCLUDE.findall(f.read_text(errors="replace")):
            header = resolve_include(repo, f, name)
            if header is None:
                continue
            target = owners.of(header)
            includes[f].append((header, target))
            if owner not in table or target == owner:
                continue
            row = table[owner]
            public = header.relative_to(repo / "include" / "hyperfleet").as_posix() \
                if (repo / "include" / "hyperfleet") in header.parents else None
            if target not in row.libs and public not in row.headers:
                errors.append(f"{f.relative_to(repo)} ({owner}) includes \"{name}\" "
                              f"({target}), which docs/architecture.md does not allow")

    # Node-side libraries: everything reached, transitively, stays within the row.
    for row in rows:
        if not row.node_side or row.name not in libraries:
            continue
        allowed = row.libs | {row.name}
        seen, todo = set(), [row.name]
        while todo:
            lib = todo.pop()
            for dep in libraries.get(lib, (None, [], []))[2]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        for lib in sorted(seen - allowed):
            errors.append(f"{row.name} runs inside nodes but reaches {lib} through its links")
        reached, todo = set(), [f for f in includes if owners.of(f) == row.name]
        while todo:
            f = todo.pop()
            for header, target in includes.get(f, []):
                if header in reached:
                    continue
                reached.add(header)
                todo.append(header)
                public = header.relative_to(repo / "include" / "hyperfleet").as_posix() \
                    if (repo / "include" / "hyperfleet") in header.parents else None
                if target not in allowed and public not in row.headers:
                    errors.append(f"{row.name} runs inside nodes but reaches "
                                  f"{header.relative_to(repo)} ({target}) through "
                                  f"{f.relative_to(repo)}")

    for e in errors:
        print(e)
    print(f"check_layering: {len(libraries)} libraries, {len(includes)} files, "
          f"{len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
