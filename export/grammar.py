#!/usr/bin/python3
"""A small probabilistic grammar of lowercase English, for the grammar model.

    python3 export/grammar.py --sentences N --seed S > corpus.txt
    python3 export/grammar.py --check FILE      # fraction valid, lists invalid ones
    python3 export/grammar.py --vocab           # the word list (tokenizer pieces)

Sentences are words separated by single spaces, ending in " ." :
    the cat sat on the mat .
    the dogs that the old fox chases sleep near the river bank .
    an owl sees the children and the birds were happy .

Grammar (features: number sg/pl, noun type animate/thing, tense present/past):
    S      -> CLAUSE (("and" | "but") CLAUSE)* "."
    CLAUSE -> NP(any, REL allowed) VP(num, type, tense)       subject-verb agreement
    NP     -> DET(num) [SIZE] [QUALITY] [COLOUR] [MODNOUN] NOUN(num) [PP] [REL]
              adjectives: at most one per class, in that order ("the big old red ball");
              DET "a"/"an" must match the next word (vowel letter -> "an");
              MODNOUN ("river bank"): river/garden/apple/stone, only before a
              thing noun that is not itself a modifier noun;
              REL only on the subject and the verb object of a main clause
    PP     -> PREP NP(thing, no REL)                                (right-recursive)
    REL    -> "that" VP(num, type of the head, no REL inside)       "the cat that sleeps"
            | "that" NP(animate, no REL) VT(agrees with that NP)   "the cat that the dogs chase"
    VP     -> BE(num, tense) (ADJ | PP)                             "is happy", "were on the hill"
            | animate: VI [PP | ADV] | VT NP(any) [ADV]
            | thing:   VI_THING [ADV]                               "the river bank floods"
Agreement: present singular "sits", present plural "sit", past "sat" for both;
"is/are", "was/were".  Nouns: animate (cat, owls, children ...) are subjects of
VI/VT; things (mat, river, bank ...) take VI_THING (floods, falls, shakes)
and are the objects of prepositions.  check() is a real recursive parser of
this grammar (independent of the generator).
"""
import argparse
import random
import sys

import cli  # one-line errors

DET_SG = ["the", "a", "this", "every"]
DET_PL = ["the", "these", "some", "two", "many"]
# adjectives come in a fixed order: size, then quality, then colour ("the big old red ball")
ADJ_SIZE = ["big", "small", "little"]
ADJ_QUAL = ["old", "happy", "angry", "sleepy"]
ADJ_COLOUR = ["red", "brown", "green"]
ADJ = ADJ_SIZE + ADJ_QUAL + ADJ_COLOUR
ADJ_CLASSES = (ADJ_SIZE, ADJ_QUAL, ADJ_COLOUR)
ADV = ["quickly", "slowly", "again", "today"]
N_ANIMATE = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("fox", "foxes"),
             ("owl", "owls"), ("mouse", "mice"), ("child", "children"), ("girl", "girls"),
             ("boy", "boys"), ("man", "men")]
N_THING = [("mat", "mats"), ("river", "rivers"), ("bank", "banks"), ("tree", "trees"),
           ("house", "houses"), ("box", "boxes"), ("ball", "balls"), ("garden", "gardens"),
           ("hill", "hills"), ("apple", "apples"), ("stone", "stones"), ("bridge", "bridges")]
# noun modifiers ("river bank"): singular thing nouns that never head a compound
MODNOUNS = ["river", "garden", "apple", "stone"]
COMPOUND_HEADS = [n for n in N_THING if n[0] not in MODNOUNS]
PREP = ["on", "under", "near", "in", "behind"]
# (present 3sg, present plural, past)
VI = [("sits", "sit", "sat"), ("sleeps", "sleep", "slept"), ("runs", "run", "ran"),
      ("plays", "play", "played"), ("sings", "sing", "sang"), ("jumps", "jump", "jumped")]
VT = [("chases", "chase", "chased"), ("sees", "see", "saw"), ("likes", "like", "liked"),
      ("follows", "follow", "followed"), ("finds", "find", "found"),
      ("watches", "watch", "watched")]
VI_THING = [("floods", "flood", "flooded"), ("falls", "fall", "fell"),
            ("shakes", "shake", "shook")]
BE = {("sg", "present"): "is", ("pl", "present"): "are",
      ("sg", "past"): "was", ("pl", "past"): "were"}
CONJ = ["and", "but"]
END = "."

VOWELS = set("aeiou")


def vocabulary():
    """Every word the grammar can produce, with its leading space (tokenizer pieces)."""
    words = ["a", "an", "that"] + DET_SG + DET_PL + ADJ + ADV + PREP + CONJ
    for sg, pl in N_ANIMATE + N_THING:
        words += [sg, pl]
    for forms in VI + VT + VI_THING:
        words += list(forms)
    words += list(BE.values()) + [END]
    seen, out = set(), []
    for w in words:
        if w not in seen:
            seen.add(w)
            out.append(" " + w)
    return out


