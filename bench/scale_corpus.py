"""The corpus of the scale benchmark: every sentence of the shared corpora,
labelled by its source corpus, parsed by spaCy into a corpus store.

    python bench/scale_corpus.py collect --data ../shared/data --out /work/scale-data/sentences.tsv
    python bench/scale_corpus.py prepare --tsv /work/scale-data/sentences.tsv --out /work/scale-data/real.zarr
    python bench/scale_corpus.py generate --corpus /work/scale-data/real.zarr --n 200000 \\
        --seed 0 --out /work/scale-data/all.jsonl
    gramtile prepare --input /work/scale-data/all.jsonl --format jsonl --reps dep,tree \\
        --out /work/scale-data/all.zarr --cluster sequential

``collect`` reads each corpus in place and writes one ``label<TAB>text`` line per sentence
(label = the source corpus; text = the sentence's tokens joined by single spaces, or its raw
text where the corpus has one), so ``prepare`` is the ordinary ``gramtile prepare --format tsv``
parse (spaCy tokenises and parses every text itself; its ``dep``, ``seq``, ``tree`` and ``ptree``
representations are stored). What counts as one sentence:

=========================  =========================================================  =====
label                      source, one example per ...                                 n
=========================  =========================================================  =====
``trec``                   TREC QC ``train.txt`` + ``test.txt``: question               5,952
``semeval``                SemEval-2010 task 8 ``TRAIN_FILE.TXT``: sentence, tags off   8,000
``senseval``               Senseval ``hard``/``line``/``serve.pos``: instance context  12,857
``conll2000``              CoNLL-2000 ``train.txt`` + ``test.txt``: sentence           10,948
``conll04``                CoNLL04 ``conll04.corp``: sentence (``/`` split, COMMA ,)     5,516
``ud_ewt``                 UD English EWT dev: sentence (its ``# text``)                2,001
``wsj_dep``                NLTK dependency treebank ``wsj_*.dp``: sentence              3,914
``geoquery``               GeoQuery 880: question                                         880
=========================  =========================================================  =====

``generate`` writes the real examples' parses and then the synthetic examples that take the
corpus to 200,000, made from the stored parses with a fixed seed (see
:func:`generate` for exactly how), into one JSON-lines file: rows 0..50,067 of the store
prepared from it are the real corpus, so ``--rows 0:n`` selects the first n examples.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.readers.jsonl import write_jsonl
from gramtile.pipeline.representations.encode import decode
from gramtile.pipeline.representations.structures import DepTree, Document
from gramtile.pipeline.stores.corpus_store import CorpusStore


def _trec(d: Path):
    for name in ("train.txt", "test.txt"):
        for doc in read(d / "trec_qc" / name, "trec"):
            yield doc.text


def _semeval(d: Path):
    with open(d / "semeval2010_task8_train" / "TRAIN_FILE.TXT", encoding="ascii") as f:
        for line in f:
            m = re.match(r'^\d+\t"(.*)"\s*$', line)
            if m:
                yield re.sub(r"</?e[12]>", "", m.group(1))


def _senseval(d: Path):
    for word in ("hard", "line", "serve"):
        for doc in read(d / "senseval_hard_line_serve" / f"{word}.pos", "senseval"):
            yield doc.text


def _conll2000(d: Path):
    for name in ("train.txt", "test.txt"):
        words = []
        with open(d / "conll2000" / name, encoding="ascii") as f:
            for line in f:
                if line.strip():
                    words.append(line.split()[0])
                elif words:
                    yield " ".join(words)
                    words = []
        if words:
            yield " ".join(words)


_C04 = {"COMMA": ",", "-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}"}


def _conll04(d: Path):
    words, in_table = [], True
    with open(d / "conll04" / "conll04.corp", encoding="ascii") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 9:
                if not in_table and words:  # a new sentence after the previous one's relations
                    yield " ".join(words)
                    words = []
                in_table = True
                words += [_C04.get(w, w) for w in cols[5].split("/")]
            elif not line.strip():
                in_table = False
    if words:
        yield " ".join(words)


def _ud(d: Path):
    for doc in read(d / "ud_english_ewt_dev" / "en_ewt-ud-dev.conllu", "conllu"):
        yield doc.text or " ".join(doc.structures["dep"].words)


def _wsj(d: Path):
    for doc in read(d / "dependency_treebank", "dp"):
        yield " ".join(doc.structures["dep"].words)


def _geo(d: Path):
    with open(d / "geoquery880" / "geoqueries880", encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^parse\(\[(.*?)\],", line)
            if m:
                yield " ".join(w.strip("'") for w in m.group(1).split(","))


SOURCES = {"trec": _trec, "semeval": _semeval, "senseval": _senseval, "conll2000": _conll2000,
           "conll04": _conll04, "ud_ewt": _ud, "wsj_dep": _wsj, "geoquery": _geo}


def collect(data, out) -> dict:
    """Write ``label<TAB>text`` for every sentence; return the count per label."""
    data, counts = Path(data), {}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for label, fn in SOURCES.items():
            n = 0
            for text in fn(data):
                text = " ".join(html.unescape(text).split())
                if text:
                    f.write(f"{label}\t{text}\n")
                    n += 1
            counts[label] = n
    return counts


# -- the generator -------------------------------------------------------------------------------

def _subtree(heads, i):
    """Sorted token indices of token ``i``'s subtree (``heads`` 0-based, -1 = root)."""
    children = {}
    for k, h in enumerate(heads):
        children.setdefault(h, []).append(k)
    out, stack = [], [i]
    while stack:
        k = stack.pop()
        out.append(k)
        stack += children.get(k, [])
    return sorted(out)


