#!/usr/bin/python3
"""Independent checks of `./run MODEL -m heads` (tests/test_heads.sh).

    heads_check.py closed-form JSON
        tests/data/heads.qkv's hand-built heads (export/make_test_models.py):
        head 0 self, head 1 previous, head 2 first token score 1 on their
        role and 0 on the others; head 3 (no query: uniform weights) scores
        the mean of 1/(keys visible) over each role's queries, computed here
        from the probe and block lengths alone.
    heads_check.py oracle MODEL JSON
        every score and both losses recomputed from the probe tokens in the
        JSON by export/reference.py's NumPy float64 forward pass, with the
        role definitions written out again here (README: What each head does).
    heads_check.py formats STDOUT CSV JSON SVG
        the four outputs parse and agree with each other.
    heads_check.py readme README.md
        every fenced block of the README that starts with "$ ./run ... -m heads"
        is what that command prints now.

Prints one "ok NAME" or "FAIL NAME: why" line per check.
"""
import csv
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET

try:
    import numpy as np
except ImportError:  # readme needs none; the others say skip (CI's pass without numpy)
    np = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "export"))

ROLES = ["self", "previous", "first", "induction", "duplicate", "entropy"]
WEIGHT_ROLES = ROLES[:5]


def report(name, ok, why=""):
    print(("ok %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    return ok


def closed_form(path):
    d = json.load(open(path))
    T, L = d["probe_length"], d["block_length"]
    text_queries = range(2, T)            # positions 2..T-1 see pos+1 keys
    repeat_queries = range(L + 1, 2 * L + 1)
    uniform_text = float(np.mean([1.0 / (i + 1) for i in text_queries]))
    uniform_repeat = float(np.mean([1.0 / (i + 1) for i in repeat_queries]))
    want = {
        0: dict(self=1, previous=0, first=0, induction=0, duplicate=0, entropy=0),
        1: dict(self=0, previous=1, first=0, induction=0, duplicate=0, entropy=0),
        2: dict(self=0, previous=0, first=1, induction=0, duplicate=0, entropy=0),
        3: dict(self=uniform_text, previous=uniform_text, first=uniform_text,
                induction=uniform_repeat, duplicate=uniform_repeat, entropy=1),
    }
    want_role = {0: "self", 1: "previous", 2: "first", 3: None}
    for h in d["heads"]:
        k = h["head"]
        worst = max(abs(h[r] - want[k][r]) for r in ROLES)
        report("hand-built head %d: %s (worst difference %.1e)" % (k, ", ".join(
            "%s %.4f" % (r, want[k][r]) for r in ROLES), worst), worst < 1e-5, json.dumps(h))
        report("hand-built head %d's role is %s" % (k, want_role[k]), h["role"] == want_role[k], str(h["role"]))
    chance_ok = all(abs(d["chance"][r] - want[3][r]) < 1e-9 for r in ROLES)
    report("uniform baseline (chance) = mean 1/(keys visible)", chance_ok, json.dumps(d["chance"]))
    bos = [p[0] for p in d["text_probes"] + d["repeat_probes"]]
    blocks_ok = all(p[1:L + 1] == p[L + 1:] and len(set(p[1:L + 1])) == L and min(p[1:]) >= 3
                    for p in d["repeat_probes"])
    report("probes start with BOS; repeat probes are a block of distinct ids >= 3, twice",
           all(b == 1 for b in bos) and blocks_ok)


def role_scores(weights, tokens, L, kind):
    """Sums over one probe, [n_layers][n_heads][role], and the query count."""
    n_layers, n_heads = len(weights[0]), len(weights[0][0])
    sums = np.zeros((n_layers, n_heads, len(ROLES)))
    count = 0
    T = len(tokens)
    queries = range(2, T) if kind == "text" else range(L + 1, 2 * L + 1)
    for i in queries:
        count += 1
        for layer in range(n_layers):
            for h in range(n_heads):
                w = np.asarray(weights[i][layer][h])
                if kind == "text":
                    sums[layer, h, 0] += w[i]
                    sums[layer, h, 1] += w[i - 1]
                    sums[layer, h, 2] += w[0]
                    nz = w[w > 0]
                    sums[layer, h, 5] += -(nz * np.log(nz)).sum() / math.log(i + 1)
                else:
                    assert tokens[i] == tokens[i - L]
                    sums[layer, h, 3] += w[i - L + 1]
                    sums[layer, h, 4] += w[i - L]
    return sums, count


def log_softmax_at(logits, target):
    m = logits.max()
    return float(m + np.log(np.exp(logits - m).sum()) - logits[target])


def oracle(model, path):
    import qkvfile
    import reference
    d = json.load(open(path))
    config, tensors, _ = qkvfile.read_model(model)
    quantized = reference.quantized_matrices(qkvfile.read_tensor_types(model)) if model.endswith(".qkv") else ()
    L = d["block_length"]
    total = np.zeros((config["n_layers"], config["n_heads"], len(ROLES)))
    n_text = n_repeat = 0
    loss = [0.0, 0.0]
    for kind, probes in (("text", d["text_probes"]), ("repeat", d["repeat_probes"])):
        for tokens in probes:
            r = reference.forward(config, tensors, tokens, quantized)
            sums, count = role_scores(r.weights, tokens, L, kind)
            total += sums
            if kind == "text":
                n_text += count
            else:
                n_repeat += count
                loss[0] += sum(log_softmax_at(r.logits[p], tokens[p + 1]) for p in range(1, L))
                loss[1] += sum(log_softmax_at(r.logits[p], tokens[p + 1]) for p in range(L + 1, 2 * L))
    total[:, :, [0, 1, 2, 5]] /= n_text
    total[:, :, [3, 4]] /= n_repeat
    worst, where = 0.0, ""
    for h in d["heads"]:
        for k, role in enumerate(ROLES):
            diff = abs(h[role] - total[h["layer"], h["head"], k])
            if diff > worst:
                worst, where = diff, "layer %d head %d %s: %.7f against %.7f" % (
                    h["layer"], h["head"], role, h[role], total[h["layer"], h["head"], k])
    name = os.path.basename(model)
    report("%s: %d scores within 2e-5 of NumPy's from the same probes (worst %.1e)"
           % (name, len(d["heads"]) * len(ROLES), worst), worst < 2e-5, where)
    per_copy = len(d["repeat_probes"]) * (L - 1)
    want = [x / per_copy for x in loss]
    got = [d["loss_first_copy"], d["loss_second_copy"]]
    diff = max(abs(a - b) for a, b in zip(want, got))
    report("%s: losses on the first and second copy %.4f, %.4f as NumPy's (difference %.1e)"
           % (name, want[0], want[1], diff), diff < 1e-4, "engine %s" % got)


def formats(stdout_path, csv_path, json_path, svg_path):
    d = json.load(open(json_path))
    report("JSON parses, with %d heads" % len(d["heads"]), len(d["heads"]) == d["n_layers"] * d["n_heads"])
    rows = list(csv.DictReader(open(csv_path)))
    csv_ok = len(rows) == len(d["heads"]) and all(
        int(r["layer"]) == h["layer"] and int(r["head"]) == h["head"] and (r["role"] == (h["role"] or "none"))
        and all(abs(float(r[k]) - h[k]) < 1e-6 for k in ROLES) for r, h in zip(rows, d["heads"]))
    report("CSV parses and agrees with the JSON", csv_ok)
    table = [line.split() for line in open(stdout_path) if re.match(r"^\s+\d+\s+\d+\s", line)]
    table_ok = len(table) == len(d["heads"]) and all(
        all(abs(float(t[2 + k]) - h[r]) <= 0.0005 + 1e-9 for k, r in enumerate(ROLES))
        and t[8] == (h["role"] or "none") for t, h in zip(table, d["heads"]))
    report("the table on stdout agrees with the JSON", table_ok)
    svg = ET.parse(svg_path).getroot()
    rects = svg.findall("{http://www.w3.org/2000/svg}rect")
    cells = [r for r in rects if r.get("fill", "").startswith("rgb(")]
    outlines = [r for r in rects if r.get("fill") == "none"]
    report("SVG parses: one cell per role and head, one outline per head with a role",
           len(cells) == len(ROLES) * len(d["heads"]) and len(outlines) == sum(1 for h in d["heads"] if h["role"]),
           "%d cells, %d outlines" % (len(cells), len(outlines)))


def readme(path):
    import shlex
    import subprocess
    blocks = re.findall(r"```\n(\$ \./run [^\n]*-m heads[^\n]*)\n(.*?)```", open(path).read(), re.S)
    report("README has -m heads output blocks to check (%d)" % len(blocks), len(blocks) > 0)
    for command, shown in blocks:
        args = shlex.split(command[2:])
        out = subprocess.run([os.path.join(ROOT, "run")] + args[1:], cwd=ROOT, capture_output=True, text=True)
        same = out.returncode == 0 and out.stdout == shown
        first = next((a for a, b in zip(out.stdout.splitlines(), shown.splitlines()) if a != b), "")
        report("README: %s prints what the README shows" % command[2:], same, "first differing line: " + first)


def main():
    what = sys.argv[1]
    if np is None and what != "readme":
        print("skip heads_check.py %s: numpy is not importable" % what)
        return
    if what == "closed-form":
        closed_form(sys.argv[2])
    elif what == "oracle":
        oracle(sys.argv[2], sys.argv[3])
    elif what == "formats":
        formats(*sys.argv[2:6])
    elif what == "readme":
        readme(sys.argv[2])
    else:
        sys.exit("usage: heads_check.py closed-form JSON | oracle MODEL JSON | formats STDOUT CSV JSON SVG"
                 " | readme README.md")


if __name__ == "__main__":
    main()
