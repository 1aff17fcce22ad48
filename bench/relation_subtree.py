"""Relation-subtree kernel throughput per core, on real CoNLL04 relation examples or random ones.

``--source conll04`` (default): the relation examples of every Work_For and OrgBased_In candidate
pair of the CoNLL04 train, dev and test sentences (gold entities and PoS, spaCy heads for
prepositional attachment unless ``--parser none``; rooted at the least common subtree, or at the
Sentence node with ``--scope sentence`` as workflows/conll04_relations.yaml now builds them);
X = the examples in file order. ``--source random``: seeded random relation
examples of 5-15 nodes (a root "Sentence" node, shallow-parse types and classes, roles mostly
"none", head texts from a vocabulary of ``--texts`` words), which say how fast the cores are, not
how a corpus behaves.
One process, no Dask: time ``RelationSubtreeKernel.block`` on a square block (reported per
computed pair, i <= j) and on a rectangular block (first half x second half). Wall-clock rates
are printed with the rate per second of process CPU time, which is the better figure while other
jobs share the CPU.

    .venv/bin/python bench/relation_subtree.py [--source conll04|random] [--mode sparse|contiguous]
        [--lam 0.5] [--type-weight 0.25] [--scope lcs|sentence] [--n 2000]

The CoNLL04 workflow's kernel: ``--type-weight 1 --scope sentence``.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from _timing import best_block_times, print_rates

from gramtile.kernels.relation_subtree import RelationSubtreeKernel
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.relation import RelationExample
from gramtile.pipeline.representations.vocab import Vocabularies

TYPES = ["PNP", "ONP", "LNP", "Person", "Organization", "Location", "Verb", "Prep", "BNP", "Punc", "Adj"]
ROLES = ["none"] * 8 + ["member", "affiliation"]


def random_example(rng, texts):
    """A relation example of 5-15 nodes: a Sentence root over a shallow random tree."""
    n = rng.randint(5, 15)
    kids = [[] for _ in range(n)]
    for v in range(1, n):
        # shallow parses are wide and shallow: attach mostly to the root or its first children
        kids[rng.choice(range(min(v, 4))) if rng.random() < 0.8 else rng.randrange(v)].append(v)

    def build(u):
        if u == 0:
            return RelationExample("Sentence", "none", None, tuple(build(c) for c in kids[u]))
        text = rng.choice(texts) if rng.random() < 0.9 else None
        return RelationExample(rng.choice(TYPES), rng.choice(ROLES), text, tuple(build(c) for c in kids[u]))

    return build(0)


def conll04_examples(parser: str, scope: str = "lcs"):
    """Relation examples of all Work_For and OrgBased_In candidates of the CoNLL04 split."""
    from gramtile.pipeline.readers.conll04 import load_split, read_corp
    from gramtile.workflows.recipes.relations import conll04_documents, spacy_heads

    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "conll04"
    corp = read_corp(data / "conll04.corp")
    sents = [s for k in ("train", "dev", "test") for s in load_split(data, k, corp)]
    heads = lemmas = None
    if parser == "spacy":
        heads, lemmas = spacy_heads(sents)
    return [d.structures["relation"] for rel in ("Work_For", "OrgBased_In")
            for d in conll04_documents(sents, rel, heads, lemmas, scope)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="conll04", choices=("conll04", "random"))
    ap.add_argument("--parser", default="spacy", choices=("spacy", "none"), help="conll04: heads from spaCy or none")
    ap.add_argument("--n", type=int, default=2000, help="random: examples per side of the block")
    ap.add_argument("--mode", default="sparse", choices=("sparse", "contiguous"))
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--type-weight", type=float, default=0.25, help="beta of k (0 = the paper's k)")
    ap.add_argument("--scope", default="lcs", choices=("lcs", "sentence"),
                    help="conll04: examples rooted at the mentions' least common subtree or at the Sentence node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--texts", type=int, default=30, help="random: size of the head-text vocabulary")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.source == "conll04":
        xs = conll04_examples(args.parser, args.scope)
        half = len(xs) // 2
        what = (f"REAL CoNLL04 relation examples ({len(xs)}: all Work_For and OrgBased_In candidates, "
                f"parser {args.parser}, scope {args.scope})")
    else:
        rng = random.Random(args.seed)
        texts = [f"w{i}" for i in range(args.texts)]
        xs = [random_example(rng, texts) for _ in range(2 * args.n)]
        half = args.n
        what = f"RANDOM relation examples (5-15 nodes, seed {args.seed}; not real data), {args.texts} head texts"
    v = Vocabularies()
    A = encode(xs, v)
    X = encode(xs[:half], v)
    Y = encode(xs[half:], v)
    spec = RelationSubtreeKernel(mode=args.mode, lam=args.lam, type_weight=args.type_weight)
    spec.block(X.slice(0, 5))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 5), Y.slice(0, 5))
    na, nx, ny = A.n, X.n, Y.n
    *times, K = best_block_times(spec, X, Y, args.repeat, square=A)
    print(f"relation_subtree kernel, {what}, mode={args.mode}, lam={args.lam}, type_weight={args.type_weight}, "
          f"mean nodes {A.sizes().mean():.1f} (max {A.sizes().max()}), nonzero entries {(K != 0).mean():.0%}")
    print_rates(na, nx, ny, *times)


if __name__ == "__main__":
    main()