def graft(target: DepTree, t: int, donor: DepTree, d: int) -> DepTree:
    """``target`` with the subtree of its token ``t`` replaced by the subtree of ``donor``'s token
    ``d``, attached to ``t``'s head with ``t``'s relation, tokens kept in surface order (the donor
    subtree's tokens take the place of ``t``'s first token)."""
    tspan = set(_subtree(target.heads, t))
    dspan = _subtree(donor.heads, d)
    first = min(tspan)
    keep = [i for i in range(len(target.words)) if i not in tspan]
    order = [("t", i) for i in keep if i < first] + [("d", j) for j in dspan] + [("t", i) for i in keep if i > first]
    at = {key: k for k, key in enumerate(order)}
    cols = {"words": [], "pos": [], "lemmas": [], "heads": [], "deprels": []}
    for src, i in order:
        tree = target if src == "t" else donor
        for name in ("words", "pos", "lemmas", "deprels"):
            v = getattr(tree, name)
            cols[name].append(v[i] if v is not None else tree.words[i])
        if src == "d" and i == d:
            h = target.heads[t]
            cols["heads"].append(-1 if h < 0 else at[("t", h)])
            cols["deprels"][-1] = target.deprels[t] if target.deprels is not None else cols["deprels"][-1]
        else:
            h = tree.heads[i]
            cols["heads"].append(-1 if h < 0 else at[(src, h)])
    return DepTree(**{k: tuple(v) for k, v in cols.items()})


def load_dep(corpus, n: int | None = None):
    """(ids, labels, dependency trees) of a corpus store's first ``n`` examples (default all),
    decoding only its ``dep`` representation."""
    store = CorpusStore.open(corpus, "r")
    try:
        n = store.n if n is None else min(int(n), store.n)
        trees = []
        for a, b in store.shard_ranges:
            if a < n:
                trees += decode(store.load("dep", a, min(b, n)), store.vocabs)
        return store.ids[:n], store.labels[:n], trees
    finally:
        store.close()


