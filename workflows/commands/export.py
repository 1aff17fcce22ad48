"""``gramtile export``: write a complete Gram store's K to a .npy file."""
from __future__ import annotations

from gramtile.pipeline.stores.gram_store import GramStore, export


def add_parser(sub):
    p = sub.add_parser("export", help="write K of a complete Gram store to .npy (refuses an incomplete store)")
    p.add_argument("store", help="Gram store (GRAM.zarr)")
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument("--normalized", action="store_true", help="write K(x,y)/sqrt(K(x,x)K(y,y))")
    p.set_defaults(func=run)
    return p


def run(args) -> int:

    st = GramStore.open(args.store)
    path = export(st, args.out, normalized=args.normalized)
    print(f"wrote {path} ({st.shape[0]} x {st.shape[1]} float64{', normalized' if args.normalized else ''})")
    return 0
