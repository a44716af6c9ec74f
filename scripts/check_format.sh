#!/usr/bin/env bash
# Fails on any C++ file of src/, tests/ or bench/ that .clang-format would change, naming each
# file and how many lines differ (ctest Format.Clean). Usage: check_format.sh [SOURCE_DIR]
# The formatter is Debian 12's clang-format (14), installed by install-deps.sh --test: another
# version may format the same file differently. Fix with:
#   git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h' \
#     | xargs clang-format -i
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
command -v clang-format >/dev/null || { echo "check_format: no clang-format (install-deps.sh --test)"; exit 1; }
bad=0
while IFS= read -r f; do
  if ! diff -q <(clang-format "$f") "$f" >/dev/null; then
    echo "$f: $(diff <(clang-format "$f") "$f" | grep -c '^[<>]') line(s) differ from .clang-format"
    bad=$((bad + 1))
  fi
done < <(find src tests bench -name '*.cc' -o -name '*.h' | grep -v node_modules | sort)
if [ "$bad" -gt 0 ]; then
  echo "check_format: $bad file(s) not formatted ($(clang-format --version))"
  exit 1
fi
echo "check_format: every C++ file is formatted"
