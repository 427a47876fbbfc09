#!/usr/bin/env bash
# The training pipeline (export/train.py, export/export.py) end to end, in
# a few steps of each config: it trains, evaluates (at a step between and at
# the end), saves, exports a checkpoint ./run loads and generates from; the
# same seed gives the same bytes. The full trainings are the Makefile's
# `models` target; these runs only check that every config still gets there
# (three of them crashed at their first eval, and induction at its start,
# while the README said they reproduce). Needs PyTorch; the stories and
# shakespeare configs need ../shared/data.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"

if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    skip "training pipeline" "PyTorch or NumPy is missing (apt-get install python3-torch python3-numpy)"
    exit 0
fi

# train CONFIG OUT [--set k=v ...]: 2 steps, an eval after each, the model
# exported: train.py then export.py as their commands run them, in one
# interpreter (PyTorch imported once, not twice: make test's slowest
# script took 41 s)
train() {
    local config=$1 out=$2
    shift 2
    OMP_NUM_THREADS=1 $PY - "$config" "$out" "$@" >"$out.log" 2>&1 <<'EOF'
import runpy, sys
config, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.argv = ["export/train.py", "--config", config, "--set", "out_dir=" + out, "--set", "max_iters=2",
            "--set", "eval_interval=1", "--set", "warmup_iters=1"] + extra
runpy.run_path("export/train.py", run_name="__main__")
sys.argv = ["export/export.py", out + "/ckpt.pt", out + ".bin"]
runpy.run_path("export/export.py", run_name="__main__")
EOF
}

check_config() {
    local config=$1
    shift
    if ! train "$config" "$tmp/$config" "$@"; then
        fail "export/train.py --config $config (2 steps) and export.py" "$(tail -n 3 "$tmp/$config.log")"
    elif [ "$(grep -c '^step [12]/2 ' "$tmp/$config/log.txt")" -ne 2 ]; then
        fail "export/train.py --config $config" "no eval line at steps 1 and 2: $(head -c 300 "$tmp/$config/log.txt")"
    elif ! $RUN "$tmp/$config.bin" -n 8 -s 1 >/dev/null 2>"$tmp/err"; then
        fail "export/train.py --config $config: ./run on the export" "$(tail -n 1 "$tmp/err")"
    else ok "export/train.py --config $config trains (2 steps, an eval after each) and exports a file ./run generates from"
    fi
}

small="--set grammar_sentences=4000 --set eval_tokens=4096"
check_config grammar $small
check_config induction $small
# the second export as its own command: the same bytes as export.py run in
# train.py's interpreter
if train grammar "$tmp/again" $small && cmp -s "$tmp/grammar.bin" "$tmp/again.bin" \
    && $PY export/export.py "$tmp/again/ckpt.pt" "$tmp/again-alone.bin" >/dev/null 2>&1 \
    && cmp -s "$tmp/grammar.bin" "$tmp/again-alone.bin"; then
    ok "export/train.py --config grammar: the same seed gives the same exported bytes (export.py alone too)"
else fail "export/train.py determinism" "two runs of the same config and seed exported different files"; fi
if [ -r ../shared/data/tinyshakespeare.txt ]; then check_config shakespeare --set eval_tokens=4096
else skip "export/train.py --config shakespeare" "../shared/data is absent"; fi
# (a batch of 2 rows: the config's 16 made this the slowest check of make test)
if [ -r ../shared/data/tinystories-gpt4clean.txt ]; then check_config stories --set eval_tokens=1024 --set batch_size=2
else skip "export/train.py --config stories" "../shared/data is absent"; fi
