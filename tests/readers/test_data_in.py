"""Data as users hold it: CSV/TSV tables with chosen columns, parquet, JSON lines with chosen fields,
a folder of files, standard input, a labels file for any format, and tables in Python (pandas,
pyarrow, lists of dicts, a duck-typed ``datasets.Dataset``). Every bad row is an error naming the
file, the line (or row) and the column; nothing is written for a bad input."""
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gramtile
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.readers.base import ErrorPolicy
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.workflows.cli import main

CONLLU = """# sent_id = a
1\tdogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_

# sent_id = b
1\tcats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_

# sent_id = c
1\tbirds\tbird\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tsing\tsing\tVERB\tVBP\t_\t0\troot\t_\t_
"""


def write(folder, name, text=None):
    """``text`` written to ``folder / name`` (or to the path ``folder`` when ``text`` is left out)."""
    path, text = (folder, name) if text is None else (folder / name, text)
    path.write_text(text, encoding="utf-8")
    return path


def docs(path, fmt, **kw):
    return [(d.id, d.label, d.text) for d in read(path, fmt, **kw)]


def error(path, fmt, **kw) -> CorpusFormatError:
    with pytest.raises(CorpusFormatError) as info:
        list(read(path, fmt, **kw))
    return info.value


def names(err, path, line, *words):
    text = str(err)
    assert err.path == str(path) and err.line == line, (err.path, err.line, text)
    assert text.startswith(f"{path}, line {line}: ") and " Fix: " in text and text.endswith("."), text
    for w in words:
        assert w in text, (w, text)


# ---- CSV / TSV ------------------------------------------------------------------------------------

def test_csv_with_a_header_and_columns_by_name_or_position(tmp_path):
    p = write(tmp_path, "r.csv", 'id,review,stars\nr1,"good, really",5\nr2,"bad\nvery bad",1\nr3,fine,3\n')
    want = [("r1", "5", "good, really"), ("r2", "1", "bad\nvery bad"), ("r3", "3", "fine")]
    assert docs(p, "csv", text_col="review", label_col="stars", id_col="id") == want
    assert docs(p, "csv", header=True, text_col=2, label_col=3, id_col=1) == want
    assert [d.source for d in read(p, "csv", text_col="review")] == [f"{p}:2", f"{p}:3", f"{p}:5"]
    # a header with columns named text / label / id needs no column options
    q = write(tmp_path, "h.csv", "label,text\npos,a good film\nneg,a bad one\n")
    assert docs(q, "csv", header=True) == [("h:2", "pos", "a good film"), ("h:3", "neg", "a bad one")]


def test_tsv_header_line_never_becomes_a_class(tmp_path):
    p = write(tmp_path, "h.tsv", "label\ttext\npos\ta good film\nneg\ta bad one\n")
    names(error(p, "tsv"), p, 1, "looks like a header", "a class called 'label'", "--header", "--no-header")
    assert docs(p, "tsv", header=True) == [("h:2", "pos", "a good film"), ("h:3", "neg", "a bad one")]
    assert docs(p, "tsv", header=False)[0] == ("h:1", "label", "text")  # said to be data: read as data
    plain = write(tmp_path, "p.tsv", "pos\ta good film\nneg\ta bad one\n")
    assert docs(plain, "tsv") == [("p:1", "pos", "a good film"), ("p:2", "neg", "a bad one")]


def test_a_tab_inside_a_tsv_text_is_refused(tmp_path):
    p = write(tmp_path, "t.tsv", "pos\ta good film\nneg\ta bad\tone\n")
    names(error(p, "tsv"), p, 2, "3 tab-separated columns", "the text holds a tab", "--text-col")
    h = write(tmp_path, "h.tsv", "id\tlabel\ttext\n1\tpos\ta good film\n2\tneg\ta bad\tone\n")
    names(error(h, "tsv", header=True), h, 3, "4 columns where the header has 3", "a tab inside a text")
    n = write(tmp_path, "n.tsv", "1\tpos\ta good film\n2\tneg\ta bad\tone\n")
    names(error(n, "tsv", text_col=3, label_col=2), n, 2, "4 columns where line 1 has 3")
    assert docs(n, "tsv", text_col=3, label_col=2, on_error="skip") == [("n:1", "pos", "a good film")]


