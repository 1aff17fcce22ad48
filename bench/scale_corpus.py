"""The corpus of the scale benchmark (issue 15, item 5): every sentence of the shared corpora,
labelled by its source corpus, parsed by spaCy into a corpus store.

    python bench/scale_corpus.py collect --data ../shared/data --out /work/scale-data/sentences.tsv
    python bench/scale_corpus.py prepare --tsv /work/scale-data/sentences.tsv --out /work/scale-data/real.zarr
    python bench/scale_corpus.py generate --corpus /work/scale-data/real.zarr --n 200000 \\
        --seed 0 --out /work/scale-data/synth.jsonl

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

``generate`` makes the synthetic examples that take the corpus to 200,000 (item 5b), from the
stored parses and a fixed seed; see :func:`generate` for exactly how.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.readers.jsonl import write_jsonl
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

def _subtree_spans(heads):
    """For each token i, the sorted token indices of its subtree (heads 1-based, 0 = root)."""
    n = len(heads)
    children = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h > 0:
            children[h - 1].append(i)
    spans = [None] * n

    def walk(i):
        out = [i]
        for c in children[i]:
            out += walk(c)
        spans[i] = sorted(out)
        return spans[i]

    for i, h in enumerate(heads):
        if h == 0:
            walk(i)
    return spans


def _graft(target: DepTree, t: int, donor: DepTree, dnode: int) -> DepTree:
    """``target`` with the subtree of token ``t`` replaced by the subtree of ``donor``'s token
    ``dnode`` (attached to ``t``'s head with ``t``'s relation), tokens kept in surface order."""
    tspan = set(_subtree_spans(target.heads)[t])
    dspan = _subtree_spans(donor.heads)[dnode]
    first = min(tspan)
    keep = [i for i in range(len(target.words)) if i not in tspan]
    order = [("t", i) for i in keep if i < first] + [("d", j) for j in dspan] + \
            [("t", i) for i in keep if i > first]
    new_index = {key: k for k, key in enumerate(order)}
    words, pos, lemmas, heads, rels = [], [], [], [], []
    for src, i in order:
        tree = target if src == "t" else donor
        words.append(tree.words[i])
        pos.append(tree.pos[i])
        lemmas.append(tree.lemmas[i] if tree.lemmas is not None else tree.words[i])
        h = tree.heads[i]
        if src == "d" and i == dnode:
            th = target.heads[t]
            heads.append(0 if th == 0 else new_index[("t", th - 1)] + 1)
            rels.append(target.deprels[t])
        else:
            heads.append(0 if h == 0 else new_index[(src, h - 1)] + 1)
            rels.append(tree.deprels[i])
    return DepTree(words=tuple(words), pos=tuple(pos), heads=tuple(heads), deprels=tuple(rels),
                   lemmas=tuple(lemmas))


def generate(corpus, n_total: int, seed: int, out, max_tokens: int = 80) -> dict:
    """Write ``n_total - n_real`` synthetic examples as JSON lines (``dep`` only).

    How each synthetic example is made (``numpy.random.default_rng(seed)``, in order):

    1. draw a real example uniformly (its label is the synthetic example's label: the source
       corpus);
    2. draw a token ``t`` of it other than its root, uniformly;
    3. draw a donor among the real examples *of the same label*, uniformly, and in it a token
       whose coarse PoS (first letter of the tag, e.g. ``N`` for NN/NNS/NNP) equals ``t``'s and
       that is not its root (up to 20 tries; if none, another donor);
    4. replace ``t``'s subtree by the donor token's subtree (attached where ``t`` was, with
       ``t``'s relation, words kept in surface order); a result longer than ``max_tokens`` is
       dropped and drawn again.

    So every synthetic tree is a real parse with one constituent swapped for a real constituent
    of the same category from the same corpus: the label stays consistent (the source corpus's
    vocabulary and constructions) and the trees have real shapes and sizes. Ids are
    ``synth-<k>``. The same corpus, ``n_total`` and ``seed`` give the same file.
    """
    store = CorpusStore.open(corpus, "r")
    try:
        docs = [(d.label, d.structures["dep"]) for d in store.documents(0, store.n)]
    finally:
        store.close()
    rng = np.random.default_rng(seed)
    by_label = {}
    for i, (lab, _) in enumerate(docs):
        by_label.setdefault(lab, []).append(i)
    by_label = {k: np.array(v) for k, v in by_label.items()}
    need = n_total - len(docs)
    if need <= 0:
        raise SystemExit(f"the corpus already has {len(docs)} >= {n_total} examples")

    def synth():
        made = 0
        while made < need:
            lab, tree = docs[int(rng.integers(len(docs)))]
            cand = [i for i, h in enumerate(tree.heads) if h != 0]
            if not cand:
                continue
            t = cand[int(rng.integers(len(cand)))]
            cat = tree.pos[t][:1]
            pool = by_label[lab]
            donor = dnode = None
            for _ in range(20):
                dt = docs[int(pool[int(rng.integers(len(pool)))])][1]
                ok = [j for j, h in enumerate(dt.heads) if h != 0 and dt.pos[j][:1] == cat]
                if ok:
                    donor, dnode = dt, ok[int(rng.integers(len(ok)))]
                    break
            if donor is None:
                continue
            new = _graft(tree, t, donor, dnode)
            if len(new.words) > max_tokens:
                continue
            yield Document(id=f"synth-{made}", label=lab, structures={"dep": new})
            made += 1

    write_jsonl(synth(), out)
    return {"real": len(docs), "synthetic": need, "seed": seed}


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
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    if a.cmd == "collect":
        counts = collect(a.data, a.out)
        print(json.dumps({**counts, "total": sum(counts.values())}))
    elif a.cmd == "prepare":
        s = prepare(a.tsv, "tsv", a.out, shard_size=a.shard_size, cluster=a.cluster, max_tokens=None,
                    progress=sys.stderr.isatty())
        print(s.text())
    else:
        print(json.dumps(generate(a.corpus, a.n, a.seed, a.out)))
    print(f"{a.cmd}: {time.perf_counter() - t0:.1f} s wall")


if __name__ == "__main__":
    main()
