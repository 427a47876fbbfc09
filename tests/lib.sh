# tests/lib.sh — what every tests/test_*.sh starts with, sourced as its
# first line (. "$(dirname "$0")/lib.sh"): the repository as the working
# directory, the engine and Python under test, a scratch directory removed
# on exit, and the line printers tests/run_tests.sh counts (one line per
# check: "ok NAME", "FAIL NAME: WHY", "skip NAME: WHY").
set -u
cd "$(dirname "$0")/.." || exit 1
RUN=${QKV_RUN:-./run}          # QKV_RUN: another build's ./run, for comparisons
PY=${PYTHON:-/usr/bin/python3} # Debian's python3-numpy and python3-torch
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "skip $1: $2"; }
have_numpy() { $PY -c 'import numpy' 2>/dev/null; }
