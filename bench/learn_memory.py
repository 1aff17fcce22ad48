"""Peak memory and time of the learning phase of `gramtile evaluate` on a large Gram store.

The store: SST (lam 0.4) over the 5,483 NUM training trees three times (n = 16,449, ids made
unique, so K(train, train) of a 5-fold split is 13,159^2 x 8 bytes = 1.39 GB and the whole
matrix 2.16 GB), computed once into WORKDIR with the threads profile and reused.

Each measurement runs one `gramtile evaluate --gram G --folds 5 --C 1 --normalized` in a child
process and reads its peak RSS (``ru_maxrss`` from ``os.wait4``), wall, user and system time.
``--code DIR`` runs the command from another checkout's code (a directory holding a
``gramtile/`` package laid out as installed: ``gramtile/*.py`` plus ``kernels``, ``pipeline`` and
``workflows``), e.g. the code before the in-memory path was rewritten, for a before/after in one run.

    .venv/bin/python bench/learn_memory.py --workdir WORKDIR [--solvers libsvm,smo] [--code OLD_TREE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _timing import run_measured

ROOT = Path(__file__).resolve().parents[1]
NUM = ROOT.parent / "shared" / "data" / "trec_qc_num_constituency" / "NUM_train.dat"


def build(workdir: Path, copies: int) -> Path:
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.representations.structures import Document
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    gram = workdir / f"sst-x{copies}.zarr"
    if gram.exists() and (gram / "zarr.json").exists():
        return gram
    base = list(read(NUM, "svmlighttk"))
    docs = [Document(id=f"{d.id}-{k}", label=d.label, structures=d.structures) for k in range(copies) for d in base]
    corpus = workdir / f"num-x{copies}.zarr"
    if not corpus.exists():
        cs = CorpusStore.create(corpus, shard_size=1000)
        for s in range(0, len(docs), 1000):
            cs.write_shard(s // 1000, docs[s:s + 1000])
        cs.finish()
        cs.close()
    t = time.perf_counter()
    run_gram(corpus, {"kind": "sst", "lam": 0.4}, gram, tile=1000, cluster="threads")
    print(f"Gram store {gram}: {len(docs)} examples in {time.perf_counter() - t:.1f} s", flush=True)
    return gram


def measure(gram: Path, out: Path, extra: list, code: str | None) -> dict:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "gramtile", "evaluate", "--gram", str(gram), "--folds", "5", "--C", "1",
           "--normalized", "--folds-dir", str(out.parent), "--out", str(out), *extra]
    if code:
        env["PYTHONPATH"] = code
        # an old tree has no --no-progress; the new one shows no bar off a terminal anyway
        cmd = [c for c in cmd if c != "--no-progress"]
    wall, ru, err = run_measured(cmd, env=env, cwd=code or None)
    res = json.loads((out / "results.json").read_text())
    return {"wall_s": round(wall, 1), "user_s": round(ru.ru_utime, 1), "sys_s": round(ru.ru_stime, 1),
            "peak_rss_gb": round(ru.ru_maxrss * 1024 / 1e9, 2), "accuracy": res["rows"][0]["accuracy"],
            "solver": (res.get("solver") or {}).get("used", "libsvm (before)"),
            "solver_line": next((ln for ln in err.splitlines() if ln.startswith("solver ")), "")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--solvers", default="libsvm", help="comma-separated: libsvm, smo")
    ap.add_argument("--cache-mb", default="1000", help="smo row cache (default 1000)")
    ap.add_argument("--code", default=None, help="also run the code of this tree (before)")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    gram = build(a.workdir, a.copies)
    print(f"load at start: {os.getloadavg()[0]:.2f}", flush=True)
    runs = []
    if a.code:
        runs.append(("before (--code)", [], a.code))
    for s in a.solvers.split(","):
        runs.append((f"after, --solver {s}", ["--solver", s, "--no-progress"]
                     + (["--cache-mb", a.cache_mb] if s == "smo" else []), None))
    print("| run | solver | peak RSS GB | wall s | user s | sys s | accuracy | load (1 min) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, extra, code in runs:
        load = os.getloadavg()[0]
        r = measure(gram, a.workdir / f"out-{len(name)}-{abs(hash(name)) % 10000}", extra, code)
        print(f"| {name} | {r['solver']} | {r['peak_rss_gb']} | {r['wall_s']} | {r['user_s']} | {r['sys_s']} | "
              f"{r['accuracy']:.4f} | {load:.2f} |", flush=True)
        if r["solver_line"]:
            print(f"  ({r['solver_line']})", flush=True)


if __name__ == "__main__":
    main()
