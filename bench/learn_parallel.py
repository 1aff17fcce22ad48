"""Serial against parallel learning, in one run:

- **NUM evaluate**: `gramtile evaluate` on the 5,483 NUM training trees (SST, lam 0.4, normalised),
  10 folds x the C grid 0.1,1,10,100 (nested 3-fold C selection in each training part): the figure
  is the learning phase (``timing.learn_seconds`` of results.json: the evaluate call, every fit
  from reading its blocks to the pooled scores) beside the whole command (which adds the
  interpreter's start, about 1 s of imports, scikit-learn's included, and writing the results);
- **WSD learning phase**: `gramtile run workflows/wsd.yaml` (hard, line, serve; 10 folds, C and
  the K_Combined alternative chosen per fold on an inner split) with every Gram store already
  computed, so the run reads its stores and learns: the figure is the learning phase (the
  ``learn_seconds`` of results.json, summed over the words) beside the whole command;

each variant as a child process (wall, user + system CPU of the command and its children, from
``os.wait4``):

- sequential (the default: one process, one fit after another),
- ``--cluster threads`` (2 threads of the command's process),
- ``--cluster local`` (a LocalCluster of 2 worker processes, started by the command; its CPU
  figure is well above the threads one, so the workers' CPU appears to be counted when the
  command reaps them, with their start and imports),

alternating the variants for ``--repeats`` rounds, with the load average before each run. Every
parallel results.json is checked equal to the serial one (timings and the solver's budget
aside). The NUM Gram store and the WSD corpus and Gram stores are computed once into WORKDIR
(``--cluster threads``) and reused.

    .venv/bin/python bench/learn_parallel.py --workdir WORKDIR [--repeats 1] [--solver libsvm]
                                             [--only num|wsd] [--words hard,line,serve]
                                             [--variants sequential,threads,local]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml
from _timing import run_measured

ROOT = Path(__file__).resolve().parents[1]
NUM = ROOT.parent / "shared" / "data" / "trec_qc_num_constituency" / "NUM_train.dat"
WSD = ROOT / "workflows" / "wsd.yaml"
#: results.json fields that are timings, not results
TIMES = ("learn_seconds", "gram_seconds", "tiles_computed")
VARIANTS = {"sequential": ["--cluster", "sequential"], "threads (2)": ["--cluster", "threads"],
            "local (2 processes)": ["--cluster", "local"]}


def build(workdir: Path) -> Path:
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.compute.prepare import prepare

    gram = workdir / "num-sst.zarr"
    if not (gram / "zarr.json").exists():
        corpus = workdir / "num.zarr"
        if not corpus.exists():
            prepare(NUM, "svmlighttk", corpus, cluster="sequential")
        run_gram(corpus, {"kind": "sst", "lam": 0.4}, gram, tile=1000, cluster="threads")
    return gram


def build_wsd(workdir: Path, words: list) -> Path:
    """WORKDIR/wsd.yaml (the shipped workflow over ``words``) and its corpus and Gram stores under
    WORKDIR/wsd (the recipe's own layout, so `gramtile run` finds and reuses them)."""
    from gramtile.pipeline.compute.runtime import Runtime
    from gramtile.workflows.recipes import wsd

    raw = yaml.safe_load(WSD.read_text())
    raw["words"] = words
    cfg = wsd._config(raw, WSD)
    raw["data"] = str(cfg["data"])
    wf = workdir / "wsd.yaml"
    wf.write_text(yaml.safe_dump(raw, sort_keys=False))
    for word in words:
        src = cfg["data"] / f"{word}.pos"
        docs = wsd.load_word(src, cfg["lemmas"], cfg["subsample"])
        wdir = workdir / "wsd" / word
        wdir.mkdir(parents=True, exist_ok=True)
        corpus = wsd.word_corpus(docs, wdir / "corpus.zarr", src, cfg["lemmas"], cfg["subsample"], False)
        every = [s for alts in cfg["select"].values() for s in alts]
        wsd.gram_stores(every, corpus, wdir / "gram", Runtime("threads"))
    return wf


def measure(cmd, results: Path) -> dict:
    load = os.getloadavg()[0]
    wall, ru, _ = run_measured(cmd)
    res = json.loads(results.read_text())
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "load": load, "res": res}