# ---------------------------------------------------------------------------
# generator
class Gen:
    def __init__(self, rng):
        self.r = rng

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    def verb(self, table, num, tense):
        forms = self.pick(table)
        if tense == "past":
            return forms[2]
        return forms[0] if num == "sg" else forms[1]

    def np(self, kind, rel=False, pp=0.12):
        """kind: 'animate', 'thing' or 'any'.  Returns (words, num, type)."""
        r = self.r
        num = "sg" if r.random() < 0.55 else "pl"
        typ = kind if kind != "any" else ("animate" if r.random() < 0.6 else "thing")
        det = self.pick(DET_SG if num == "sg" else DET_PL)
        body = []
        for cls, p in zip(ADJ_CLASSES, (0.15, 0.2, 0.15)):
            if r.random() < p:
                body.append(self.pick(cls))
        if typ == "thing" and r.random() < 0.2:
            body.append(self.pick(MODNOUNS))
            sg, pl = self.pick(COMPOUND_HEADS)
        else:
            sg, pl = self.pick(N_ANIMATE if typ == "animate" else N_THING)
        body.append(sg if num == "sg" else pl)
        if det == "a" and body[0][0] in VOWELS:
            det = "an"
        words = [det] + body
        if r.random() < pp:
            words += self.pp()
        if rel and r.random() < 0.15:
            words += self.rel(num, typ)
        return words, num, typ

    def pp(self):
        w, _, _ = self.np("thing", pp=0.1)
        return [self.pick(PREP)] + w

    def rel(self, num, typ):
        r = self.r
        tense = "present" if r.random() < 0.5 else "past"
        if r.random() < 0.5:  # subject relative: "that sleeps", "that chases the dog"
            return ["that"] + self.vp(num, typ, tense, inner=True)
        w, n2, _ = self.np("animate")  # object relative: "that the dogs chase"
        return ["that"] + w + [self.verb(VT, n2, tense)]

    def vp(self, num, typ, tense, inner=False):
        r = self.r
        x = r.random()
        if x < 0.2:
            be = BE[(num, tense)]
            if r.random() < 0.6:
                return [be, self.pick(ADJ)]
            return [be] + self.pp()
        if typ == "thing":
            out = [self.verb(VI_THING, num, tense)]
            if r.random() < 0.3:
                out.append(self.pick(ADV))
            return out
        if x < 0.55:
            out = [self.verb(VI, num, tense)]
            y = r.random()
            if y < 0.4:
                out += self.pp()
            elif y < 0.6:
                out.append(self.pick(ADV))
            return out
        out = [self.verb(VT, num, tense)]
        w, _, _ = self.np("any", rel=not inner and r.random() < 0.5)
        out += w
        if r.random() < 0.15:
            out.append(self.pick(ADV))
        return out

    def clause(self):
        w, num, typ = self.np("any", rel=True)
        tense = "present" if self.r.random() < 0.5 else "past"
        return w + self.vp(num, typ, tense)

    def sentence(self):
        w = self.clause()
        while self.r.random() < 0.2:
            w += [self.pick(CONJ)] + self.clause()
        return " ".join(w + [END])


def generate(n, seed):
    """n sentences (strings ending in ' .'), deterministic for a seed."""
    g = Gen(random.Random(seed))
    return [g.sentence() for _ in range(n)]


# ---------------------------------------------------------------------------
# recogniser: a recursive-descent parser returning every way to parse a prefix
def _index():
    noun = {}
    for typ, table in (("animate", N_ANIMATE), ("thing", N_THING)):
        for sg, pl in table:
            noun[sg] = (typ, "sg")
            noun[pl] = (typ, "pl")
    verbs = {}
    for cls, table in (("vi", VI), ("vt", VT), ("vthing", VI_THING)):
        for f in table:
            verbs.setdefault(f[0], set()).add((cls, "sg", "present"))
            verbs.setdefault(f[1], set()).add((cls, "pl", "present"))
            verbs.setdefault(f[2], set()).add((cls, None, "past"))
    be = {v: k for k, v in BE.items()}
    return noun, verbs, be


NOUN, VERBS, BE_INV = _index()
DET_NUM = {}
for _d in DET_SG:
    DET_NUM.setdefault(_d, set()).add("sg")
for _d in DET_PL:
    DET_NUM.setdefault(_d, set()).add("pl")
DET_NUM["an"] = {"sg"}
ADJ_SET, ADV_SET, PREP_SET = set(ADJ), set(ADV), set(PREP)
ADJ_CLASS_SETS = [set(c) for c in ADJ_CLASSES]
MOD_SET = set(MODNOUNS)
NOUN_SG = {pl: sg for sg, pl in N_ANIMATE + N_THING}
NOUN_SG.update({sg: sg for sg, pl in N_ANIMATE + N_THING})


