"""Corpus stores of examples made of several texts (fields), with targets and group ids: prepared
from synthetic pair files with real spaCy and real Zarr; each field's representations equal those
of its texts prepared as a single-text corpus; resume after an interrupted prepare; the identity
(content hash) covers fields, targets and groups; stores of single texts keep their layout."""
import contextlib
import io
import json

import numpy as np
import pytest

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.links import link_key, rel_tree
from gramtile.pipeline.parsing.parse import parse_texts
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.fields import field_key, split_key
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError
from gramtile.workflows.cli import main

A = ["A dog runs in the park .", "Two men play chess .", "The girl is reading a book .", "A cat sleeps .",
     "Kids are playing football outside .", "A woman cuts an onion .", "The man rides a horse .",
     "Nobody is singing .", "A bird flies over the lake .", "The chef is cooking pasta ."]
B = ["A dog is running .", "Two people are playing a game .", "A child reads .", "The cat is awake .",
     "Children play soccer .", "Someone slices a vegetable .", "A horse is ridden by a man .",
     "A man sings loudly .", "A plane flies .", "Pasta is being cooked by a chef ."]
SCORES = [4.5, 3.9, 3.2, 2.0, 4.7, 4.1, 4.9, 1.3, 2.2, 4.8]
GROUPS = ["g1", "g1", "g1", "g2", "g2", "g3", "g3", "g3", "g3", "g4"]
LABELS = ["ENTAILMENT", "NEUTRAL", "NEUTRAL", "CONTRADICTION", "ENTAILMENT", "NEUTRAL", "ENTAILMENT",
          "CONTRADICTION", "NEUTRAL", "ENTAILMENT"]
SINGLE_MANIFEST_KEYS = {"format_version", "gramtile_version", "source", "input_format", "shard_size", "n_examples",
                        "complete", "shards", "representations", "parser", "content_hash", "skipped", "runs",
                        "options", "created", "labels_encoding", "expected_shards", "completed"}
SINGLE_ROOT = {"ids", "labels", "texts", "sources", "vocab", "reps", "zarr.json"}


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


