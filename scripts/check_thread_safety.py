#!/usr/bin/env python3
"""Clang's thread-safety analysis over every source file in src/ (issue 33).

The build uses g++, which ignores ABSL_GUARDED_BY and the other lock annotations; this runs
clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety on each file with the build's own
flags and include directories (compile_commands.json: configure with
CMAKE_EXPORT_COMPILE_COMMANDS=ON, as CMakeLists.txt does; the generated proto headers must
exist, i.e. the build ran). Headers are checked through the files that include them.

Usage: check_thread_safety.py BUILD_DIR SOURCE_DIR [--jobs N] [--clang clang++] [FILE...]
(FILE...: only these, e.g. src/node/start.cc, for a quick look while editing.)
Exit status 0 when clang finds nothing, 1 when it finds something (its diagnostics printed),
2 when it cannot run (no clang++, no compile_commands.json, a file of src/ not in it).
"""

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

# g++'s output and dependency flags, dropped; -W flags are replaced by THREAD_SAFETY.
DROP_WITH_VALUE = {"-o", "-MT", "-MF", "-MQ"}
DROP = {"-c", "-MD", "-MMD"}
THREAD_SAFETY = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety"]


def clang_command(entry, clang):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in DROP_WITH_VALUE:
            skip = True
            continue
        if a in DROP or a.startswith("-W") or a == entry["file"]:
            continue
        out.append(a)
    return out + THREAD_SAFETY + [entry["file"]]


def check(entry, clang):
    cmd = clang_command(entry, clang)
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"], r.returncode, r.stderr


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("source_dir")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--clang", default="clang++")
    p.add_argument("only", nargs="*", metavar="FILE")
    a = p.parse_intermixed_args()

    clang = shutil.which(a.clang)
    if clang is None:
        print(f"check_thread_safety: {a.clang} not found (apt-get install clang; "
              "scripts/install-deps.sh --test installs it)", file=sys.stderr)
        return 2
    db_path = os.path.join(a.build_dir, "compile_commands.json")
    try:
        with open(db_path) as f:
            db = json.load(f)
    except OSError as e:
        print(f"check_thread_safety: {e} (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)",
              file=sys.stderr)
        return 2

    src = os.path.realpath(os.path.join(a.source_dir, "src"))
    entries = {}
    for e in db:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if path.startswith(src + os.sep):
            entries.setdefault(path, dict(e, file=path))
    # Every .cc of src/ is checked: one the build does not compile is named, not skipped.
    missing = []
    for root, _, files in os.walk(src):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".cc") and path not in entries:
                missing.append(os.path.relpath(path, a.source_dir))
    if missing:
        print("check_thread_safety: not in compile_commands.json (not built?): " +
              ", ".join(sorted(missing)), file=sys.stderr)
        return 2

    if a.only:
        wanted = {os.path.realpath(f) for f in a.only}
        entries = {k: v for k, v in entries.items() if k in wanted}
        if len(entries) != len(wanted):
            print("check_thread_safety: not sources of src/: " +
                  ", ".join(sorted(wanted - entries.keys())), file=sys.stderr)
            return 2

    start = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for path, rc, err in pool.map(lambda e: check(e, clang), entries.values()):
            if rc != 0:
                failed.append(path)
                sys.stdout.write(err)
    took = time.monotonic() - start
    if failed:
        print(f"check_thread_safety: {len(failed)} of {len(entries)} file(s) failed: " +
              ", ".join(os.path.relpath(f, a.source_dir) for f in sorted(failed)))
        return 1
    print(f"check_thread_safety: {len(entries)} file(s) of src/ clean ({took:.0f}s, "
          f"{a.jobs} job(s), {os.path.basename(clang)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
