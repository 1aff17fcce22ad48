"""The run of ``gramtile export`` (its options and help: :mod:`gramtile.workflows.commands.export`)."""
from __future__ import annotations

from gramtile.pipeline.learn.sources import read_labels
from gramtile.pipeline.stores.gram_export import export_selection
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import parse_selection
from gramtile.workflows.commands.running import check_output_file


def run(args) -> int:
    check_output_file(args.out, "--out", args.overwrite)
    st = GramStore.open(args.store)
    nr, nc = st.shape
    rows = None if args.rows is None else parse_selection(args.rows, nr, "--rows")
    cols = None if args.cols is None else parse_selection(args.cols, nc, "--cols")
    labels = None if args.labels is None else read_labels(args.labels, nr)
    paths = export_selection(st, args.out, args.format, rows=rows, cols=cols, normalized=args.normalized,
                             labels=labels)
    r = nr if rows is None else len(rows)
    c = len(cols) if cols is not None else (r if st.symmetric else nc)
    print(f"wrote {paths[0]} ({r} x {c} {st.dtype if args.format == 'npy' else 'text'}{', normalized' if args.normalized else ''}, {args.format})"
          + "".join(f"\n  and {p}" for p in paths[1:]))
    return 0
