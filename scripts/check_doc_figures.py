#!/usr/bin/env python3
"""Measured figures in the prose say when they were measured (issue 38).

A paragraph of README.md or docs/*.md that speaks of a measurement (measured, a bench/ script,
a median) and quotes a figure (a number with ms, s, MiB, MB/s, % ...) must also carry the
date it was measured (YYYY-MM-DD), or follow a paragraph of the same section that does (a
long run's heading paragraph dates its summary). The generated pages (benchmarks.md, cli.md,
configuration.md) are exempt: their figures come from the run or the code. Figures that are
settings, limits or defaults are not measurements and are not matched unless the paragraph
says it measured them.

  scripts/check_doc_figures.py [ROOT]     exit 1, listing file:line, when one lacks a date
"""
import pathlib
import re
import sys

GENERATED = {"benchmarks.md", "cli.md", "configuration.md"}
MEASURED = re.compile(r"\b(measured|Measured|median|medians)\b|`bench/[a-z]+`|\bbench/[a-z]+ (took|gave|measured)")
FIGURE = re.compile(r"\b\d+(\.\d+)? ?(ms|s|MiB|KiB|GiB|MB/s|GB/s|MB|GB|%)(?![A-Za-z0-9])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def paragraphs(text):
    start, lines, fence = 1, [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
            if lines:
                yield start, "\n".join(lines)
            lines = []
            continue
        if fence:
            continue
        if not line.strip():
            if lines:
                yield start, "\n".join(lines)
            lines = []
            continue
        if not lines:
            start = n
        lines.append(line)
    if lines:
        yield start, "\n".join(lines)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    bad = []
    for f in files:
        if f.name in GENERATED:
            continue
        dated = False
        for line, para in paragraphs(f.read_text()):
            if para.startswith("#"):
                dated = False
            if DATE.search(para):
                dated = True
            if MEASURED.search(para) and FIGURE.search(para) and not dated:
                first = para.splitlines()[0].strip()
                bad.append(f"{f.relative_to(root)}:{line}: {first[:100]}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} paragraph(s) quote measured figures without saying when (YYYY-MM-DD): "
              "add the date, or point to docs/benchmarks.md instead of quoting it",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