@pytest.mark.parametrize("content, kw, line, words", [
    ("id,text\n1,a b\n2,\n", {"header": True}, 3, ["column 2 ('text')", "empty text"]),
    ("text,label\na b,x\nc d, \n", {"header": True}, 3, ["column 2 ('label')", "empty label"]),
    ("id,text\n1,a b\n1,c d\n", {"header": True, "id_col": "id"}, 3, ["column 1 ('id')", "duplicate id '1'"]),
    ('text,label\n"a b,x\n', {"header": True}, 2, ["malformed CSV", "quote"]),
    ("a b,x\nc d\n", {"text_col": 1, "label_col": 2}, 2, ["1 columns where line 1 has 2"]),
    ("review,stars\na b,1\n", {"text_col": "body"}, 1, ["no column 'body' (--text-col)", "['review', 'stars']"]),
    ("review,stars\na b,1\n", {"header": True}, 1, ["no column named 'text'", "--text-col"]),
    ("a b,x\n", {"text_col": 1, "label_col": 5}, 1, ["--label-col 5", "a position from 1 to 2"]),
    ("text,label\na b,x\n,,\nc d,y\n", {"header": True}, 3, ["empty sentence"]),
    ("text,label\na,b\n", {"header": True, "text_col": 1, "label_col": 2}, None, None),
])
def test_bad_csv_rows_name_the_line_and_the_column(tmp_path, content, kw, line, words):
    p = write(tmp_path, "b.csv", content)
    if line is None:
        assert docs(p, "csv", **kw) == [("b:2", "b", "a")]
        return
    names(error(p, "csv", **kw), p, line, *words)


def test_csv_without_a_chosen_text_column_or_with_names_and_no_header_is_refused(tmp_path):
    p = write(tmp_path, "r.csv", "a b,x\n")
    assert "no text column chosen" in str(error(p, "csv")) and "--header" in str(error(p, "csv"))
    assert "need a header line" in str(error(p, "csv", header=False, text_col="text"))


def test_skip_mode_reads_the_good_rows_and_lists_the_bad(tmp_path):
    p = write(tmp_path, "s.csv", "text,label\na b,x\n,y\nc d,\ne f,z\n")
    policy = ErrorPolicy("skip")
    assert docs(p, "csv", header=True, policy=policy) == [("s:2", "x", "a b"), ("s:5", "z", "e f")]
    assert [e.line for e in policy.skipped] == [3, 4]


# ---- JSON lines with chosen fields ------------------------------------------------------------------

def test_jsonl_with_chosen_fields(tmp_path):
    p = write(tmp_path, "r.jsonl", '{"review": "good stuff", "stars": 5, "user": "u1"}\n'
                                   '{"review": "bad", "stars": 1, "id": "b"}\n')
    assert docs(p, "jsonl", text_col="review", label_col="stars") == [("r:1", "5", "good stuff"), ("b", "1", "bad")]
    names(error(p, "jsonl"), p, 1, "unknown key 'review'")  # the interchange format stays strict


@pytest.mark.parametrize("line2, words", [
    ('{"stars": 2}', ["no field 'review'"]),
    ('{"review": "ok", "stars": 1.5}', ["field 'stars'", "1.5 (float) is not a label"]),
    ('{"review": 7, "stars": 1}', ["field 'review'", "7 is a int, not a text"]),
    ('{"review": " ", "stars": 1}', ["field 'review'", "empty text"]),
    ('["review"]', ["expected a JSON object"]),
])
def test_bad_jsonl_fields_name_the_line_and_the_field(tmp_path, line2, words):
    p = write(tmp_path, "b.jsonl", '{"review": "good", "stars": 5}\n' + line2 + "\n")
    names(error(p, "jsonl", text_col="review", label_col="stars"), p, 2, *words)


