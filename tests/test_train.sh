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

# train JOB...: each JOB "NAME CONFIG [--set k=v ...]" trains CONFIG 2
# steps, an eval after each, into $tmp/NAME/, and exports $tmp/NAME.bin:
# train.py then export.py as their commands run them, every job in one
# interpreter (PyTorch imported once, not once a job: its import takes
# 1.5 s, and this had become make test's slowest script, 29-41 s). A job
# that fails leaves $tmp/NAME.failed; each job's output is in $tmp/NAME.log.
# The determinism check's second run is an interpreter of its own: one
# interpreter shares its string hashes' seed and its modules' state.
train() {
    OMP_NUM_THREADS=1 $PY - "$tmp" "$@" <<'EOF'
import contextlib, runpy, sys, traceback
tmp = sys.argv[1]
for job in sys.argv[2:]:
    name, config, *extra = job.split()
    out = tmp + "/" + name
    with open(out + ".log", "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            sys.argv = ["export/train.py", "--config", config, "--set", "out_dir=" + out, "--set", "max_iters=2",
                        "--set", "eval_interval=1", "--set", "warmup_iters=1"] + extra
            runpy.run_path("export/train.py", run_name="__main__")
            sys.argv = ["export/export.py", out + "/ckpt.pt", out + ".bin"]
            runpy.run_path("export/export.py", run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                print(e.code, file=sys.stderr)  # a message given as the code: exit's words
                open(out + ".failed", "w").close()
        except Exception:
            traceback.print_exc()
            open(out + ".failed", "w").close()
EOF
}

check_config() {
    local name=$1 config=$2
    if [ -e "$tmp/$name.failed" ] || [ ! -f "$tmp/$name.bin" ]; then
        fail "export/train.py --config $config (2 steps) and export.py" "$(tail -n 3 "$tmp/$name.log")"
    elif [ "$(grep -c '^step [12]/2 ' "$tmp/$name/log.txt")" -ne 2 ]; then
        fail "export/train.py --config $config" "no eval line at steps 1 and 2: $(head -c 300 "$tmp/$name/log.txt")"
    elif ! $RUN "$tmp/$name.bin" -n 8 -s 1 >/dev/null 2>"$tmp/err"; then
        fail "export/train.py --config $config: ./run on the export" "$(tail -n 1 "$tmp/err")"
    else ok "export/train.py --config $config trains (2 steps, an eval after each) and exports a file ./run generates from"
    fi
}

small="--set grammar_sentences=4000 --set eval_tokens=4096"
jobs=("grammar grammar $small" "induction induction $small")
have_shakespeare=$([ -r ../shared/data/tinyshakespeare.txt ] && echo 1)
have_stories=$([ -r ../shared/data/tinystories-gpt4clean.txt ] && echo 1)
[ -n "$have_shakespeare" ] && jobs+=("shakespeare shakespeare --set eval_tokens=4096")
# (a batch of 2 rows: the config's 16 made this the slowest check of make test;
# a BPE of 512 pieces: training the config's 4,096 took 4.9 s of the job's 7)
[ -n "$have_stories" ] && jobs+=("stories stories --set eval_tokens=1024 --set batch_size=2 --set vocab_size=512")
train "${jobs[@]}"
# the stories caches of a 512-piece run, then a run into a copy of them with
# 400 pieces: the caches are made again (they were reused: a model of 400
# tokens trained on ids up to 511)
again=("again grammar $small")
if [ -n "$have_stories" ] && [ -f "$tmp/stories/data_config.json" ]; then
    mkdir -p "$tmp/stories400" && cp "$tmp"/stories/{tokenizer.bin,data_*.npy,data_config.json} "$tmp/stories400/"
    again+=("stories400 stories --set eval_tokens=1024 --set batch_size=2 --set vocab_size=400")
fi
train "${again[@]}"

check_config grammar grammar
check_config induction induction
# the second run of grammar (after induction's, in the same interpreter),
# and its export as a command of its own: the same bytes as the first
if [ ! -e "$tmp/again.failed" ] && cmp -s "$tmp/grammar.bin" "$tmp/again.bin" \
    && $PY export/export.py "$tmp/again/ckpt.pt" "$tmp/again-alone.bin" >/dev/null 2>&1 \
    && cmp -s "$tmp/grammar.bin" "$tmp/again-alone.bin"; then
    ok "export/train.py --config grammar: the same seed gives the same exported bytes (export.py alone too)"
else fail "export/train.py determinism" "two runs of the same config and seed exported different files"; fi
if [ -n "$have_shakespeare" ]; then check_config shakespeare shakespeare
else skip "export/train.py --config shakespeare" "../shared/data is absent"; fi
if [ -n "$have_stories" ]; then check_config stories stories
else skip "export/train.py --config stories" "../shared/data is absent"; fi
if [ -n "$have_stories" ] && [ -f "$tmp/stories/data_config.json" ]; then
    if [ ! -e "$tmp/stories400.failed" ] && $RUN "$tmp/stories400.bin" -m info 2>/dev/null | grep -q 'vocab_size 400 '; then
        ok "export/train.py --config stories: caches of another vocabulary size are made again, not reused"
    else fail "export/train.py: stories caches of another vocabulary" "$(tail -n 2 "$tmp/stories400.log")"; fi
fi

# ---- export.py's refusals: one line, exit 1, no file written ----
# (each case export.py's command as runpy runs it, in one interpreter: an
# interpreter a case imported PyTorch eight times, 12 s)
$PY - "$tmp" >"$tmp/refusals" 2>&1 <<'EOF'
import contextlib, io, os, runpy, sys
tmp = sys.argv[1]
def command(script, *args):
    sys.argv = [script, *args]
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code, err.getvalue()
    return 0, err.getvalue()
def export(*args):
    return command("export/export.py", *args)
export("models/stories.bin", tmp + "/st.qkv", "--write-tokenizer", tmp + "/st-tok.bin")
import torch
torch.save([1, 2], tmp + "/list.pt")
torch.save({"foo": torch.zeros(2)}, tmp + "/foo.pt")
export("models/grammar.bin", tmp + "/s32.qkv", "--seq-len", "32", "--rope-theta", "500000")
code, err = command("export/train.py", "--config", "grammar", "--set", "max_iter=2")
print("train.py --set max_iter=2\texit %s: %s" % (code, err.strip().split("\n")[-1]))
cases = [
    ("a tokenizer of a larger vocabulary", "big.qkv", ["models/grammar.bin", "--tokenizer", tmp + "/st-tok.bin"]),
    ("--n-heads for a file that gives its heads", "h.qkv", ["models/grammar.bin", "--n-heads", "3"]),
    ("a text file", "t.qkv", ["README.md"]),
    ("a missing checkpoint", "m.qkv", [tmp + "/missing.pt"]),
    ("a pickled list", "l.qkv", [tmp + "/list.pt"]),
    ("a state dict of no Llama tensors", "f.qkv", [tmp + "/foo.pt", "--n-heads", "2"]),
    ("an output in no folder", "no/o.qkv", ["models/grammar.bin"]),
    ("a --write-tokenizer path in no folder, before writing the model", "w.bin",
     ["models/grammar.bin", "--format", "legacy", "--write-tokenizer", tmp + "/no/t.bin"]),
]
for what, out, args in cases:
    out = tmp + "/" + out
    code, err = export(args[0], out, *args[1:])
    # an exit with a message: status 1 and the message on stderr, its only line
    line = code if isinstance(code, str) and not err and "\n" not in code else "exit %r, stderr %r" % (code, err)
    print("%s\t%s\t%s" % (what, line, "wrote the file" if os.path.exists(out) else ""))
EOF
refused() { # WHAT PATTERN: the case WHAT's line matches PATTERN (an ERE), and it wrote no file
    local line
    line=$(grep -F -e "$1"$'\t' "$tmp/refusals")
    local said=${line#*$'\t'}
    if matches "$line" $'\t'"$2"$'[^\t]*\t$'; then ok "export.py refuses $1 in one line: ${said%$'\t'}"
    else fail "export.py refuses $1" "${line:-$(tail -n 3 "$tmp/refusals")}"; fi
}
refused "a tokenizer of a larger vocabulary" "models/grammar.bin: tokenizer has more than the model's 582 tokens"
refused "--n-heads for a file that gives its heads" "models/grammar.bin gives its own heads"
refused "a text file" "README.md: not a PyTorch checkpoint, and read as llama2.c's legacy format"
refused "a missing checkpoint" "export.py: error: .*No such file"
refused "a pickled list" ".*/list.pt: a list, not a checkpoint"
refused "a state dict of no Llama tensors" ".*/foo.pt: no tensor tok_embeddings.weight: not a Llama state dict"
refused "an output in no folder" ".*cannot write a file there \(no such folder\)"
refused "a --write-tokenizer path in no folder, before writing the model" ".*/no/t.bin: cannot write a file there \(no such folder\)"
if $RUN "$tmp/s32.qkv" -m info 2>/dev/null | grep -q 'seq_len 32 .*rope_theta 500000'; then
    ok "export.py applies --seq-len and --rope-theta to a model file it converts (they were ignored)"
else fail "export.py --seq-len on a model file" "$($RUN "$tmp/s32.qkv" -m info 2>&1 | grep seq_len)"; fi
line=$(grep -F 'train.py --set max_iter=2' "$tmp/refusals")
if matches "$line" $'\texit 2: .*unknown config key max_iter \\(keys: .*max_iters'; then
    ok "train.py --set with an unknown key: a usage error naming the keys (it was an assert: python3 -O trained on)"
else fail "train.py --set max_iter" "$line"; fi