def run_num(gram: Path, out: Path, extra: list) -> dict:
    cmd = [sys.executable, "-m", "gramtile", "evaluate", "--gram", str(gram), "--folds", "10", "--C",
           "0.1,1,10,100", "--normalized", "--no-progress", "--overwrite", "--out", str(out), *extra]
    m = measure(cmd, out / "results.json")
    m["res"].pop("solver", None)
    m["learn"] = m["res"].pop("timing")["learn_seconds"]  # the learning phase (the evaluate call)
    return m


def run_wsd(wf: Path, out: Path, extra: list) -> dict:
    cmd = [sys.executable, "-m", "gramtile", "run", str(wf), "--out", str(out), "--no-progress", *extra]
    m = measure(cmd, out / "results.json")
    # one learning phase per word (every row of a word carries it)
    m["learn"] = sum({r["word"]: r["learn_seconds"] for r in m["res"]}.values())
    for r in m["res"]:
        for k in TIMES:
            r.pop(k, None)
    return m


def table(name: str, got: dict, key: str = "wall"):
    print(f"\n{name}\n")
    print(f"| variant | {key} s (best) | all rounds | speed-up vs sequential (best) | command wall s | "
          "command speed-up (best) | command CPU s | load (1 min) at start |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    base = min(m[key] for m in got["sequential"])
    wbase = min(m["wall"] for m in got["sequential"])

    def each(ms, k):
        return ", ".join(f"{m[k]:.1f}" for m in ms)

    for v, ms in got.items():
        best, wbest = min(m[key] for m in ms), min(m["wall"] for m in ms)
        print(f"| {v} | {best:.1f} | {each(ms, key)} | {base / best:.2f}x | {each(ms, 'wall')} | {wbase / wbest:.2f}x | "
              f"{each(ms, 'cpu')} | {each(ms, 'load')} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--solver", default="libsvm", help="the SVM solver of the NUM evaluate")
    ap.add_argument("--only", choices=("num", "wsd"), default=None, help="run one of the two benchmarks")
    ap.add_argument("--words", default="hard,line,serve", help="the WSD words (default all three)")
    ap.add_argument("--variants", default=",".join(v.split()[0] for v in VARIANTS),
                    help="which of sequential, threads, local to run (default all; sequential always)")
    a = ap.parse_args()
    want = set(a.variants.split(",")) | {"sequential"}
    variants = {v: extra for v, extra in VARIANTS.items() if v.split()[0] in want}
    a.workdir.mkdir(parents=True, exist_ok=True)
    jobs = {}
    if a.only in (None, "num"):
        gram = build(a.workdir)
        jobs["NUM evaluate, 10 folds x 4 C (nested)"] = (
            "learn", lambda r, v, extra: run_num(gram, a.workdir / f"out-{r}-{v}", ["--solver", a.solver, *extra]))
    if a.only in (None, "wsd"):
        wf = build_wsd(a.workdir, a.words.split(","))
        jobs[f"WSD learning phase ({a.words})"] = (
            "learn", lambda r, v, extra: run_wsd(wf, a.workdir / "wsd", extra))
    for name, (key, fn) in jobs.items():
        got = {v: [] for v in variants}
        ref = None
        for r in range(a.repeats):
            for v, extra in variants.items():
                m = fn(r, v.split()[0], extra)
                if ref is None:
                    ref = m["res"]
                assert m["res"] == ref, f"{name}, {v}: results.json differs from the serial run"
                got[v].append(m)
                print(f"{name}: round {r + 1} {v}: {key} {m[key]:.1f} s, command wall {m['wall']:.1f} s "
                      f"(load {m['load']:.2f})", flush=True)
        print(f"{name}: every parallel results.json equal to the serial one")
        table(name, got, key)


if __name__ == "__main__":
    main()