# ---- parquet --------------------------------------------------------------------------------------

def test_parquet_with_chosen_columns(tmp_path):
    p = tmp_path / "r.parquet"
    pd.DataFrame({"sid": ["a", "b"], "body": ["the dog barks", "cats sleep"], "y": [1, 0]}).to_parquet(p)
    assert docs(p, "parquet", text_col="body", label_col="y", id_col="sid") == [("a", "1", "the dog barks"),
                                                                                ("b", "0", "cats sleep")]
    assert docs(p, "parquet", text_col=2) == [("r:1", None, "the dog barks"), ("r:2", None, "cats sleep")]


def test_bad_parquet_rows_and_files(tmp_path):
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": ["a b", None, "c d"], "label": ["x", "y", None]}), p)
    err = error(p, "parquet")
    assert str(err).startswith(f"{p}: row 2, column 'text': no text") and err.fix
    policy = ErrorPolicy("skip")
    assert docs(p, "parquet", policy=policy) == [("b:1", "x", "a b")]
    assert ["row 2, column 'text'" in str(policy.skipped[0]), "row 3, column 'label'" in str(policy.skipped[1])] == \
        [True, True]
    assert "no column 'body'" in str(error(p, "parquet", text_col="body"))
    bad = write(tmp_path, "not.parquet", "text\nhello\n")
    assert "not a readable parquet file" in str(error(bad, "parquet"))


def test_parquet_without_pyarrow_is_refused_with_the_pip_command(tmp_path):
    p = tmp_path / "r.parquet"
    pd.DataFrame({"text": ["a b"]}).to_parquet(p)
    # pyarrow made unimportable in a fresh interpreter, as where it is not installed
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from gramtile.pipeline.parsing.formats import read\n"
            f"list(read({str(p)!r}, 'parquet'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0 and "needs the pyarrow package" in r.stderr
    assert "pip install 'gramtile[parquet]'" in r.stderr


# ---- a folder of files --------------------------------------------------------------------------

def test_a_folder_of_class_folders(tmp_path):
    root = tmp_path / "reviews"
    for label, name, text in (("neg", "1.txt", "a bad film"), ("pos", "2.txt", "a good film\n"),
                              ("pos", "1.txt", "\ufeffgreat")):
        (root / label).mkdir(parents=True, exist_ok=True)
        write(root / label / name, text)
    write(root / "pos" / ".DS_Store", "x")
    assert docs(root, "files") == [("neg/1.txt", "neg", "a bad film"), ("pos/1.txt", "pos", "great"),
                                   ("pos/2.txt", "pos", "a good film")]
    flat = tmp_path / "flat"
    flat.mkdir()
    write(flat / "a.txt", "one text")
    assert docs(flat, "files") == [("a.txt", None, "one text")]


def test_bad_folders_and_files_are_named(tmp_path):
    root = tmp_path / "r"
    (root / "pos").mkdir(parents=True)
    write(root / "pos" / "1.txt", "good")
    write(root / "stray.txt", "no class")
    err = error(root, "files")
    assert err.path == str(root / "stray.txt") and "such a file has no class" in str(err)
    (root / "stray.txt").unlink()
    (root / "pos" / "2.txt").write_bytes(b"ok\nbad \xff byte\n")
    err = error(root, "files")
    assert err.path == str(root / "pos" / "2.txt") and err.line == 2 and "0xFF at column 5" in str(err)
    (root / "pos" / "2.txt").write_text("  \n", encoding="utf-8")
    assert "empty document" in str(error(root, "files"))
    (root / "pos" / "2.txt").unlink()
    (root / "pos" / "deeper").mkdir()
    assert "a folder inside a class folder" in str(error(root, "files"))
    assert "is a file, not a folder" in str(error(root / "pos" / "1.txt", "files"))


