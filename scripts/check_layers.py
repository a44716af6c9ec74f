#!/usr/bin/env python3
"""Fails on an include that climbs the layers of src/ (docs/architecture.md, "Layers").

Usage: check_layers.py [SOURCE_DIR]   (default: the repository this script lives in)

The order of the layers and the few allowances are data in one place: the block between
"<!-- layers: begin -->" and "<!-- layers: end -->" in docs/architecture.md, which this script
reads. There, every numbered line names one floor, lowest first; several folders on one line
(`etcd`, `pki`, `runner`) share a floor and may not include each other. A line of the
allowances names a file and the include it may keep for now, with the reason.

Every `#include "dir/..."` in src/**/*.h and src/**/*.cc whose dir is a folder of src/ is read:
a file may include its own folder and any folder on a lower floor, nothing else. A folder of
src/ that the list does not place is an error too (a new folder must be given its floor), and
so is an allowance that no include needs any more.

Inside one folder, files must not include each other in a circle either. A header and the .cc
of the same name are one unit (plan.h with plan.cc), so "plan.cc includes plan_text.h, which
includes plan.h" is a cycle: neither can be read, built or tested without the other.

Exit status 0: clean; 1: violations, each printed as file:line with both layers, or as the
units of a cycle; 2: the list cannot be read.
"""
import pathlib
import re
import sys

BEGIN = "<!-- layers: begin -->"
END = "<!-- layers: end -->"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/([^"]+)"')
FLOOR = re.compile(r"^\s*(\d+)\.\s+(.*)$")
ALLOWANCE = re.compile(r"^\s*-\s+allow\s+`([^`]+)`\s+->\s+`([^`]+)`")


def read_layers(doc):
    """Returns ({folder: floor}, {(file, include)}) from the block in `doc`."""
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: no {BEGIN} ... {END} block")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    floors, allowed = {}, set()
    for line in block.splitlines():
        if m := FLOOR.match(line):
            head = m.group(2).split(" — ", 1)[0]  # the folders, before the dash
            names = re.findall(r"`([a-z0-9_]+)/?`", head)
            if not names:
                raise ValueError(f"{doc}: floor {m.group(1)} names no folder: {line.strip()}")
            for name in names:
                if name in floors:
                    raise ValueError(f"{doc}: {name} is placed twice")
                floors[name] = int(m.group(1))
        elif m := ALLOWANCE.match(line):
            allowed.add((m.group(1), m.group(2)))
    if not floors:
        raise ValueError(f"{doc}: the layers block lists no floor")
    return floors, allowed


def check(root):
    floors, allowed = read_layers(root / "docs" / "architecture.md")
    src = root / "src"
    errors, used = [], set()
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):
        if folder.name not in floors:
            errors.append(f"src/{folder.name}/: a folder on no floor (give it one in "
                          f"docs/architecture.md, \"Layers\")")
    files = sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cc") and p.is_file())
    for path in files:
        rel = path.relative_to(root).as_posix()
        own = path.relative_to(src).parts[0]
        if own not in floors:
            continue  # reported above
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) == own or m.group(1) not in floors:
                continue
            target = m.group(1)
            included = f"{target}/{m.group(2)}"
            if floors[target] < floors[own]:
                continue
            if (rel, included) in allowed:
                used.add((rel, included))
                continue
            how = "the same floor" if floors[target] == floors[own] else "a higher floor"
            errors.append(f"{rel}:{number}: {own} (floor {floors[own]}) includes {included} "
                          f"({target}, floor {floors[target]}): {how}")
    for rel, included in sorted(allowed - used):
        errors.append(f"docs/architecture.md: the allowance {rel} -> {included} is no longer "
                      f"needed: remove it")
    return errors, len(files)


def unit_cycles(root):
    """Cycles between the units (a header with its .cc) of each folder of src/, as messages."""
    src = root / "src"
    edges = {}  # unit -> {unit: "file:line" of the first include that makes the edge}
    for path in sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cc") and p.is_file()):
        parts = path.relative_to(src).parts
        if len(parts) != 2:
            continue
        unit = f"{parts[0]}/{path.stem}"
        out = edges.setdefault(unit, {})
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) != parts[0]:
                continue
            target = f"{m.group(1)}/{pathlib.PurePosixPath(m.group(2)).stem}"
            if target != unit:
                out.setdefault(target, f"{path.relative_to(root).as_posix()}:{number}")
    # Tarjan's strongly connected components; every component of two or more units is a cycle.
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    errors = []
    for component in sorted(found):
        links = [f"{a} -> {b} ({edges[a][b]})" for a in component for b in component
                 if b in edges.get(a, {})]
        errors.append(f"include cycle between {', '.join(component)}: " + "; ".join(links))
    return errors


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parent.parent)
    try:
        errors, n = check(root.resolve())
        errors += unit_cycles(root.resolve())
    except (OSError, ValueError) as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layers or cycles "
              f"(docs/architecture.md, \"Layers\")")
        return 1
    print(f"check_layers: {n} files, no include climbs the layers, no cycle between files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
