"""The run of ``gramtile inspect`` (its options and help: :mod:`gramtile.workflows.commands.inspect`)."""
from __future__ import annotations

import json
from collections import Counter

from gramtile.pipeline.stores import resource_store
from gramtile.pipeline.stores.corpus_store import CorpusStore


def _label_key(label):
    return "|".join(label) if isinstance(label, list) else ("(none)" if label is None else str(label))


def report(path) -> dict:
    """The inspection report of a corpus store as a JSON-able dict."""

    store = CorpusStore.open(path)
    m = store.manifest
    n = store.n
    counts = Counter(_label_key(lab) for lab in store.labels)
    labels = [{"label": lab, "count": c, "share": c / n if n else 0.0} for lab, c in sorted(counts.items())]
    reps = {}
    for rep, kind in store.representations.items():
        sizes = store.sizes(rep)
        reps[rep] = {"kind": kind, "mean_nodes": float(sizes.mean()) if len(sizes) else 0.0,
                     "max_nodes": int(sizes.max()) if len(sizes) else 0}
    shards = m["shards"]
    targets = store.targets
    groups = store.groups
    extra = {}
    if store.fields:
        extra["fields"] = {f: sorted(store.field_representations(f)) for f in store.fields}
    if targets is not None:
        extra["targets"] = {"min": float(targets.min()) if n else None, "max": float(targets.max()) if n else None,
                            "mean": float(targets.mean()) if n else None}
    if groups is not None:
        sizes = Counter(groups.tolist())
        extra["groups"] = {"count": len(sizes), "min_size": min(sizes.values()) if sizes else 0,
                           "max_size": max(sizes.values()) if sizes else 0}
    res = resource_store.stored(path)
    built = {}
    if res:  # the corpus resources built into the store (WordNet, LSA and domain spaces, vectors, SPTK tables)
        extra["resources"] = [{"name": r["name"], "rep": r.get("rep"), "group": r["group"],
                               "content_hash": r["content_hash"]} for r in res]
        built = {r["group"]: (r.get("provenance") or {}).get("built") for r in res}  # when: provenance
    return {"path": str(path), "examples": n, "complete": store.complete, **extra, "labels": labels,
            "representations": reps, "vocab_sizes": store.vocabs.sizes(),
            "shards_done": sum(1 for s in shards if s["done"]),
            "shards_total": len(shards) if store.complete else m.get("expected_shards"),
            "shard_size": m["shard_size"], "content_hash": store.content_hash,
            "provenance": {"source": m["source"], "input_format": m["input_format"], "parser": m["parser"],
                           "gramtile_version": m["gramtile_version"], "created": m.get("created"),
                           "completed": m.get("completed"), "runs": len(m["runs"]), "options": m.get("options"),
                           **({"resources_built": built} if built else {})},
            "skipped": m["skipped"]}


def format_report(r: dict) -> str:
    state = "complete" if r["complete"] else "INCOMPLETE (rerun `gramtile prepare` to finish it)"
    out = [f"corpus store {r['path']}: {r['examples']} examples, {state}",
           f"shards: {r['shards_done']} done / {r['shards_total'] if r['shards_total'] is not None else '?'}"
           f"{'' if r['complete'] else ' expected'} (shard size {r['shard_size']})",
           f"content hash: {r['content_hash']}"]
    if "fields" in r:
        out.append("fields: " + ", ".join(f"{f} ({', '.join(reps)})" for f, reps in r["fields"].items()) +
                   "; each field's representation is stored as <field>.<representation>")
    else:
        out.append("fields: none (one text per example)")
    t = r.get("targets")
    out.append("targets: none" if t is None else
               f"targets: real-valued, min {t['min']:g}, max {t['max']:g}, mean {t['mean']:.3f}" if t["min"] is not None
               else "targets: real-valued")
    g = r.get("groups")
    out.append("groups: none" if g is None else
               f"groups: {g['count']}, {g['min_size']} to {g['max_size']} examples each")
    res = r.get("resources")
    out.append("resources: none" if not res else f"resources: {len(res)}")
    when = r["provenance"].get("resources_built") or {}
    out += [f"  {x['name']}" + (f" (from {x['rep']})" if x["rep"] else "") + f", content hash {x['content_hash'][:16]}"
            f", built {when.get(x['group'])}" for x in res or []]
    out += ["", "| label | count | share |", "|---|---:|---:|"]
    out += [f"| {x['label']} | {x['count']} | {100 * x['share']:.1f}% |" for x in r["labels"]]
    out += ["", "| representation | kind | mean nodes | max nodes |", "|---|---|---:|---:|"]
    out += [f"| {name} | {x['kind']} | {x['mean_nodes']:.1f} | {x['max_nodes']} |"
            for name, x in r["representations"].items()]
    out += ["", "vocabularies: " + ", ".join(f"{k} {v}" for k, v in r["vocab_sizes"].items())]
    p = r["provenance"]
    out.append(f"source: {p['source']} (format {p['input_format']})")
    if p["parser"]:
        pp = p["parser"]
        out.append(f"parser: {pp.get('model')} {pp.get('model_version')} (spaCy {pp.get('spacy_version')})")
    out.append(f"gramtile {p['gramtile_version']}; created {p['created']}; completed {p['completed']}; "
               f"{p['runs']} run(s)")
    if r["skipped"]:
        out.append(f"{len(r['skipped'])} record(s) skipped:")
        out += [f"  {s['error']}" for s in r["skipped"]]
    return "\n".join(out)


def run(args) -> int:
    r = report(args.corpus)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0
