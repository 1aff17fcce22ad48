"""The run of ``gramtile status`` (its options and help: :mod:`gramtile.workflows.commands.status`)."""
from __future__ import annotations

import json

from gramtile.pipeline.stores.gram_store import GramStore


def run(args) -> int:

    st = GramStore.open(args.store)
    s = st.summary()
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    pct = 100.0 * s["tiles_done"] / max(1, s["tiles_total"])
    print(f"{s['path']}: {s['tiles_done']}/{s['tiles_total']} tiles done ({pct:.1f}%)"
          f"{'' if s['complete'] else ' - rerun the same `gramtile gram` command to finish'}")
    print(f"  K {s['shape'][0]} x {s['shape'][1]} {s['dtype']}, tile {s['tile']}, symmetric {s['symmetric']}")
    if s["landmarks"]:
        lm = s["landmarks"]
        print(f"  landmarks   {lm['taken']} of the rows (asked {lm['m']}), {lm['how']}, seed {lm['seed']}: the "
              f"columns are K(rows, landmarks) for evaluate --model nystroem")
    print(f"  kernel      {s['kernel']}")
    print(f"  kernel hash {s['kernel_hash']}")
    print(f"  corpus      {s['corpus_path']} (content hash {s['corpus_hash']})")
    print(f"  gramtile {s['gramtile_version']}, created {s['created']}, updated {s['updated']}")
    return 0