def _pairs_tsv(path, rows=None):
    rows = rows if rows is not None else [f"p{i}\t{a}\t{b}\t{s}\t{g}\t{y}"
                                          for i, (a, b, s, g, y) in enumerate(zip(A, B, SCORES, GROUPS, LABELS))]
    path.write_text("id\tsa\tsb\tscore\tgroup\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


OPTS = {"fields": "a=sa,b=sb", "target_col": "score", "group_col": "group", "label_col": "label", "id_col": "id"}


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    summary = prepare(_pairs_tsv(d / "pairs.tsv"), "tsv", d / "p.zarr", shard_size=4, cluster="sequential",
                      reader_options=OPTS)
    return d / "p.zarr", summary


@pytest.fixture(scope="module")
def single_stores(tmp_path_factory):
    """Each field's texts prepared as a corpus of single texts (format text), same shard size."""
    d = tmp_path_factory.mktemp("single")
    out = {}
    for name, texts in (("a", A), ("b", B)):
        (d / f"{name}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        prepare(d / f"{name}.txt", "text", d / f"{name}.zarr", shard_size=4, cluster="sequential")
        out[name] = CorpusStore.open(d / f"{name}.zarr")
    return out


@pytest.mark.timeout(300)
def test_pair_store_round_trip(pair_store, single_stores):
    path, summary = pair_store
    store = CorpusStore.open(path)
    assert store.complete and store.n == 10 and store.shard_ranges == [(0, 4), (4, 8), (8, 10)]
    assert store.fields == ("a", "b")
    assert store.ids == [f"p{i}" for i in range(10)] and store.labels == LABELS
    t = store.targets
    assert t.dtype == np.float64 and t.tolist() == SCORES
    assert store.groups.tolist() == GROUPS
    single_reps = single_stores["a"].representations
    assert set(single_reps) == {"dep", "seq", "tree", "ptree"}
    # every field has the single texts' representations, and its tree with the pair's relational links
    assert store.representations == {field_key(f, r): k for f in ("a", "b")
                                     for r, k in {**single_reps, "rel_tree": "tree"}.items()}
    for f in ("a", "b"):
        assert store.field_representations(f) == {**single_reps, "rel_tree": "tree"}
    docs = store.documents()
    assert [d.fields for d in docs] == [{"a": a, "b": b} for a, b in zip(A, B)]
    assert all(d.text is None for d in docs)
    assert [d.target for d in docs] == SCORES and [d.group for d in docs] == GROUPS
    # each field's representations equal its texts prepared as single texts (decoded: vocabulary ids differ)
    for f in ("a", "b"):
        singles = single_stores[f].documents()
        for d, s in zip(docs, singles):
            assert {r: d.structures[field_key(f, r)] for r in single_reps} == s.structures
    # the linked trees: each field's tree with the words the other field shares marked
    for d in docs:
        deps = {f: d.structures[field_key(f, "dep")] for f in ("a", "b")}
        for f, g in (("a", "b"), ("b", "a")):
            others = {k for i in range(len(deps[g].words)) if (k := link_key(deps[g], i)) is not None}
            assert d.structures[field_key(f, "rel_tree")] == rel_tree(deps[f], others)
    # a field's batch is read as a single-text store's representation is, across shards
    batch = store.load("b.tree", 2, 9)
    assert batch.n == 7 and batch.kind == "tree"
    assert np.array_equal(np.diff(batch.offsets), store.sizes("b.tree")[2:9])
    assert store.sizes("a.seq").tolist() == single_stores["a"].sizes("seq").tolist()
    assert store.verify()
    assert "a.tree (tree)" in summary.text()
    m = store.manifest
    assert m["fields"] == ["a", "b"] and m["targets"] is True and m["groups"] is True


@pytest.mark.timeout(300)
def test_single_text_stores_keep_their_layout(single_stores):
    s = single_stores["a"]
    assert set(s.manifest) == SINGLE_MANIFEST_KEYS
    assert {p.name for p in s.path.iterdir() if p.name != ".lock"} == SINGLE_ROOT
    assert s.fields == () and s.targets is None and s.groups is None
    assert all(d.fields is None and d.target is None and d.group is None for d in s.documents())
    assert s.documents()[0].text == A[0]
    with pytest.raises(StoreError, match="holds single texts"):
        s.field_representations("a")


def _docs(fields=True, target=True, group=True, n=6):
    parsed = parse_texts(A[:n] + B[:n])
    out = []
    for i in range(n):
        structures = ({**{field_key("q", r): s for r, s in parsed[i].items()},
                       **{field_key("c", r): s for r, s in parsed[n + i].items()}} if fields else parsed[i])
        out.append(Document(id=f"e{i}", label="x", text=None if fields else A[i],
                            fields={"q": A[i], "c": B[i]} if fields else None,
                            target=SCORES[i] if target else None, group=GROUPS[i] if group else None,
                            structures=structures))
    return out


def _write(path, docs, shard_size=3):
    store = CorpusStore.create(path, source="mem", input_format="jsonl", shard_size=shard_size)
    run = store.begin_run({})
    for k in range(0, len(docs), shard_size):
        store.write_shard(k // shard_size, docs[k:k + shard_size], run)
    store.finish()
    store.close()
    return CorpusStore.open(path)


@pytest.mark.timeout(300)
def test_identity_covers_fields_targets_and_groups(tmp_path):
    docs = _docs()
    base = _write(tmp_path / "base.zarr", docs).content_hash
    assert _write(tmp_path / "again.zarr", _docs()).content_hash == base
    changed = _docs()
    changed[4].target = SCORES[4] + 0.25
    assert _write(tmp_path / "t.zarr", changed).content_hash != base
    changed = _docs()
    changed[1].group = "other"
    assert _write(tmp_path / "g.zarr", changed).content_hash != base
    no_groups = _write(tmp_path / "ng.zarr", _docs(group=False))
    assert no_groups.groups is None and no_groups.targets.tolist() == SCORES[:6]
    assert no_groups.content_hash != base
    # the same texts and structures under other field names: another corpus
    renamed = []
    for d in _docs():
        renamed.append(Document(id=d.id, label=d.label, fields={"x": d.fields["q"], "y": d.fields["c"]},
                                target=d.target, group=d.group,
                                structures={field_key("x" if k.startswith("q.") else "y", k.split(".", 1)[1]): s
                                            for k, s in d.structures.items()}))
    assert _write(tmp_path / "r.zarr", renamed).content_hash != base


@pytest.mark.timeout(300)
def test_examples_must_carry_what_the_store_carries(tmp_path):
    docs = _docs()
    cases = [
        (lambda d: setattr(d, "target", None), "has no target, but this corpus stores one"),
        (lambda d: setattr(d, "group", None), "has no group, but this corpus stores one"),
        (lambda d: setattr(d, "target", float("nan")), "not a finite number"),
        (lambda d: setattr(d, "fields", {"c": d.fields["c"], "q": d.fields["q"]}), "same fields, in the same order"),
    ]
    for i, (spoil, words) in enumerate(cases):
        bad = _docs()
        spoil(bad[4])
        store = CorpusStore.create(tmp_path / f"c{i}.zarr", shard_size=3)
        run = store.begin_run({})
        store.write_shard(0, bad[:3], run)
        with pytest.raises(CorpusFormatError, match=words):
            store.write_shard(1, bad[3:], run)
        assert store.shard_ranges == [(0, 3)]
        store.write_shard(1, docs[3:], run)  # the good shard still goes in: nothing of the bad one stayed
        store.finish()
        store.close()
        assert CorpusStore.open(tmp_path / f"c{i}.zarr").content_hash == _write(tmp_path / f"ok{i}.zarr",
                                                                              _docs()).content_hash
    # a new store checks its first example's field names, and that every structure names a field
    for i, (spoil, words) in enumerate([
            (lambda d: setattr(d, "structures", {**d.structures, "tree": d.structures["q.tree"]}),
             r"structures \['tree'\] name none of them"),
            (lambda d: setattr(d, "fields", {"q.x": "a", "c": "b"}), "not a field name")]):
        bad = _docs()
        spoil(bad[0])
        store = CorpusStore.create(tmp_path / f"first{i}.zarr", shard_size=3)
        with pytest.raises(CorpusFormatError, match=words):
            store.write_shard(0, bad[:3], store.begin_run({}))
        assert store.shard_ranges == [] and "fields" not in store.manifest
        store.close()
    single = _docs(fields=False, target=False, group=False)
    store = CorpusStore.create(tmp_path / "mixed.zarr", shard_size=3)
    run = store.begin_run({})
    store.write_shard(0, single[:3], run)
    with pytest.raises(CorpusFormatError, match="this corpus stores single texts"):
        store.write_shard(1, docs[3:], run)
    store.close()


@pytest.mark.timeout(600)
def test_interrupted_pair_prepare_resumes_to_the_same_store(tmp_path, pair_store):
    rows = [f"p{i}\t{a}\t{b}\t{s}\t{g}\t{y}" for i, (a, b, s, g, y) in enumerate(zip(A, B, SCORES, GROUPS, LABELS))]
    rows[9] = "p9\tThe chef is cooking pasta .\tPasta is cooked .\tlots\tg4\tENTAILMENT"  # a bad target
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", rows)
    out = tmp_path / "p.zarr"
    with pytest.raises(CorpusFormatError, match=r"pairs.tsv, line 11: column 4 \('score'\): 'lots'"):
        prepare(tsv, "tsv", out, shard_size=4, cluster="sequential", reader_options=OPTS)
    store = CorpusStore.open(out)
    assert not store.complete and store.shard_ranges == [(0, 4), (4, 8)]
    assert store.fields == ("a", "b") and store.targets.tolist() == SCORES[:8] and store.groups.tolist() == GROUPS[:8]
    written = store.documents()
    # the input mended (same rows before it): the rerun writes only the shard not done
    _pairs_tsv(tsv)
    summary = prepare(tsv, "tsv", out, shard_size=4, cluster="sequential", reader_options=OPTS)
    assert summary.shards_parsed == [2] and summary.shards_reused == 2
    store = CorpusStore.open(out)
    assert store.complete and store.documents(0, 8) == written
    assert store.content_hash == CorpusStore.open(pair_store[0]).content_hash


@pytest.mark.timeout(300)
def test_prepare_and_inspect_on_the_command_line(tmp_path, pair_store):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv")
    out = tmp_path / "c.zarr"
    rc, text = _cli("prepare", "--input", tsv, "--format", "tsv", "--fields", "a=sa,b=sb", "--target-col", "score",
                    "--group-col", "group", "--label-col", "label", "--id-col", "id", "--out", out,
                    "--shard-size", 4, "--cluster", "sequential", "--no-progress")
    assert rc == 0 and "a.ptree (ptree)" in text and "b.dep (dep)" in text
    assert CorpusStore.open(out).content_hash == CorpusStore.open(pair_store[0]).content_hash
    rc, text = _cli("inspect", out)
    assert rc == 0
    assert "fields: a (dep, ptree, rel_tree, seq, tree), b (dep, ptree, rel_tree, seq, tree)" in text
    assert f"targets: real-valued, min {min(SCORES):g}, max {max(SCORES):g}" in text
    assert "groups: 4, 1 to 4 examples each" in text
    rc, js = _cli("inspect", out, "--json")
    r = json.loads(js)
    assert r["fields"] == {"a": ["dep", "ptree", "rel_tree", "seq", "tree"], "b": ["dep", "ptree", "rel_tree", "seq", "tree"]}
    assert r["groups"] == {"count": 4, "min_size": 1, "max_size": 4}
    assert r["targets"]["mean"] == pytest.approx(np.mean(SCORES))
    # a store of single texts says it has none
    (tmp_path / "one.txt").write_text("\n".join(A[:3]) + "\n", encoding="utf-8")
    rc, _ = _cli("prepare", "--input", tmp_path / "one.txt", "--format", "text", "--out", tmp_path / "one.zarr",
                 "--cluster", "sequential", "--no-progress")
    rc, text = _cli("inspect", tmp_path / "one.zarr")
    assert "fields: none" in text and "targets: none" in text and "groups: none" in text
    rc, js = _cli("inspect", tmp_path / "one.zarr", "--json")
    assert not {"fields", "targets", "groups"} & set(json.loads(js))


@pytest.mark.timeout(120)
def test_field_options_are_checked_before_any_work(tmp_path, capsys):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv")
    for argv, words in ((["--format", "parquet", "--fields", "a=1,b=2"], "--fields applies to --format tsv, csv, jsonl"),
                        (["--format", "msrp", "--target-col", "x"], "whose fields are fixed"),
                        (["--format", "tsv", "--fields", "a=sa,b=sb", "--text-col", "sa"], "--fields and --text-col"),
                        (["--format", "msrp", "--emit-jsonl", str(tmp_path / "e.jsonl")], "--emit-jsonl writes one text")):
        rc = main(["prepare", "--input", str(tsv), "--out", str(tmp_path / "x.zarr"), "--cluster", "sequential",
                   *argv])
        assert rc == 2 and words in capsys.readouterr().err
        assert not (tmp_path / "x.zarr").exists()


@pytest.mark.timeout(300)
def test_parse_reads_tuples_and_tables_of_several_texts():
    pd = pytest.importorskip("pandas")
    docs = gramtile.parse(list(zip(A[:3], B[:3])), fields=["premise", "hypothesis"], reps=["tree", "seq"])
    singles = {"premise": gramtile.parse(A[:3], reps=["tree", "seq"]),
               "hypothesis": gramtile.parse(B[:3], reps=["tree", "seq"])}
    assert [d.fields for d in docs] == [{"premise": a, "hypothesis": b} for a, b in zip(A[:3], B[:3])]
    for i, d in enumerate(docs):
        assert set(d.structures) == {"premise.tree", "premise.seq", "hypothesis.tree", "hypothesis.seq"}
        for f in singles:
            assert {split_key(k, ("premise", "hypothesis"))[1]: s for k, s in d.structures.items()
                    if k.startswith(f + ".")} == singles[f][i].structures
    # in memory too, a kernel reads one field through its rep
    spec = {"kind": "sst", "lam": 0.4}
    assert np.array_equal(gramtile.gram({**spec, "rep": "hypothesis.tree"}, docs), gramtile.gram(spec, singles["hypothesis"]))
    df = pd.DataFrame({"sa": A[:4], "sb": B[:4], "score": SCORES[:4], "g": GROUPS[:4], "y": LABELS[:4]})
    docs = gramtile.parse(df, fields={"a": "sa", "b": "sb"}, target="score", group="g", label="y", reps=["seq"])
    assert [d.target for d in docs] == SCORES[:4] and [d.group for d in docs] == GROUPS[:4]
    assert [d.label for d in docs] == LABELS[:4] and docs[3].fields == {"a": A[3], "b": B[3]}
    assert docs[2].structures["b.seq"] == gramtile.parse([B[2]], reps=["seq"])[0].structures["seq"]
    with pytest.raises(TypeError, match="tuple of 2 items"):
        gramtile.parse([("a b", "c d"), ("e f",)], fields=["x", "y"])
    with pytest.raises(CorpusFormatError, match="not a field name"):
        gramtile.parse([("a b", "c d")], fields=["x.1", "y"])


@pytest.mark.timeout(600)
def test_a_kernel_reads_one_field_through_its_rep(pair_store, single_stores, tmp_path):
    """The Gram matrix of a kernel whose ``rep`` names a field's representation equals the one over
    that field's texts prepared as single texts; a kernel naming no field is refused, naming the fix."""
    path = pair_store[0]
    for f in ("a", "b"):
        for spec, rep in (({"kind": "sst", "lam": 0.4}, "tree"), ({"kind": "route", "lam": 0.5}, "ptree"), ({"kind": "pt", "lam": 0.4, "mu": 0.4}, "tree")):
            K = run_gram(path, {**spec, "rep": field_key(f, rep)}, tmp_path / f"{f}-{spec['kind']}-{rep}.zarr", tile=4,
                         cluster="sequential").view().to_numpy()
            S = run_gram(single_stores[f].path, spec, tmp_path / f"single-{f}-{spec['kind']}-{rep}.zarr", tile=4,
                         cluster="sequential").view().to_numpy()
            assert K.shape == (10, 10) and np.array_equal(K, S)
    Ka = run_gram(path, {"kind": "sst", "lam": 0.4, "rep": "a.tree"}, tmp_path / "a-tree.zarr", cluster="sequential").view().to_numpy()
    Kb = run_gram(path, {"kind": "sst", "lam": 0.4, "rep": "b.tree"}, tmp_path / "b-tree.zarr", cluster="sequential").view().to_numpy()
    assert not np.array_equal(Ka, Kb)
    with pytest.raises(KernelSpecError, match=r"holds examples of the fields \['a', 'b'\].*\"rep\": \"a.tree\""):
        run_gram(path, {"kind": "sst", "lam": 0.4}, tmp_path / "none.zarr", cluster="sequential")


@pytest.mark.timeout(300)
def test_pair_store_at_a_url_equals_the_one_at_a_path(tmp_path, pair_store):
    """At a URL the targets and groups grow ahead with the other per-example arrays and are cut
    to length at the end (the write-behind writer): the store equals the one at a path."""
    url = f"memory://pairs-{tmp_path.name}/p.zarr"
    prepare(_pairs_tsv(tmp_path / "pairs.tsv"), "tsv", url, shard_size=4, cluster="sequential", reader_options=OPTS)
    store = CorpusStore.open(url)
    assert store.content_hash == CorpusStore.open(pair_store[0]).content_hash
    assert store.targets.tolist() == SCORES and store.groups.tolist() == GROUPS and store.fields == ("a", "b")
    assert store.verify()


@pytest.mark.timeout(300)
def test_reps_name_the_representations_of_every_field(tmp_path, pair_store):
    out = tmp_path / "r.zarr"
    prepare(_pairs_tsv(tmp_path / "pairs.tsv"), "tsv", out, shard_size=4, cluster="sequential", reader_options=OPTS,
            reps=["tree", "seq"])
    store = CorpusStore.open(out)
    assert store.representations == {"a.tree": "tree", "a.seq": "seq", "b.tree": "tree", "b.seq": "seq"}
    full = CorpusStore.open(pair_store[0]).documents()
    for d, f in zip(store.documents(), full):
        assert d.structures == {k: f.structures[k] for k in ("a.tree", "a.seq", "b.tree", "b.seq")}
    with pytest.raises(CorpusFormatError, match="field 'a': representation 'wsd' cannot be made"):
        prepare(_pairs_tsv(tmp_path / "pairs.tsv"), "tsv", tmp_path / "w.zarr", shard_size=4, cluster="sequential",
                reader_options=OPTS, reps=["tree", "wsd"])