class Parser:
    def __init__(self, toks):
        self.t = toks

    def at(self, i):
        return self.t[i] if i < len(self.t) else None

    def np(self, i, kind, rel=False):
        """Yield (end, num, type) for every NP starting at i."""
        t = self.t
        d = self.at(i)
        if d not in DET_NUM or self.at(i + 1) is None:
            return
        nums = DET_NUM[d]
        j = i + 1
        if d == "a" and t[j][0] in VOWELS:
            return
        if d == "an" and t[j][0] not in VOWELS:
            return
        k = j
        for cls in ADJ_CLASS_SETS:  # at most one adjective per class, in class order
            if self.at(k) in cls:
                k += 1
        for m_end, mod in ((k, None), (k + 1, self.at(k))):
            if mod is not None and mod not in MOD_SET:
                continue
            w = self.at(m_end)
            if w not in NOUN:
                continue
            typ, num = NOUN[w]
            if num not in nums or (kind != "any" and typ != kind):
                continue
            if mod is not None and (typ != "thing" or w in MOD_SET or NOUN_SG.get(w) in MOD_SET):
                continue
            end = m_end + 1
            for e in [end] + list(self.pp(end)):
                yield e, num, typ
                if rel:
                    for e2 in self.rel(e, num, typ):
                        yield e2, num, typ

    def pp(self, i):
        if self.at(i) in PREP_SET:
            for e in {e for e, _, _ in self.np(i + 1, "thing")}:
                yield e

    def rel(self, i, num, typ):
        if self.at(i) != "that":
            return
        ends = set()
        for tense in ("present", "past"):
            ends.update(self.vp(i + 1, num, typ, tense, inner=True))
        for e, n2, _ in self.np(i + 1, "animate"):
            if self.verb_ok(e, "vt", n2, None):
                ends.add(e + 1)
        yield from ends

    def verb_ok(self, i, cls, num, tense):
        w = self.at(i)
        for c, n, tn in VERBS.get(w, ()):
            if c != cls:
                continue
            if tn == "past" and tense in (None, "past"):
                return True
            if tn == "present" and n == num and tense in (None, "present"):
                return True
        return False

    def vp(self, i, num, typ, tense, inner=False):
        w = self.at(i)
        if w in BE_INV:
            n, tn = BE_INV[w]
            if n == num and tn == tense:
                if self.at(i + 1) in ADJ_SET:
                    yield i + 2
                yield from self.pp(i + 1)
            return
        if typ == "thing":
            if self.verb_ok(i, "vthing", num, tense):
                yield i + 1
                if self.at(i + 1) in ADV_SET:
                    yield i + 2
            return
        if self.verb_ok(i, "vi", num, tense):
            yield i + 1
            yield from self.pp(i + 1)
            if self.at(i + 1) in ADV_SET:
                yield i + 2
        if self.verb_ok(i, "vt", num, tense):
            for e in {e for e, _, _ in self.np(i + 1, "any", rel=not inner)}:
                yield e
                if self.at(e) in ADV_SET:
                    yield e + 1

    def clause(self, i):
        ends = set()
        for e, num, typ in self.np(i, "any", rel=True):
            for tense in ("present", "past"):
                ends.update(self.vp(e, num, typ, tense))
        return ends

    def sentence(self):
        n = len(self.t)
        if n < 2 or self.t[-1] != END:
            return False
        frontier = {0}  # positions where a clause may start
        seen = set()
        while frontier:
            i = frontier.pop()
            seen.add(i)
            for e in self.clause(i):
                if e == n - 1:
                    return True
                if self.at(e) in CONJ and e + 1 not in seen:
                    frontier.add(e + 1)
        return False


def check(sentence):
    """True iff the sentence is in the grammar's language ("." may be attached)."""
    s = sentence.strip()
    if s.endswith(".") and not s.endswith(" ."):
        s = s[:-1] + " ."
    toks = s.split(" ")
    if any(t == "" for t in toks):
        return False
    return Parser(toks).sentence()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, help="write N generated sentences to stdout")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", metavar="FILE", help="check one sentence per line ('-' = stdin)")
    ap.add_argument("--vocab", action="store_true", help="print the vocabulary, one word per line")
    args = ap.parse_args()
    if args.vocab:
        for w in vocabulary():
            print(w[1:])
    elif args.sentences is not None:
        out = sys.stdout
        for s in generate(args.sentences, args.seed):
            out.write(s + "\n")
    elif args.check:
        f = sys.stdin if args.check == "-" else open(args.check, encoding="utf-8")
        lines = [l.rstrip("\n") for l in f if l.strip()]
        bad = [l for l in lines if not check(l)]
        n = len(lines)
        print("valid %d/%d = %.4f" % (n - len(bad), n, (n - len(bad)) / max(n, 1)))
        for l in bad:
            print("INVALID: " + l)
    else:
        ap.print_help()


if __name__ == "__main__":
    cli.run(main)
