#!/usr/bin/python3
"""Checks of the trace outputs, for tests/test_trace.sh.

Each subcommand prints one "ok NAME" / "FAIL NAME: why" line per check.
The reference numbers come from export/reference.py, an independent NumPy
float64 forward pass, run over exactly the tokens the engine's run used.

    trace_check.py jsonl MODEL FILE.jsonl N_PROMPT [NAME]   schema, invariants, reference
    trace_check.py text-vs-json TEXT JSONL [NAME]    text trace numbers = JSON numbers
    trace_check.py weird-model SRC DST               copy SRC with hostile byte-token pieces
    trace_check.py small-vocab-model SRC DST         copy SRC cut to a smaller vocabulary
    trace_check.py swapped-pieces-model SRC DST      copy SRC with two pieces' ids swapped
    trace_check.py control-pieces-model SRC DST      copy SRC with <s>, </s> spelt as llama2.c's
    trace_check.py padded-vocab-model SRC DST N      copy SRC with N empty pieces after its own
    trace_check.py escapes MODEL JSONL TEXT HTML OUT every byte escaped as documented
    trace_check.py html FILE MODEL [COMPARE]         the page's data, against the reference
    trace_check.py step RUN...                       step mode in a pseudo-terminal
    trace_check.py colour RUN...                     heat colours on a tty, not with NO_COLOR
"""
import json
import math
import os
import pty
import re
import select
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "export"))

WEIGHT_TOL = 1e-5  # the engine's float32 weights against float64
SCORE_TOL = 1e-4   # relative, for raw q.k and logits
SUM_TOL = 1e-6


def ok(name):
    print("ok " + name)


def fail(name, why):
    print("FAIL %s: %s" % (name, " ".join(str(why).split())[:300]))


def check(cond, name, why):
    ok(name) if cond else fail(name, why)


def reference(model, tokens):
    import qkvfile
    import reference as ref
    config, tensors, _ = qkvfile.read_model(model)
    return config, ref.forward(config, tensors, tokens)


def rounding_slack(rows, kv_type, near=1e-5):
    """Per element of key rows [n, head_size] (float64, unrounded): one step
    of the cache's rounding where the element lies within `near` (relative)
    of a rounding boundary, where the engine's float32 key and this float64
    one may round apart; else 0."""
    import numpy as np
    x = np.asarray(rows, dtype=np.float64)
    if kv_type == "f16":  # the spacing of |x|'s binade (2^-24 below 2^-14), not of |x| rounded:
        # just under a power of two the tie with it is a step below's half
        _, e = np.frexp(np.abs(x))
        step = np.ldexp(1.0, np.maximum(e - 1, -14) - 10)
        t = np.abs(x) / step
    else:  # q8: a row's step is its scale, max|x| / 127
        step = np.repeat(np.abs(x).max(axis=1, keepdims=True) / 127, x.shape[1], axis=1)
        t = np.abs(x) / np.where(step > 0, step, 1.0)
    return np.where(np.abs(t - np.floor(t) - 0.5) <= near * np.maximum(t, 1.0), step, 0.0)


