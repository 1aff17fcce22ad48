"""The run of ``gramtile verify`` (its options and help: :mod:`gramtile.workflows.commands.verify`)."""
from __future__ import annotations

from pathlib import Path

from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.learn.model_files import is_model_dir, load_model
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.feature_store import is_feature_store, verify_store
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.integrity import MANIFEST, write_manifest
from gramtile.workflows.commands.running import runtime


def verify_model(d: Path, repair_it: bool) -> int:
    """Check a model directory's files against its manifest; with ``repair_it``, give a model
    written before manifests existed one (the model must then load: its internal hashes agree)."""
    load = load_model
    if repair_it and not (d / MANIFEST).is_file():
        files = write_manifest(d)
        try:
            load(d)
        except StoreError:
            (d / MANIFEST).unlink()
            raise
        print(f"{d}: recorded the checksums of its {len(files)} file(s) in {MANIFEST}; the model loads")
        return 0
    load(d)  # every file against its checksum first, then parsed
    print(f"{d}: model directory intact (every file matches its checksum)")
    return 0


def run(args) -> int:
    d = Path(str(args.store))
    if is_model_dir(d):
        return verify_model(d, args.repair)
    if is_feature_store(d):
        print(verify_store(d, repair=args.repair))
        return 0
    if args.repair:
        rt = runtime(args)  # a bad profile fails even when nothing needs repair
        rep = repair(args.store, cluster=rt)
    else:
        rep = verify(args.store)
    if rep.metadata:  # nothing was checked tile by tile, and recomputing tiles cannot fix it
        print(rep.metadata)
        return 1
    if rep.done_damaged:
        print(f"damaged done mask: {rep.done_damaged}")
    if rep.rebuilt is not None:
        print(f"rebuilt the done mask: {len(rep.rebuilt)} stored tile(s) intact and kept, the rest recomputed")
    for t, why in rep.bad:
        print(f"bad tile {tuple(t)}: {why}")
    if rep.repaired:
        print(f"repaired {len(rep.repaired)} tile(s): {[tuple(t) for t in rep.repaired]}")
    hint = "" if rep.ok else ("; still bad after recomputing: the kernel gives these values (check the input)"
                              if args.repair else "; run `gramtile verify --repair` to repair the store")
    print(f"{rep.path}: {rep.checked} done tile(s) checked, {len(rep.bad)} bad{hint}")
    return 0 if rep.ok else 1