# ---- labels from a file ---------------------------------------------------------------------------

def test_conllu_takes_labels_from_a_file(tmp_path):
    p = write(tmp_path, "s.conllu", CONLLU)
    labels = write(tmp_path, "labels.txt", "ANIMAL\nCAT\n ANIMAL \n\n")
    got = list(read(p, "conllu", labels=labels))
    assert [(d.id, d.label) for d in got] == [("a", "ANIMAL"), ("b", "CAT"), ("c", "ANIMAL")]
    assert list(got[0].structures["dep"].words) == ["dogs", "bark"]


def test_a_labels_file_of_another_count_names_both_counts(tmp_path):
    p = write(tmp_path, "s.conllu", CONLLU)
    for text, n in (("A\nB\n", 2), ("A\nB\nC\nD\n", 4)):
        err = error(p, "conllu", labels=write(tmp_path, "l.txt", text))
        assert f"{n} labels for 3 records of {p}" in str(err) and "give exactly 3 labels" in str(err)
    err = error(p, "conllu", labels=write(tmp_path, "l.txt", "A\n\nC\n"))
    assert err.line == 2 and "empty label" in str(err)


def test_labels_never_silently_replace_a_records_own(tmp_path):
    labels = write(tmp_path, "l.txt", "A\nB\n")
    tsv = write(tmp_path, "t.tsv", "pos\ta b\nneg\tc d\n")
    assert "already has the label 'pos'" in str(error(tsv, "tsv", labels=labels))
    svm = write(tmp_path, "t.svm", "1 |BT| (S (NN a)) |ET|\n")
    assert "carries labels of its own" in str(error(svm, "svmlighttk", labels=labels))
    # a table read without its label column takes them
    csv_ = write(tmp_path, "t.csv", "text,stars\na b,5\nc d,1\n")
    assert docs(csv_, "csv", header=True, labels=labels) == [("t:2", "A", "a b"), ("t:3", "B", "c d")]


def test_a_skipped_record_keeps_its_label_line(tmp_path):
    p = write(tmp_path, "s.csv", "text\na b\n\"\"\nc d\n")
    labels = write(tmp_path, "l.txt", "A\nB\nC\n")
    assert docs(p, "csv", header=True, labels=labels, on_error="skip") == [("s:2", "A", "a b"), ("s:4", "C", "c d")]


# ---- the command line -----------------------------------------------------------------------------

def test_prepare_conllu_with_labels_and_table_options_on_the_command_line(tmp_path, capsys):
    p = write(tmp_path, "s.conllu", CONLLU)
    labels = write(tmp_path, "labels.txt", "ANIMAL\nCAT\nANIMAL\n")
    out = tmp_path / "s.zarr"
    assert main(["prepare", "--input", str(p), "--format", "conllu", "--labels", str(labels), "--out", str(out),
                 "--reps", "dep,tree", "--no-progress"]) == 0
    assert CorpusStore.open(out).labels == ["ANIMAL", "CAT", "ANIMAL"]
    assert main(["prepare", "--input", str(p), "--format", "conllu", "--text-col", "x", "--out",
                 str(tmp_path / "x.zarr"), "--no-progress"]) == 2
    assert "--text-col applies to --format" in capsys.readouterr().err
    short = write(tmp_path, "short.txt", "A\n")
    assert main(["prepare", "--input", str(p), "--format", "conllu", "--labels", str(short), "--out",
                 str(tmp_path / "y.zarr"), "--no-progress"]) == 2
    assert "1 labels for 3 records" in capsys.readouterr().err and not (tmp_path / "y.zarr").exists()