def cmd_kv_type(model, path, kv_type, name):
    """A run with --kv-type f16 or q8 against reference.py's model of the
    cache's rows (kv_stored), layer 0 (its keys come from the embeddings
    alone): every raw score within float32's SCORE_TOL of the modelled one,
    plus a step of the rounding times |q_i| for each element near a rounding
    boundary (rounding_slack), plus, for q8, the engine's rounding of q to
    int16 (kv_int8.h: at most q_scale / 2 * sum |k_i| as stored, q_scale =
    max|q| / p_max, 16383 up to head size 1032); and the same test against
    a float32 cache's scores fails somewhere, so that it tells the types
    apart."""
    import numpy as np
    import qkvfile
    import reference as ref
    steps = read_jsonl(path, name)
    if not steps:
        return
    config, tensors, _ = qkvfile.read_model(model)
    tokens = [st["token"] for st in steps]
    modelled = ref.forward(config, tensors, tokens, kv_type=kv_type)
    plain = ref.forward(config, tensors, tokens)
    per_kv = config["n_heads"] // config["n_kv_heads"]
    p_max = min(16383, (2 ** 31 - 1) // 127 // config["head_size"])  # kv_int8.h's query_scale
    worst = worst_plain = 0.0
    rows = 0
    for st in steps:
        p = st["pos"]
        for L in st["layers"][:1]:
            layer = L["layer"]
            for H in L["heads"]:
                h = H["head"]
                q = modelled.queries[p][layer][h]
                keys = np.array([modelled.keys[layer][t][h // per_kv] for t in range(p + 1)])
                unrounded = np.array([plain.keys[layer][t][h // per_kv] for t in range(p + 1)])
                got, want = np.array(H["scores"]), modelled.scores[p][layer][h]
                bound = SCORE_TOL * np.maximum(1.0, np.abs(want)) + rounding_slack(unrounded, kv_type) @ np.abs(q)
                if kv_type == "q8":  # q_scale = max|q| / p_max
                    bound = bound + np.abs(q).max() / p_max / 2 * np.abs(keys).sum(axis=1)
                worst = max(worst, float(np.max(np.abs(got - want) / bound)))
                worst_plain = max(worst_plain, float(np.max(np.abs(got - plain.scores[p][layer][h]) / bound)))
                rows += 1
    check(rows > 0 and worst <= 1.0 < worst_plain,
          "%s: %d rows of raw scores within their bound of reference.py's %s cache (worst %.2f of it), "
          "a float32 cache's outside it (%.1f)" % (name, rows, kv_type, worst, worst_plain),
          "worst %.3g of the bound against the %s model, %.3g against float32 rows" % (worst, kv_type, worst_plain))


def read_jsonl(path, name):
    steps, bad = [], []
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            try:
                steps.append(json.loads(line.decode("utf-8")))
            except (ValueError, UnicodeDecodeError) as e:
                bad.append("line %d: %s" % (n, e))
    check(steps and not bad, name + ": every line is valid JSON", bad[:3] or "no lines")
    return steps


STEP_KEYS = {"pos": int, "token": int, "piece": str, "forced": bool, "next": int, "next_piece": str,
             "layers": list, "top": list}


def schema_errors(st, i):
    errs = []
    for key, kind in STEP_KEYS.items():
        if not isinstance(st.get(key), kind):
            errs.append("step %d: %s is not %s" % (i, key, kind.__name__))
    if st.get("forced") is False:
        s = st.get("sample") or {}
        if s.get("method") not in ("greedy", "temperature", "top-k", "top-p", "top-k+top-p"):
            errs.append("step %d: sample.method %r" % (i, s.get("method")))
        for key in ("temperature", "topp", "topk", "candidates", "coin", "probability"):
            if not isinstance(s.get(key), (int, float)):
                errs.append("step %d: sample.%s missing" % (i, key))
    elif st.get("sample") is not None:
        errs.append("step %d: forced step with a sample" % i)
    for L in st.get("layers", []):
        for H in L.get("heads", []):
            for key in ("head", "kv_head"):
                if not isinstance(H.get(key), int):
                    errs.append("step %d: %s missing" % (i, key))
            if not (isinstance(H.get("scores"), list) and isinstance(H.get("weights"), list)):
                errs.append("step %d: scores/weights missing" % i)
    for c in st.get("top", []):
        if not (isinstance(c.get("id"), int) and isinstance(c.get("piece"), str)
                and isinstance(c.get("logit"), (int, float)) and isinstance(c.get("prob"), (int, float))):
            errs.append("step %d: bad top entry %r" % (i, c))
    return errs


def compare_attention(steps, res, config, name, digits=9):
    """Every row of every head against the reference, plus invariants. With
    fewer digits than float32's 9 (the HTML page keeps 6), rounding loosens
    each tolerance a little."""
    loose = digits < 9
    weight_tol, score_tol = (1.5e-5, 1.5e-4) if loose else (WEIGHT_TOL, SCORE_TOL)
    sum_tol, self_tol = (1e-5, 1e-4) if loose else (SUM_TOL, 1e-6)
    worst_w = worst_s = worst_sum = worst_self = worst_o = 0.0
    bad_len = negative = rows = outputs = 0
    hs = config["head_size"]
    for st in steps:
        p = st["pos"]
        for L in st["layers"]:
            for H in L["heads"]:
                rows += 1
                w, s = H["weights"], H["scores"]
                if len(w) != p + 1 or len(s) != p + 1:
                    bad_len += 1
                    continue
                rw = res.weights[p][L["layer"]][H["head"]]
                rs = res.scores[p][L["layer"]][H["head"]]
                worst_w = max(worst_w, max(abs(a - b) for a, b in zip(w, rw)))
                worst_s = max(worst_s, max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(s, rs)))
                if "output" in H:  # JSON Lines (the page leaves it out)
                    ro = res.outputs[p][L["layer"]][H["head"]]
                    outputs += len(H["output"]) == hs
                    worst_o = max(worst_o, max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(H["output"], ro)))
                worst_sum = max(worst_sum, abs(math.fsum(w) - 1.0))
                negative += sum(1 for v in w if v < 0)
                # the weights are the softmax of these very scores / sqrt(d)
                m = max(s)
                e = [math.exp((v - m) / math.sqrt(hs)) for v in s]
                worst_self = max(worst_self, max(abs(a - b / math.fsum(e)) for a, b in zip(w, e)))
    check(rows > 0 and bad_len == 0, name + ": row i has exactly i+1 keys (later keys masked: weight exactly 0)",
          "%d of %d rows have the wrong length" % (bad_len, rows))
    check(rows > 0 and worst_w <= weight_tol,
          name + ": weights equal reference.py within %g (%d rows)" % (weight_tol, rows), "worst error %.3g" % worst_w)
    check(rows > 0 and worst_s <= score_tol, name + ": raw scores q.k equal reference.py within %g relative" % score_tol,
          "worst error %.3g" % worst_s)
    if not loose:
        check(outputs == rows and worst_o <= score_tol,
              name + ": each head's output (sum of weight * value) equals reference.py within %g relative" % score_tol,
              "%d of %d rows with head_size numbers, worst error %.3g" % (outputs, rows, worst_o))
    check(rows > 0 and worst_sum <= sum_tol and negative == 0,
          name + ": every row sums to 1 within %g, no negative weight" % sum_tol,
          "worst |sum-1| %.3g, %d negative" % (worst_sum, negative))
    check(rows > 0 and worst_self <= self_tol, name + ": weights = softmax(scores / sqrt(head_size))",
          "worst error %.3g" % worst_self)


def cmd_jsonl(model, path, n_prompt, name="trace-json"):
    steps = read_jsonl(path, name)
    if not steps:
        return
    errs = [e for i, st in enumerate(steps) for e in schema_errors(st, i)]
    check(not errs, name + ": every step has the documented fields", errs[:3])
    if errs:
        return
    pos_ok = [st["pos"] for st in steps] == list(range(len(steps)))
    chain_ok = all(steps[i]["next"] == steps[i + 1]["token"] for i in range(len(steps) - 1))
    forced = [st["forced"] for st in steps]
    check(pos_ok and chain_ok, name + ": one line per position 0..n-1, each step's next is the next input",
          "positions %s" % [st["pos"] for st in steps][:20])
    check(forced == [True] * (n_prompt - 1) + [False] * (len(steps) - n_prompt + 1),
          name + ": prompt steps are forced:true, generated ones carry a sample", forced)
    tokens = [st["token"] for st in steps]
    config, res = reference(model, tokens)
    full = all(len(st["layers"]) == config["n_layers"] and
               all(len(L["heads"]) == config["n_heads"] for L in st["layers"]) for st in steps)
    check(full, name + ": every layer and head is present", "missing layers or heads")
    compare_attention(steps, res, config, name)
    worst, order_bad = 0.0, 0
    for st in steps:
        ref = res.logits[st["pos"]]
        for c in st["top"]:
            worst = max(worst, abs(c["logit"] - ref[c["id"]]) / max(1.0, abs(ref[c["id"]])))
        logits = [c["logit"] for c in st["top"]]
        order_bad += logits != sorted(logits, reverse=True)
    check(worst <= SCORE_TOL and order_bad == 0, name + ": top logits equal reference.py, largest first",
          "worst error %.3g, %d unsorted" % (worst, order_bad))
    greedy_bad = [st["pos"] for st in steps if not st["forced"] and st["sample"]["method"] == "greedy"
                  and st["next"] != st["top"][0]["id"]]
    check(not greedy_bad, name + ": greedy picks the top logit", "positions %s" % greedy_bad)


def cmd_text_vs_json(text_path, json_path, name="text trace"):
    """The text trace's rows (layer 0 head 0) are the JSON's numbers, rounded;
    its output line the first numbers of the head's output and how many."""
    steps = {st["pos"]: st for st in read_jsonl(json_path, "trace-json (for the text)")}
    text = open(text_path, encoding="utf-8").read()
    blocks = re.split(r"\n== pos (\d+):", text)[1:]
    mismatches, seen, bad_outputs = [], 0, []
    for pos_s, block in zip(blocks[0::2], blocks[1::2]):
        pos = int(pos_s)
        head = steps[pos]["layers"][0]["heads"][0]
        cells = {"weight": [], "q·k": []}
        for line in block.split("\n"):
            m = re.match(r"  (weight|q·k) +(.*)$", line)
            if m:
                cells[m.group(1)] += m.group(2).split()
        want_w = ["%.3f" % v for v in head["weights"]]
        want_s = ["%.2f" % v for v in head["scores"]]
        got_w = [c for c in cells["weight"] if c != "masked"]
        got_s = [c for c in cells["q·k"] if c != "·"]
        if got_w != want_w or got_s != want_s:
            mismatches.append("pos %d: %s vs %s" % (pos, got_w, want_w))
        out = re.search(r"\n  output = Σ weight · value = \[(.*?)(, …\] \((\d+) of (\d+)\)|\])\n", block)
        numbers = out.group(1).split(", ") if out else []
        want_o = ["%.3f" % v for v in head["output"][:len(numbers)]]
        whole = out and (out.group(3) is None and len(numbers) == len(head["output"]) or
                         out.group(3) == str(len(numbers)) and out.group(4) == str(len(head["output"])))
        if not out or not numbers or numbers != want_o or not whole:
            bad_outputs.append("pos %d: %s vs %s" % (pos, out.group(0) if out else "no output line", want_o))
        seen += 1
    check(seen == len(steps) and not mismatches, name + ": its scores and weights are the JSON's (%d steps)" % seen,
          mismatches[:2] or "%d blocks for %d steps" % (seen, len(steps)))
    check(seen == len(steps) and not bad_outputs,
          name + ": its output lines start the JSON's outputs, rounded, and say how many of head_size",
          bad_outputs[:2] or "%d blocks for %d steps" % (seen, len(steps)))


# ---- hostile token text ------------------------------------------------------

WEIRD_PIECES = [b'"q\\\x1b[m', b'\xff\xfeab\xc3(', b'</scri', b'\xe2\x82\xac\x00\n\t', b'\xed\xa0\x80xyz',
                b'\xf0\x9f\x99\x82\x7f ', b'\xe2\x82<&>\r', b'\xc2\x9b2J\xc2\x9d']  # the last: C1 CSI, OSC


def cmd_weird_model(src, dst):
    """A copy of a qkv checkpoint whose 256 byte tokens (<0xNN>, 6 bytes each)
    now hold the 6-byte pieces above: quotes, backslashes, ESC, NUL, bytes
    that are not UTF-8, a surrogate, </script. Same lengths: offsets hold."""
    buf = bytearray(open(src, "rb").read())
    tok_off, = struct.unpack_from("<Q", buf, 72)
    cur, vocab = tok_off + 4, struct.unpack_from("<i", buf, 32)[0]
    changed = 0
    for i in range(vocab):
        n, = struct.unpack_from("<i", buf, cur + 4)
        piece = bytes(buf[cur + 8:cur + 8 + n])
        if re.fullmatch(rb"<0x[0-9A-F]{2}>", piece):
            buf[cur + 8:cur + 8 + n] = WEIRD_PIECES[changed % len(WEIRD_PIECES)]
            changed += 1
        cur += 8 + n
    open(dst, "wb").write(buf)
    check(changed == 256, "hostile tokenizer fixture", "%d byte tokens changed" % changed)


def cmd_small_vocab_model(src, dst):
    """SRC with its vocabulary cut to 280 tokens: a checkpoint that cannot
    read the same token ids."""
    import qkvfile
    config, tensors, tok = qkvfile.read_model(src)
    config = dict(config, vocab_size=280)
    tensors = dict(tensors, tok_embeddings=tensors["tok_embeddings"][:280])
    if "output" in tensors:
        tensors["output"] = tensors["output"][:280]
    qkvfile.write_qkv(dst, config, tensors, qkvfile.Tokenizer(tok.pieces[:280], tok.max_token_length))


def cmd_swapped_pieces_model(src, dst):
    """SRC with the pieces of two token ids swapped: the same vocabulary size
    and the same pieces, but the ids mean other text."""
    import qkvfile
    config, tensors, tok = qkvfile.read_model(src)
    pieces = list(tok.pieces)
    a, b = len(pieces) - 1, len(pieces) - 2
    pieces[a], pieces[b] = pieces[b], pieces[a]
    assert pieces[a] != pieces[b]
    qkvfile.write_qkv(dst, config, tensors, tok._replace(pieces=pieces))


def cmd_control_pieces_model(src, dst):
    """SRC with its start and end pieces spelt as llama2.c's tokenizer.bin
    spells them ("\\n<s>\\n"), where GGUF conversions write "<s>": the same
    token ids."""
    import qkvfile
    config, tensors, tok = qkvfile.read_model(src)
    pieces = list(tok.pieces)
    for i, text in ((1, b"\n<s>\n"), (2, b"\n</s>\n")):
        assert pieces[i][0] != text
        pieces[i] = (text, pieces[i][1])
    qkvfile.write_qkv(dst, config, tensors, tok._replace(pieces=pieces, max_token_length=max(tok.max_token_length, 6)))


def cmd_padded_vocab_model(src, dst, n):
    """SRC with n empty pieces after its own and zero rows for them, as
    export.py writes a nanoGPT model whose vocabulary is padded (50257 to
    50304 for GPT-2)."""
    import numpy as np
    import qkvfile
    config, tensors, tok = qkvfile.read_model(src)
    n = int(n)
    config = dict(config, vocab_size=config["vocab_size"] + n)
    for name in ("tok_embeddings", "output"):
        if name in tensors:
            rows = tensors[name]
            tensors[name] = np.concatenate([rows, np.zeros((n,) + rows.shape[1:], rows.dtype)])
    qkvfile.write_qkv(dst, config, tensors, tok._replace(pieces=list(tok.pieces) + [(b"", 0.0)] * n))


def json_text_of(piece):
    """The documented rule: valid UTF-8 sequences kept, every other byte U+FFFD."""
    out, i = [], 0
    while i < len(piece):
        c = piece[i]
        n = 1 if c < 0x80 else 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 0
        try:
            out.append(piece[i:i + n].decode("utf-8") if n and i + n <= len(piece) else None)
        except UnicodeDecodeError:
            out.append(None)
        if out[-1] is None:
            out[-1], n = "\ufffd", 1
        i += n
    return "".join(out)


def cmd_escapes(model, json_path, text_path, html_path, stdout_path):
    import qkvfile
    _, _, tok = qkvfile.read_model(model)
    pieces = [piece for piece, _ in tok.pieces]
    steps = read_jsonl(json_path, "hostile tokens: JSON")
    wrong, weird_seen = [], 0
    for st in steps:
        pairs = [(st["token"], st["piece"]), (st["next"], st["next_piece"])] + [(c["id"], c["piece"]) for c in st["top"]]
        for tid, text in pairs:
            weird_seen += pieces[tid] in WEIRD_PIECES
            if text != json_text_of(pieces[tid]):
                wrong.append("id %d: %r for %r" % (tid, text, pieces[tid]))
    check(weird_seen > 0 and not wrong, "hostile tokens: JSON strings keep valid UTF-8, U+FFFD per bad byte "
          "(%d hostile pieces seen)" % weird_seen, wrong[:2] or "no hostile piece in the run")
    text = open(text_path, "rb").read()
    try:
        text.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    controls = sorted(set(b for b in text if b < 0x20 and b not in (0x0A,)) | ({0x7F} & set(text)))
    c1 = re.search(rb"\xc2[\x80-\x9f]", text)
    check(valid and not controls and not c1 and b"\\x1B" in text and b"\\u009B" in text,
          "hostile tokens: the text trace is valid UTF-8 with control bytes escaped (\\x1B, \\xFF; C1 as \\u009B)",
          "valid %s, raw control bytes %s, raw C1 %s" % (valid, controls, c1))
    out = open(stdout_path, "rb").read()
    check(b"\x1b" not in out and not re.search(rb"\xc2[\x80-\x9f]", out),
          "hostile tokens: no ESC or C1 control reaches stdout", "ESC or C1 on stdout")
    data = html_data(html_path, "hostile tokens: HTML")
    if data is not None:
        got = [t["piece"] for t in data["tokens"]]
        want = [json_text_of(pieces[t["id"]]) for t in data["tokens"]]
        check(got == want, "hostile tokens: the HTML page's data parses and keeps every piece", "pieces differ")


# ---- the HTML page -------------------------------------------------------------

def html_data(path, name):
    page = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="qkv-data" type="application/json">(.*?)</script>', page, re.S)
    try:
        data = json.loads(m.group(1))
        ok(name + ": the embedded data ends at its own </script> and parses")
        return data
    except (AttributeError, ValueError) as e:
        fail(name + ": the embedded data ends at its own </script> and parses", e)
        return None


def cmd_html(path, model, compare=None):
    name = "html"
    page = open(path, encoding="utf-8").read()
    external = re.findall(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//|@import|url\(\s*["\']?https?:', page)
    check(not external and "<style>" in page and "<script>" in page,
          name + ": one self-contained page (inline CSS and JS, nothing fetched)", external[:3])
    data = html_data(path, name)
    if data is None:
        return
    runs = data["runs"]
    check(len(runs) == (2 if compare else 1), name + ": one run per model", "%d runs" % len(runs))
    tokens = [t["id"] for t in data["tokens"]][:-1]
    for run, path_ in zip(runs, [model, compare]):
        steps = run["steps"]
        check([s["token"] for s in steps] == tokens and [s["pos"] for s in steps] == list(range(len(tokens))),
              name + ": %s has a row for every position of prompt and generation" % run["name"], "rows differ")
        config, res = reference(path_, tokens)
        # the page keeps 6 significant digits: 5e-7 relative more
        compare_attention(steps, res, config, "%s %s" % (name, run["name"]), digits=6)


# ---- the terminal ----------------------------------------------------------------

def run_in_pty(argv, keys, env=None, timeout=10.0, size=None):
    """Runs argv on a pseudo-terminal (stdin, stdout and stderr), of size
    (columns, rows) if given, typing each of keys after a pause prompt
    appears. Returns everything it printed."""
    pid, fd = pty.fork()
    if pid == 0:
        if size:
            import fcntl, struct, termios
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        os.execvpe(argv[0], argv, env or os.environ)
    out, pending, deadline = b"", list(keys), time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            while pending and out.count(b"[q] quit") > len(keys) - len(pending):
                os.write(fd, pending.pop(0))
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return out.decode("utf-8", "replace")


def generated(out):
    m = re.search(r"achieved tok/s: (?:[0-9.]+|-) \((\d+) generated", out)
    return int(m.group(1)) if m else -1


def cmd_step(argv):
    out = run_in_pty(argv, [b"q\n"])
    check(out.count("[q] quit") == 1 and generated(out) == 1, "step mode: q quits after the first token",
          "pauses %d, generated %d" % (out.count("[q] quit"), generated(out)))
    out = run_in_pty(argv, [b"\n", b"\n", b"q\n"])
    check(out.count("[q] quit") == 3 and generated(out) == 3, "step mode: Enter goes one token further",
          "pauses %d, generated %d" % (out.count("[q] quit"), generated(out)))
    # Ctrl+Right's ESC [ 1 ; 5 C is one key (the next head), none of its
    # bytes another: its C was taken for c, which ran to the end
    out = run_in_pty(argv, [b"\x1b[1;5C", b"q"])
    check(out.count("[q] quit") == 2 and generated(out) == 1 and "not a key" not in out,
          "step mode: an escape sequence with parameters (Ctrl+Right) is one key, an arrow",
          "pauses %d, generated %d, 'not a key' %d times" % (out.count("[q] quit"), generated(out), out.count("not a key")))
    full = generated(run_in_pty([a for a in argv if a != "--step"], []))
    out = run_in_pty(argv, [b"\n", b"c\n"])
    check(out.count("[q] quit") == 2 and generated(out) == full > 2, "step mode: c runs to the end without pausing",
          "pauses %d, generated %d of %d" % (out.count("[q] quit"), generated(out), full))


def cmd_step_screen(argv):
    """The step view in a small terminal (80 columns, 20 rows), with the text
    trace in a file: the view's lines fit the terminal's width (not the
    file's 106 columns), and when a line per head would take more than half
    the rows, only the chosen layer's heads are listed, with a note."""
    out = run_in_pty(argv, [b"j", b"q"], {**os.environ, "NO_COLOR": "1"}, size=(80, 20))
    lines = out.replace("\r", "").split("\n")
    view = [l for l in lines if not l.startswith("achieved tok/s")]
    wide = [l for l in view if len(l) > 80]
    heads = [l for l in lines if re.match(r"^[ >] L\d+ H\d+ ", l)]
    layers = sorted({re.match(r"^[ >] (L\d+)", l).group(1) for l in heads})
    ends = [i for i, l in enumerate(lines) if l.startswith(PROMPT_LINE)]
    rows = [screen_rows(lines[a + 1:b + 1], 80) for a, b in zip([-1] + ends, ends)]
    check(not wide and len(heads) == 8 and "> L0 H0 " in out and "> L1 H0 " in out and layers == ["L0", "L1"]
          and out.count("(layer ") == 2 and len(rows) == 2 and max(rows) <= 20,
          "step view at 80 x 20, the text trace in a file: lines fit, the chosen layer's heads only "
          "(j moves it), each view within the 20 rows",
          "%d wide (%r), %d head lines of %s, rows %s" % (len(wide), wide[:3], len(heads), layers, rows))


PROMPT_LINE = "-- [Enter] next token"


def screen_rows(lines, width):
    """Rows the lines take on a terminal width columns wide (they wrap)."""
    return sum(max(1, (len(l) + width - 1) // width) for l in lines)


def table_weights(lines, head_line):
    """{key position: weight} of the table under head_line (the text
    trace's blocks of "key pos" and "weight" rows, as far as its summary
    or note)."""
    i, weights, positions = lines.index(head_line) + 1, {}, []
    while i < len(lines) and lines[i].startswith("  ") and not lines[i].startswith("  ("):
        cells = lines[i].split()
        if lines[i].startswith("  key pos"):
            positions = [int(c) for c in cells[2:]]
        elif cells[0] == "weight":
            weights.update(zip(positions, [float(c) for c in cells[1:]]))
        elif cells[0] == "sum":
            break
        i += 1
    return weights


def cmd_step_fit(trace_path, argv):
    """Step mode at 80 x 24 on a model whose view would not fit (the stories
    model: 36 heads, a table of every key): each view fits the rows with its
    prompt line; once the table of every key would not, the chosen head's
    table shows the 8 keys with the most weight, which are the 8 largest of
    the head's row in the text trace's file (its full table) at that step,
    with the same weights; a shows the layer's heads over 8 keys likewise."""
    keys = [b"\n"] * 14 + [b"a", b"q"]
    out = run_in_pty(argv, keys, {**os.environ, "NO_COLOR": "1"}, size=(80, 24), timeout=30)
    lines = out.replace("\r", "").split("\n")
    ends = [i for i, l in enumerate(lines) if l.startswith(PROMPT_LINE)]
    views = [lines[a + 1:b + 1] for a, b in zip([-1] + ends, ends)]
    tall = [screen_rows(v, 80) for v in views if screen_rows(v, 80) > 24]
    head_view = views[-2] if len(views) >= 2 else []
    note = [l for l in head_view if re.match(r"^  \(8 of \d+ keys shown, the most attended: weight [01]\.\d{3} of 1\.0000", l)]
    pos = [int(m.group(1)) for l in head_view for m in [re.match(r"^== pos (\d+):", l)] if m]
    shown, full = {}, {}
    if note and pos:
        shown = table_weights(head_view, next(l for l in head_view if l.startswith("layer 0 head 0 ")))
        text = open(trace_path).read().split("\n")
        block = text[text.index(next(l for l in text if l.startswith("== pos %d:" % pos[0]))):]
        full = table_weights(block, next(l for l in block if l.startswith("layer 0 head 0 ")))
    largest = sorted(full, key=lambda p: -full[p])[:8]
    held = float(re.search(r"attended: weight ([01]\.\d{3}) of", note[0]).group(1)) if note else -1
    check(len(views) == 16 and not tall and note and len(full) == pos[0] + 1 and sorted(shown) == sorted(largest)
          and abs(held - sum(shown.values())) <= 0.0005 * (len(shown) + 1)
          and all(abs(shown[p] - full[p]) < 6e-4 for p in shown) and any("sees every cached key" in l for l in head_view),
          "step view at 80 x 24 on the stories model: every view fits its rows; a table too tall for them shows "
          "the 8 most attended keys, as the full table in the trace file has them, and the weight they hold (their "
          "sum); the mask in words",
          "%d views, rows over 24: %s, note %s (the shown keys' weight %.3f), shown %s, file's 8 largest %s"
          % (len(views), tall, note, sum(shown.values()), shown, largest))
    # the shortened table keeps the head's output: the file's first numbers
    numbers = lambda line: re.findall(r"-?\d+\.\d{3}", line.split("[", 1)[1]) if line else []
    in_view = next((l for l in head_view if l.startswith("  output = ")), None)
    in_file = next((l for l in block if l.startswith("  output = ")), None) if note and pos else None
    shown_out = numbers(in_view)
    check(len(shown_out) >= 4 and shown_out == numbers(in_file)[:len(shown_out)] and in_view.endswith(" of 48)"),
          "step view at 80 x 24 on the stories model: the shortened table keeps the head's output line, the first "
          "numbers of the trace file's", "view %r, file %r" % (in_view, in_file))
    grid = views[-1]
    rows = [l for l in grid if re.match(r"^  [ >] H\d ", l)]
    check(any(l.startswith("layer 0: every head's weights") for l in grid) and len(rows) == 6
          and all(len(l.split()) - (2 if l.startswith("  >") else 1) == 8 for l in rows)
          and any("8 of %d keys shown, those some head weighs most" % (pos[0] + 1) in l for l in grid if pos)
          and screen_rows(grid, 80) <= 24,
          "step view's a at 80 x 24: the layer's 6 heads over the 8 keys some head weighs most, within the rows",
          "\n".join(grid))


def cmd_step_rows(argv):
    """Every view of a run fits 80 x 24 with its prompt line (Enter 8 times,
    then a, j, m, Enter): the view gives up, level by level, what does not fit."""
    keys = [b"\n"] * 8 + [b"a", b"j", b"m", b"\n", b"q"]
    out = run_in_pty(argv, keys, {**os.environ, "NO_COLOR": "1"}, size=(80, 24), timeout=30)
    lines = out.replace("\r", "").split("\n")
    ends = [i for i, l in enumerate(lines) if l.startswith(PROMPT_LINE)]
    views = [lines[a + 1:b + 1] for a, b in zip([-1] + ends, ends)]
    rows = [screen_rows(v, 80) for v in views]
    matrices = sum(any("the weights of the last" in l for l in v) for v in views)
    check(len(views) == 13 and matrices == 2 and max(rows) <= 24 and all(any(l.startswith("== pos") for l in v) for v in views),
          "step view at 80 x 24 of %s: all %d views within the rows, each with its step's line"
          % (os.path.basename(argv[1]), len(views)), "rows %s, %d matrix views (m)" % (rows, matrices))


def columns(line):
    """Terminal columns of a line (the oracle: Python's unicodedata, East
    Asian Wide and Fullwidth characters two; colours none)"""
    import unicodedata
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return sum(2 if unicodedata.category(c) != "Cn" and unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def cmd_step_width(cols, argv):
    """Step mode in a terminal cols columns wide: Enter, ?, a, Enter, q;
    every line of every view, the keys' help and the prompts within the
    width, counted in the terminal's columns (a CJK character takes two)"""
    keys = [b"\n", b"?", b"a", b"\n", b"q"]
    away = ["sh", "-c", 'exec "$@" >/dev/null', "sh"] + argv  # the text itself wraps as text does
    out = run_in_pty(away, keys, {**os.environ, "NO_COLOR": "1"}, size=(int(cols), 24), timeout=30)
    lines = [l for l in out.replace("\r", "").split("\n") if not l.startswith("achieved tok/s")]
    wide = [(columns(l), l) for l in lines if columns(l) > int(cols)]
    check(out.count("[q] quit") == len(keys) and generated(out) == 3 and not wide,
          "step mode at %s columns (%s %s): every line within them, wide characters counted as two"
          % (cols, os.path.basename(argv[1]), " ".join(argv[2:])[:60]),
          "%d prompts, %d generated; %d lines wider: %r" % (out.count("[q] quit"), generated(out), len(wide), wide[:3]))


def cmd_colour(argv):
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    out = run_in_pty(argv, [], env)
    check("\x1b[48;5;" in out, "colour: ANSI 256-colour heat when the trace goes to a terminal", "no colour codes")
    env["NO_COLOR"] = "1"
    out = run_in_pty(argv, [], env)
    check("\x1b[" not in out and "weight" in out, "colour: none with NO_COLOR set", "colour codes with NO_COLOR")


# ---- the README's samples -----------------------------------------------------

def readme_blocks(readme):
    """The README's code blocks: (first line, the other non-empty lines)."""
    blocks, block = [], None
    for line in open(readme, encoding="utf-8").read().split("\n"):
        if line.startswith("```"):
            if block is not None and block:
                blocks.append((block[0], [l for l in block[1:] if l]))
            block = [] if block is None else None
        elif block is not None:
            block.append(line)
    return blocks


def run_shown(command, cwd):
    """Runs a README command line ($ ./run ...); returns stdout + stderr."""
    import shlex
    import subprocess
    argv = shlex.split(command[2:])
    out = subprocess.run(argv, cwd=cwd, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return (out.stdout + out.stderr).decode("utf-8", "replace")


def cmd_readme(readme):
    """Every README block that starts with `$ ./run ... --trace` shows lines
    that the command prints, in order ("..." stands for lines left out): a
    retrained model cannot leave them stale."""
    cwd = os.path.dirname(os.path.abspath(readme))
    shown = [(c, lines) for c, lines in readme_blocks(readme) if c.startswith("$ ./run ") and "--trace" in c]
    for command, lines in shown:
        printed, at, missing = run_shown(command, cwd).split("\n"), 0, None
        for line in lines:
            if line == "...":  # lines left out of the sample
                continue
            while at < len(printed) and printed[at] != line:
                at += 1
            if at == len(printed):
                missing = line
                break
        check(missing is None, "README: %s prints the lines shown" % command[2:], "not printed: %r" % missing)
    check(len(shown) >= 3, "README: its trace samples are checked", "%d found" % len(shown))
    # the figures quoted in words under the explorer's screenshot
    text = open(readme, encoding="utf-8").read()
    start = text.find("In the trained model")
    words = text[start:text.find("```", start)] if start >= 0 else ""
    printed = "".join(run_shown(c, cwd) for c, _ in shown if "grammar" in c)
    figures = re.findall(r"\b0\.\d+", words)
    missing = [f for f in figures if f not in printed]
    check(len(figures) >= 4 and not missing, "README: the explorer's quoted figures (%s) are printed by its commands"
          % ", ".join(figures), "missing %s" % missing)


# The commands whose arguments are the command line's, as given
COMMANDS = {
    "text-vs-json": cmd_text_vs_json,
    "weird-model": cmd_weird_model,
    "small-vocab-model": cmd_small_vocab_model,
    "swapped-pieces-model": cmd_swapped_pieces_model,
    "control-pieces-model": cmd_control_pieces_model,
    "padded-vocab-model": cmd_padded_vocab_model,
    "escapes": cmd_escapes,
    "html": cmd_html,
    "kv-type": cmd_kv_type,
}


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "readme":
        cmd_readme(*args)
        return
    if cmd in COMMANDS:
        COMMANDS[cmd](*args)
    elif cmd == "jsonl":
        cmd_jsonl(args[0], args[1], int(args[2]), *args[3:])
    elif cmd == "step":
        cmd_step(args)
    elif cmd == "step-screen":
        cmd_step_screen(args)
    elif cmd == "step-rows":
        cmd_step_rows(args)
    elif cmd == "step-fit":
        cmd_step_fit(args[0], args[1:])
    elif cmd == "step-width":
        cmd_step_width(args[0], args[1:])
    elif cmd == "colour":
        cmd_colour(args)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