def generate(corpus, n_total: int, seed: int, out, max_tokens: int = 80, real: int | None = None) -> dict:
    """Write the real examples (``dep`` only, ids and labels kept), then ``n_total - n_real``
    synthetic ones, as JSON lines. The real examples are the corpus store's first ``real`` rows
    (default: all of them), so a store prepared from an earlier output (``all2.zarr``: real rows
    0..50,067) regenerates it: with ``real=50068`` and the same seed, the first 200,000 lines
    written for any ``n_total >= 200,000`` are those of the 200,000-example file (the draws are
    sequential, so a larger ``n_total`` only appends).

    How each synthetic example is made (``numpy.random.default_rng(seed)``, draws in this order):

    1. draw a real example uniformly; its label (the source corpus) is the new example's label;
    2. draw one of its tokens other than the root, uniformly: ``t``;
    3. draw a donor among the real examples *with the same label*, uniformly, and in it a non-root
       token whose coarse PoS (first letter of the tag: ``N`` for NN/NNS/NNP, ``V``, ``J``, ...)
       is ``t``'s (up to 20 donors are tried; if none has one, start again at 1);
    4. replace ``t``'s subtree by the donor token's subtree (:func:`graft`); a result of more than
       ``max_tokens`` tokens is dropped and step 1 starts again.

    So every synthetic tree is a real spaCy parse with one constituent swapped for a real
    constituent of the same category from the same source corpus: the label stays consistent
    (its corpus's words and constructions on both sides of the graft) and the trees keep real
    shapes and sizes. Ids are ``synth-<k>``; the same corpus, ``n_total`` and ``seed`` give the
    same file.
    """
    ids, labels, trees = load_dep(corpus, real)
    rng = np.random.default_rng(seed)
    by_label = {}
    for i, lab in enumerate(labels):
        by_label.setdefault(lab, []).append(i)
    need = n_total - len(trees)
    if need < 0:
        raise SystemExit(f"the corpus already has {len(trees)} > {n_total} examples")
    nonroot = [[i for i, h in enumerate(tr.heads) if h >= 0] for tr in trees]

    def docs():
        for i, tr in enumerate(trees):
            yield Document(id=ids[i], label=labels[i], structures={"dep": tr})
        made = 0
        while made < need:
            k = int(rng.integers(len(trees)))
            if not nonroot[k]:
                continue
            tree, lab = trees[k], labels[k]
            t = nonroot[k][int(rng.integers(len(nonroot[k])))]
            cat = (tree.pos[t] or "")[:1]
            pool = by_label[lab]
            donor = None
            for _ in range(20):
                j = pool[int(rng.integers(len(pool)))]
                ok = [q for q in nonroot[j] if (trees[j].pos[q] or "")[:1] == cat]
                if ok:
                    donor, d = trees[j], ok[int(rng.integers(len(ok)))]
                    break
            if donor is None:
                continue
            new = graft(tree, t, donor, d)
            if len(new.words) > max_tokens:
                continue
            yield Document(id=f"synth-{made}", label=lab, structures={"dep": new})
            made += 1

    write_jsonl(docs(), out)
    return {"real": len(trees), "synthetic": need, "seed": seed}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--data", default="../shared/data")
    c.add_argument("--out", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("--tsv", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--cluster", default="sequential")
    q.add_argument("--shard-size", type=int, default=2000)
    g = sub.add_parser("generate")
    g.add_argument("--corpus", required=True)
    g.add_argument("--n", type=int, default=200_000)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--real", type=int, default=None,
                   help="take only the corpus's first N rows as the real examples (all2.zarr: 50068)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    if a.cmd == "collect":
        counts = collect(a.data, a.out)
        print(json.dumps({**counts, "total": sum(counts.values())}))
    elif a.cmd == "prepare":
        s = prepare(a.tsv, "tsv", a.out, shard_size=a.shard_size, cluster=a.cluster, max_tokens=None)
        print(s.text())
    else:
        print(json.dumps(generate(a.corpus, a.n, a.seed, a.out, real=a.real)))
    print(f"{a.cmd}: {time.perf_counter() - t0:.1f} s wall")


if __name__ == "__main__":
    main()