def test_prepare_reads_a_csv_from_standard_input_and_refuses_a_bad_row(tmp_path):
    csv_ = "id,review,stars\nr1,\"good, really good\",5\nr2,a bad film,1\n"
    out = tmp_path / "r.zarr"
    argv = [sys.executable, "-m", "gramtile", "prepare", "--input", "-", "--format", "csv", "--text-col", "review",
            "--label-col", "stars", "--id-col", "id", "--cluster", "sequential", "--no-progress"]
    r = subprocess.run(argv + ["--out", str(out)], input=csv_, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    store = CorpusStore.open(out)
    assert store.ids == ["r1", "r2"] and store.labels == ["5", "1"] and "tree" in store.representations
    r = subprocess.run(argv + ["--out", str(tmp_path / "bad.zarr")], input=csv_ + "r3,,2\n", capture_output=True,
                       text=True)
    assert r.returncode == 2 and "<stdin>, line 4: column 2 ('review'): empty text" in r.stderr
    assert not (tmp_path / "bad.zarr").exists()


# ---- tables in Python -----------------------------------------------------------------------------

class Dataset:
    """The parts of a Hugging Face ``datasets.Dataset`` gramtile reads: ``column_names``, ``features``,
    ``len`` and a column by name (a real, small class: ``datasets`` is not a dependency)."""

    def __init__(self, columns):
        self._columns = columns
        self.column_names = list(columns)
        self.features = {c: "string" for c in columns}

    def __len__(self):
        return len(next(iter(self._columns.values())))

    def __getitem__(self, key):
        return list(self._columns[key])


def test_tables_in_python_become_labelled_documents():
    frame = pd.DataFrame({"body": ["(S (NN a))", "(S (VB b))"], "y": [1, 0], "key": ["k1", "k2"]})
    got = gramtile.parse(frame, text="body", label="y", id="key", reps=["tree"])
    assert [(d.id, d.label) for d in got] == [("k1", "1"), ("k2", "0")]
    for table in (frame["body"], pa.table({"text": ["(S (NN a))", "(S (VB b))"]}),
                  Dataset({"text": ["(S (NN a))", "(S (VB b))"], "label": ["x", "y"]}),
                  [{"text": "(S (NN a))", "label": "x"}, {"text": "(S (VB b))", "label": "y"}]):
        got = gramtile.parse(table, reps=["tree"])
        assert [str(d.structures["tree"]) for d in got] == ["(S (NN a))", "(S (VB b))"], type(table)
    assert gramtile.parse(Dataset({"text": ["(S (NN a))"], "label": ["x"]}))[0].label == "x"


@pytest.mark.parametrize("table, kw, words", [
    (pd.DataFrame({"a": ["x"], "b": ["y"]}), {}, ["no column named 'text'", "['a', 'b']"]),
    (pd.DataFrame({"text": ["x y", None]}), {}, ["row 1, column 'text': no text"]),
    (pd.DataFrame({"text": ["x y", "z"], "label": ["a", 2.5]}), {}, ["row 1, column 'label'", "2.5"]),
    (pd.DataFrame({"text": ["x y"]}, index=["r7"]), {"label": "y"}, ["no column 'y'"]),
    ([{"text": "x y"}, {"body": "z"}], {}, ["row 1: no key 'text'"]),
    (pa.table({"text": ["a", "b"], "id": [1, 1]}), {}, ["row 1, column 'id': duplicate id '1'"]),
])
def test_bad_rows_of_python_tables_name_the_row_and_the_column(table, kw, words):
    with pytest.raises(CorpusFormatError) as info:
        gramtile.parse(table, reps=["tree"], **kw)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_a_one_column_dataframe_is_its_texts_for_gram_and_kernel_svc():
    texts = ["the dog barks", "a dog sleeps", "what time is it", "where is the station"]
    frame = pd.DataFrame({"text": texts})
    spec = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}
    K = gramtile.gram(spec, frame)
    assert K.shape == (4, 4)
    assert (gramtile.gram(spec, texts) == K).all()
    clf = gramtile.KernelSVC(kernel=spec).fit(frame, ["S", "S", "Q", "Q"])
    assert list(clf.predict(frame)) == ["S", "S", "Q", "Q"]


