#!/usr/bin/python3
"""The head roles along a training run: every checkpoint a run kept
(out/NAME/ckpt_NNNNN.pt, config keep_checkpoints; init.pt from --init-only
as step 0) exported to a temporary qkv file and measured by
`./run FILE -m heads`, the engine's own probes and scores.

    python3 export/heads_curve.py out/induction

Prints one line per checkpoint: the step, the run's held-out loss there, the
best induction head and its score, the best previous-token score in layer 0
(the head an induction head reads from), and the loss on the repeat probes'
first and second copies.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import cli  # one-line errors

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def measure(ckpt, tmp):
    qkv, out = os.path.join(tmp, "c.qkv"), os.path.join(tmp, "c.json")
    subprocess.run([sys.executable, os.path.join(HERE, "export.py"), ckpt, qkv], check=True, capture_output=True)
    subprocess.run([os.path.join(ROOT, "run"), qkv, "-m", "heads", "--json", out], check=True, capture_output=True)
    return json.load(open(out))


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return
    if len(sys.argv) != 2:
        sys.exit("usage: heads_curve.py RUN_DIR   (a train.py out_dir with ckpt_NNNNN.pt files)")
    import torch
    run_dir = sys.argv[1]
    ckpts = sorted(glob.glob(os.path.join(run_dir, "ckpt_*.pt")))
    if os.path.exists(os.path.join(run_dir, "init.pt")):
        ckpts.insert(0, os.path.join(run_dir, "init.pt"))
    if not ckpts:
        sys.exit("%s: no ckpt_NNNNN.pt or init.pt there (a train.py out_dir with --set keep_checkpoints=1)" % run_dir)
    print("%6s %8s %16s %9s %9s %8s %8s" % ("step", "eval", "best induction", "", "L0 prev", "copy 1", "copy 2"))
    with tempfile.TemporaryDirectory() as tmp:
        for ckpt in ckpts:
            meta = torch.load(ckpt, weights_only=False)
            history = meta.get("history") or []
            step = meta.get("iter", 0)
            evals = [h["eval"] for h in history if h["iter"] == step]
            d = measure(ckpt, tmp)
            ind = max(d["heads"], key=lambda h: h["induction"])
            prev = max(h["previous"] for h in d["heads"] if h["layer"] == 0)
            print("%6d %8s %16s %9.3f %9.3f %8.3f %8.3f" % (
                step, "%.3f" % evals[0] if evals else "-", "layer %d head %d" % (ind["layer"], ind["head"]),
                ind["induction"], prev, d["loss_first_copy"], d["loss_second_copy"]), flush=True)


if __name__ == "__main__":
    cli.run(main)
