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

# read_stderr FILE: err_lines = its newlines (as wc -l counts them), err_first
# = its first line, by bash's builtins: a script checks hundreds of runs'
# stderr, and wc and head were two processes each (seconds of make test). A
# file holding a NUL byte (where read stops) is read by the commands.
read_stderr() {
    local text newlines
    if IFS= read -r -d '' text <"$1"; then
        err_lines=$(wc -l <"$1") err_first=$(head -n 1 "$1")
    else
        newlines=${text//[!$'\n']/}
        err_lines=${#newlines} err_first=${text%%$'\n'*}
    fi
}

# matches TEXT PATTERN: whether TEXT matches the extended regular expression
# PATTERN in any case (grep -qiE, without its process)
matches() {
    local found=1
    shopt -s nocasematch
    [[ $1 =~ $2 ]] && found=0
    shopt -u nocasematch
    return $found
}

# engine_disassembly NAME: dis = build/engine.o's disassembly, each
# instruction a line, its raw bytes first (all of them: 16 a line), after
# its function's name ("<f>: 4782c: c5 fd 6f ... vmovdqa ..."; a compiler's
# clone of a function, f.isra.0, .constprop.0 or .part.0, and the part it
# moved to .text.unlikely, f.cold, named as the function), for the tests
# that read the compiled kernels; without objdump or the object, NAME's
# skip or FAIL line on stdout instead, and status 1.
# (It sets dis rather than printing it: in a $(...) the skip or FAIL line
# would be captured, and lost.)
engine_disassembly() {
    dis=""
    if ! command -v objdump >/dev/null 2>&1; then skip "$1" "no objdump"; return 1; fi
    if [ ! -f build/engine.o ]; then fail "$1" "no build/engine.o"; return 1; fi
    dis=$(objdump -d --insn-width=16 build/engine.o | awk '
        /^[0-9a-f]+ <[^>]*>:$/ { f = $2; gsub(/\.(isra|constprop|part)(\.[0-9]+)+/, "", f); sub(/\.cold>:$/, ">:", f); print f; next }
        /^ / { print f, $0 }')
}
