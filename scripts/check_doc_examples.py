#!/usr/bin/env python3
"""Every shell example in README.md and docs/ that runs steward or stewardctl is either run by
the doc test against a real local cluster or marked as illustrative (issue 38).

    scripts/check_doc_examples.py [--root DIR] --check   fails naming each unmarked example
    scripts/check_doc_examples.py [--root DIR] --json    the runnable examples, for the test
    scripts/check_doc_examples.py --match EXPECTED ACTUAL  fails unless every line of EXPECTED
        matches a line of ACTUAL, in order, with numbers and size units free (the docs show
        output from other clusters: other sizes, revisions, rates, node numbers)

The marker is an HTML comment on the line right above the fence:
    <!-- example: run -->                the doc test (DocExamplesTest) runs it
    <!-- example: illustrative: WHY -->   not run; WHY says why (another machine, destroys, ...)
docs/cli.md is stewardctl's own help (generated) and is not scanned.
"""
import glob
import json
import os
import re
import sys

FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
MARK = re.compile(r"^\s*<!-- example: (run|illustrative: .+?) -->\s*$")
RUNS = re.compile(r"(^|[\s$;(|&])(sudo\s+)?(stewardctl|steward)\s")


def examples(root):
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for path in files:
        if path.endswith(os.path.join("docs", "cli.md")):
            continue
        lines = open(path).read().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            lang = m.group(2)
            j = i + 1
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            body = lines[i + 1:j]
            # The output the docs show: an unlabelled block right after the example.
            output = []
            if j + 1 < len(lines) and FENCE.match(lines[j + 1]) and not FENCE.match(lines[j + 1]).group(2):
                k = j + 2
                while k < len(lines) and not FENCE.match(lines[k]):
                    k += 1
                output = lines[j + 2:k]
            if lang in ("", "sh", "shell", "bash", "console") and any(RUNS.search(l) for l in body):
                mark = MARK.match(lines[i - 1]) if i > 0 else None
                yield {"file": os.path.relpath(path, root), "line": i + 1,
                       "mark": mark.group(1) if mark else "",
                       "output": "\n".join(output),
                       "body": "\n".join(l[len(m.group(1)):] if l.startswith(m.group(1)) else l
                                         for l in body)}
            i = j + 1


def fuzzy(line):
    parts = re.split(r"(\d+(?:\.\d+)*|\b[kMGT]?i?B\b)", line.strip())
    out = ""
    for n, part in enumerate(parts):
        if n % 2 == 0:
            out += re.escape(part)
        elif part[0].isdigit():
            out += r"\d+(?:\.\d+)*"
        else:
            out += r"[kMGT]?i?B"
    return re.compile(out)


def match(expected_path, actual_path):
    actual = [l.strip() for l in open(actual_path).read().split("\n")]
    at = 0
    for want in [l for l in open(expected_path).read().split("\n") if l.strip()]:
        rx = fuzzy(want)
        while at < len(actual) and not rx.fullmatch(actual[at]):
            at += 1
        if at == len(actual):
            print(f"not in the output (in order): {want.strip()}\n  as {rx.pattern}", file=sys.stderr)
            return 1
        at += 1
    return 0


def main(argv):
    if "--match" in argv:
        i = argv.index("--match")
        return match(argv[i + 1], argv[i + 2])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if "--root" in argv:
        root = argv[argv.index("--root") + 1]
    found = list(examples(root))
    if "--json" in argv:
        print(json.dumps([e for e in found if e["mark"] == "run"], indent=1))
        return 0
    bad = [e for e in found if not e["mark"]]
    for e in bad:
        print(f"{e['file']}:{e['line']}: an example that runs steward or stewardctl is neither "
              f"run by the doc test nor marked illustrative (<!-- example: run --> or "
              f"<!-- example: illustrative: why -->)", file=sys.stderr)
    runs = sum(1 for e in found if e["mark"] == "run")
    print(f"{len(found)} examples: {runs} run by the doc test, {len(found) - runs - len(bad)} "
          f"illustrative, {len(bad)} unmarked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
