"""Run the shipped workflows end to end and report their tables and wall times (BENCHMARKS.md).

    .venv/bin/python bench/workflows.py [--out DIR] [--cluster PROFILE] [num_qc trec_qc_kelp]

(``make bench`` style; run from anywhere, paths are relative to the current directory).

Each workflow runs as ``gramtile run workflows/NAME.yaml --out DIR/NAME`` in a subprocess, so the
command, its wall time and its table are exactly what a user would see. A rerun reuses the
stores in DIR (then the wall time is the learning time only); delete DIR for a cold run.
The published targets are printed beside the measured accuracies.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Published test accuracies (%) the workflows should reproduce within 1 point.
TARGETS = {
    "num_qc": {"ST": 94.0, "SST": 92.6, "PT": 91.0},          # SVM-Light-TK 1.5, default C
    "trec_qc_kelp": {"BOW": 86.2, "SST": 91.4, "PT": 91.0},   # KeLP, TREC-10 coarse
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", default=list(TARGETS), help="workflows to run (default: all)")
    ap.add_argument("--out", default="bench/out/workflows",
                    help="output folder (default bench/out/workflows, git-ignored; reused by a rerun)")
    ap.add_argument("--cluster", default="local", help="cluster.yaml profile (default local)")
    args = ap.parse_args(argv)
    exe = Path(sys.executable).with_name("gramtile")
    report = []
    for name in args.names:
        out = (Path(args.out) / name).resolve()
        cmd = [str(exe), "run", f"workflows/{name}.yaml", "--out", str(out), "--cluster", args.cluster,
               "--no-progress"]
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO)
        wall = time.perf_counter() - t0
        if proc.returncode:
            print(f"{name}: failed with status {proc.returncode}", file=sys.stderr)
            return proc.returncode
        rows = json.loads((out / "results.json").read_text())
        lines = [f"### {name} (wall time {wall:.0f} s, cluster {args.cluster})", "",
                 "| kernel | model | C | accuracy % | target % | diff | F1 / macro-F1 | Gram s |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            tgt = TARGETS.get(name, {}).get(r["kernel"])
            acc = 100 * r["accuracy"]
            f1 = r.get("macro_f1", r.get("f1"))
            lines.append(f"| {r['kernel']} | {r['model']} | {r.get('C')} | {acc:.2f} | "
                         f"{'-' if tgt is None else f'{tgt:.1f}'} | {'-' if tgt is None else f'{acc - tgt:+.2f}'} | "
                         f"{100 * f1:.2f} | {r.get('gram_seconds', '-')} |")
        report.append("\n".join(lines))
        print(report[-1] + "\n", flush=True)
    print("\n\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
