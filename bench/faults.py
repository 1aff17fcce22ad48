"""The figures of docs/reliability.md: run the fault suite (tests/faults/test_fault_suite.py), the CLI
fault regressions (tests/faults/test_cli_faults.py), the bit-flip sweep over feature stores, landmark
stores and model directories (tests/faults/test_bitflip_sweep.py) and the integrity and input
regressions (tests/faults/test_integrity.py, tests/faults/test_relative_paths_cluster.py), and print what was
tried and what survived.

The suite counts its cases into a JSON summary (``GRAMTILE_FAULT_SUMMARY``); this script runs it
with larger sizes when asked, adds the pass/fail counts of both test files, and prints a
markdown table. A silent wrong result is a case whose command succeeded (or whose store
verified) with a matrix different from the clean one; a process crash is a traceback, a signal
death or an uncaught exception where a one-line error was due.

Run: .venv/bin/python bench/faults.py [--kills 8] [--batches 120] [--races 60] [--flips 8] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]


def pytest(files, env, junit: Path):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True)
    suite = ElementTree.parse(junit).getroot() if junit.exists() else None
    if suite is not None and suite.tag == "testsuites":
        suite = suite.find("testsuite")
    get = (lambda k: int(suite.get(k, 0))) if suite is not None else (lambda k: 0)
    return {"tests": get("tests"), "failed": get("failures") + get("errors"), "skipped": get("skipped"),
            "seconds": round(time.perf_counter() - t0, 1), "rc": r.returncode, "tail": r.stdout[-600:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=8, help="driver SIGKILL points (default 8; the suite alone: 3)")
    ap.add_argument("--batches", type=int, default=120, help="malformed batches (default 120; the suite alone: 60)")
    ap.add_argument("--races", type=int, default=60, help="three-way lock race rounds (default 60; the suite alone: 20)")
    ap.add_argument("--flips", type=int, default=8, help="bit flips per file in the sweep (default 8)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        env = dict(os.environ, GRAMTILE_FAULT_SUMMARY=str(summary), GRAMTILE_FAULT_KILLS=str(a.kills),
                   GRAMTILE_FAULT_BATCHES=str(a.batches), GRAMTILE_FAULT_RACES=str(a.races),
                   GRAMTILE_REQUIRE_DATA="1")
        sweep_file = Path(tmp) / "sweep.json"
        env.update(GRAMTILE_SWEEP_SUMMARY=str(sweep_file), GRAMTILE_SWEEP_FLIPS=str(a.flips))
        suite = pytest(["tests/faults/test_fault_suite.py"], env, Path(tmp) / "suite.xml")
        cli = pytest(["tests/faults/test_cli_faults.py"], env, Path(tmp) / "cli.xml")
        sweep_run = pytest(["tests/faults/test_bitflip_sweep.py"], env, Path(tmp) / "sweep.xml")
        integ = pytest(["tests/faults/test_integrity.py", "tests/faults/test_relative_paths_cluster.py"], env, Path(tmp) / "integ.xml")
        tally = json.loads(summary.read_text()) if summary.exists() else {}
        sweep = json.loads(sweep_file.read_text()) if sweep_file.exists() else {}
    k, d, b = tally.get("kill_points", {}), tally.get("store_damage", {}), tally.get("bad_inputs", {})
    lr, mb = tally.get("lock_races", {}), tally.get("malformed_batches", {})
    silent = k.get("silent_wrong", 0) + d.get("silent_wrong", 0) + sum(v.get("wrong_number", 0) for v in sweep.values())
    crashes = (b.get("crashed", 0) + lr.get("crashed", 0) + mb.get("crashed", 0)
               + sum(v.get("traceback", 0) for v in sweep.values()))
    rows = [
        ("driver SIGKILLs during `gram`, rerun bitwise equal", k.get("survived", 0), k.get("tried", 0),
         f"{k.get('killed_mid_run', 0)} landed mid-run"),
        ("store damage detected (verify or a refusal naming the fix)",
         d.get("detected_and_repaired", 0) + d.get("refused_with_fix", 0) + d.get("missed_by_verify_refused_by_reads", 0),
         d.get("tried", 0), f"{d.get('missed_by_verify_refused_by_reads', 0)} missed by verify but refused by reads"),
        ("store damage repaired to the clean matrix by `verify --repair`", d.get("detected_and_repaired", 0),
         d.get("tried", 0), f"{d.get('refused_with_fix', 0)} refused with the fix instead"),
        ("bad inputs with exit 2 and one line naming the file / option", b.get("clear", 0), b.get("tried", 0), ""),
        ("three-way lock races with one holder", lr.get("one_holder", 0), lr.get("tried", 0),
         f"{lr.get('two_holders', 0)} with two holders"),
        ("malformed batches refused or computed finite", mb.get("refused", 0) + mb.get("accepted_and_computed", 0),
         mb.get("tried", 0), f"{mb.get('memory_error', 0)} MemoryError"),
        ("CLI fault regressions passing (tests/faults/test_cli_faults.py)", cli["tests"] - cli["failed"] - cli["skipped"],
         cli["tests"], f"{cli['skipped']} skipped"),
    ]
    for kind, v in sorted(sweep.items()):  # the bit-flip sweep: one row per kind of store or model directory
        ok = v.get("same_result", 0) + v.get("refused_naming_the_file", 0)
        what = f"{kind[len('model_'):]} model directory" if kind.startswith("model_") else kind.replace("_", " ")
        rows.append((f"bit flips in a {what} ({v.get('files', 0)} files): the clean result, or one "
                     "line naming the file", ok, v.get("tried", 0),
                     f"{v.get('same_result', 0)} same result, {v.get('refused_naming_the_file', 0)} refused; "
                     f"{v.get('wrong_number', 0)} wrong number, {v.get('traceback', 0)} traceback, "
                     f"{v.get('unclear_error', 0)} unclear; verify missed {v.get('refused_but_verify_missed', 0)} "
                     "of the refused"))
    rows.append(("integrity and input regressions passing (tests/faults/test_integrity.py, "
                 "tests/faults/test_relative_paths_cluster.py)", integ["tests"] - integ["failed"] - integ["skipped"],
                 integ["tests"], f"{integ['skipped']} skipped"))
    print("| fault | survived | tried | note |\n|---|---:|---:|---|")
    for name, ok, tried, note in rows:
        print(f"| {name} | {ok} | {tried} | {note} |")
    print(f"\nsilent wrong results: {silent}; process crashes: {crashes}")
    print(f"suite {suite['tests']} tests in {suite['seconds']} s ({suite['failed']} failed); "
          f"CLI faults {cli['tests']} tests in {cli['seconds']} s ({cli['failed']} failed); "
          f"bit-flip sweep {sweep_run['tests']} tests in {sweep_run['seconds']} s ({sweep_run['failed']} failed); "
          f"integrity {integ['tests']} tests in {integ['seconds']} s ({integ['failed']} failed)")
    if a.json:
        Path(a.json).write_text(json.dumps({"tally": tally, "sweep": sweep, "suite": suite, "cli": cli,
                                            "sweep_run": sweep_run, "integrity": integ, "silent_wrong": silent,
                                            "crashes": crashes}, indent=1) + "\n")
    return 0 if suite["failed"] == cli["failed"] == sweep_run["failed"] == integ["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