# ---- --labels on train, evaluate and export ---------------------------------------------------------

def test_train_evaluate_and_export_take_labels_from_a_file(tmp_path, capsys):
    trees = [f"(S (NP (DT the) (NN {w})) (VP (VBZ {v})))" for w, v in
             (("dog", "barks"), ("cat", "sleeps"), ("dog", "sleeps"), ("cat", "barks"))] * 3
    trees += [f"(SQ (WP what) (VBZ is) (NP (DT the) (NN {w})))" for w in ("time", "date", "name")] * 4
    jsonl = write(tmp_path, "t.jsonl", "".join(f'{{"tree": "{t}"}}\n' for t in trees))
    labels = write(tmp_path, "labels.txt", "S\n" * 12 + "Q\n" * 12)
    corpus, gram = tmp_path / "t.zarr", tmp_path / "g.zarr"
    spec = '{"kind": "st", "lam": 0.4}'
    assert main(["prepare", "--input", str(jsonl), "--format", "jsonl", "--out", str(corpus), "--no-progress"]) == 0
    assert main(["gram", "--corpus", str(corpus), "--kernel", spec, "--out", str(gram), "--cluster", "sequential",
                 "--no-progress"]) == 0
    # export: the file's labels go beside the matrix
    out = tmp_path / "k.svm"
    assert main(["export", str(gram), "--out", str(out), "--format", "svmlight", "--labels", str(labels)]) == 0
    rows = (tmp_path / "k.svm.rows.tsv").read_text().splitlines()
    assert [r.split("\t")[-1] for r in rows[-24:]] == ["S"] * 12 + ["Q"] * 12
    # evaluate: k-fold on the file's labels
    capsys.readouterr()
    assert main(["evaluate", "--gram", str(gram), "--labels", str(labels), "--folds", "3", "--no-progress"]) == 0
    assert f"labels from {labels}" in capsys.readouterr().err
    # train: from the corpus and its Gram store, with the file's labels instead of the store's none
    model = tmp_path / "m"
    assert main(["train", "--corpus", str(corpus), "--gram", str(gram), "--kernel", spec, "--labels", str(labels),
                 "--out", str(model)]) == 0
    from gramtile.pipeline.learn.models import SavedModel
    assert sorted(SavedModel.load(model).classes) == ["Q", "S"]
    # train from --input with --labels; a count that differs names both counts, for every command
    assert main(["train", "--input", str(jsonl), "--kernel", spec, "--labels", str(labels), "--out",
                 str(tmp_path / "m2")]) == 0
    # predict reads a table's chosen columns (raw text, parsed by spaCy)
    table = write(tmp_path, "new.csv", "key,sentence\nn1,the dog barks\nn2,what is the time\n")
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(model), "--input", str(table), "--format", "csv", "--text-col",
                 "sentence", "--id-col", "key"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()[-2:]] == ["n1", "n2"]
    short = write(tmp_path, "short.txt", "S\nQ\n")
    capsys.readouterr()
    for argv in (["export", str(gram), "--out", str(tmp_path / "x.npy"), "--labels", str(short)],
                 ["evaluate", "--gram", str(gram), "--labels", str(short), "--no-progress"],
                 ["train", "--corpus", str(corpus), "--gram", str(gram), "--kernel", spec, "--labels", str(short),
                  "--out", str(tmp_path / "m3")],
                 ["train", "--input", str(jsonl), "--kernel", spec, "--labels", str(short), "--out",
                  str(tmp_path / "m4")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "2 labels for" in err and "24" in err, (argv, err)
    assert not (tmp_path / "x.npy").exists() and not (tmp_path / "m3").exists() and not (tmp_path / "m4").exists()
