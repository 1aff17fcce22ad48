"""Shared test helpers: where the real data lives, the rooms' markers, helpers several rooms use.

The tests are laid out by room of the code (``kernels``, ``readers``, ``resources``, ``stores``,
``compute``, ``learn``, ``workflows``), plus ``faults`` (the fault and integrity suites, marker
``faults``) and ``cluster`` (real SLURM and S3-protocol services, marker ``cluster``). Modules
shared by several rooms stay here at the top: this conftest, ``strategies``, ``reference/`` (the
slow, explicit kernels) and ``instances_<family>`` (the kernel contract instances).

The data sets sit beside the repository in ``../shared/data`` and are never copied into it.
Every test of a module that reads them carries the marker ``shared_data`` (set here at
collection, from the helpers the module uses), so ``pytest -m "not shared_data"`` is the
hermetic subset. Without the data those tests are skipped with the reason, unless
``GRAMTILE_REQUIRE_DATA=1`` (set by ``make test`` and so by CI), where a missing data set is a
hard failure: there a test that silently skips cannot pass for one that ran.
"""
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

#: the tests folder (the rooms are its subfolders)
HERE = Path(__file__).resolve().parent
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: make test / CI: a missing data set fails instead of skipping
REQUIRE_DATA = os.environ.get("GRAMTILE_REQUIRE_DATA") == "1"
#: names whose use in a test module means it reads ../shared/data
_DATA_HELPERS = ("require_data", "shared_data", "num_trees", "SHARED_DATA")
#: two dependency-parsed sentences in CoNLL-U, for tests of parsed input without spaCy
TWO_SENTENCES_CONLLU = """# sent_id = s1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_

# sent_id = s2
1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_

"""


def _missing(what: str):
    msg = f"{what} not found; these tests need ../shared/data beside the repository"
    if REQUIRE_DATA:
        pytest.fail(msg + " (GRAMTILE_REQUIRE_DATA=1)", pytrace=False)
    pytest.skip(msg, allow_module_level=True)


def require_data(name: str) -> Path:
    """Path of data set ``name`` under :data:`SHARED_DATA`; skips (or, when required, fails) if missing."""
    path = SHARED_DATA / name
    if not path.exists():
        _missing(f"data set {name!r} at {path}")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The root of the shared data sets (skips, or fails when required, if it is missing)."""
    if not SHARED_DATA.is_dir():
        _missing(f"shared data directory {SHARED_DATA}")
    return SHARED_DATA


#: test rooms whose every test carries the room's marker (``pytest -m "not faults"``)
_ROOM_MARKERS = {"faults": pytest.mark.faults}


def pytest_collection_modifyitems(config, items):
    """Mark every test of a module that uses the data helpers with ``shared_data``, and every test
    under a room of :data:`_ROOM_MARKERS` with that room's marker."""
    uses = {}
    for item in items:
        path = Path(str(item.fspath))
        room = path.parent.name if path.resolve().parent.parent == HERE else None
        if room in _ROOM_MARKERS:
            item.add_marker(_ROOM_MARKERS[room])
        if path not in uses:
            text = path.read_text(encoding="utf-8") if path.suffix == ".py" else ""
            uses[path] = path.name != "conftest.py" and any(h in text for h in _DATA_HELPERS)
        if uses[path]:
            item.add_marker(pytest.mark.shared_data)


def num_trees(n: int) -> list:
    """The first ``n`` Documents of the NUM training trees (SVM-Light-TK format)."""
    import itertools

    from gramtile.pipeline.parsing.formats import read

    path = require_data("trec_qc_num_constituency") / "NUM_train.dat"
    return list(itertools.islice(read(path, "svmlighttk"), n))


def corpus_store_of(path, docs, shard_size: int):
    """Write ``docs`` into a new corpus store at ``path`` in shards of ``shard_size``; returns path."""
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    cs = CorpusStore.create(path, shard_size=shard_size)
    for k in range(0, len(docs), shard_size):
        cs.write_shard(k // shard_size, docs[k:k + shard_size])
    cs.finish()
    cs.close()
    return path


@contextmanager
def lock_holder(store):
    """A live process holding the writer lock of the Gram store at ``store`` (path or URL) for
    the block; killed at its end, so the lock it leaves is stale."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time\nfrom gramtile.pipeline.stores.gram_store import store_lock\n"
         f"with store_lock({str(store)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def stop_after(k: int):
    """An ``on_tile`` callback that raises after ``k`` recorded tiles, and the list of their tiles."""
    seen = []

    def on_tile(res):
        seen.append(res.tile)
        if len(seen) == k:
            raise RuntimeError("stop here")

    return on_tile, seen


def evaluate_features(path, folds=3, seed=0, Cs=(1.0,), class_weight=None, solver="auto", epochs=5,
                      chunk_rows=20_000, rows=None, loss="squared_hinge", cluster=None, select="test",
                      inner_folds=3):
    """The linear learner on a feature store through the one selection loop, as `gramtile evaluate
    --features F --model linear` runs it (stratified folds over the rows' labels)."""
    from gramtile.pipeline.learn import selection
    from gramtile.pipeline.learn.folds import stratified_kfold
    from gramtile.pipeline.learn.learners.linear import FeatureData, Linear

    data = FeatureData.open(path, rows)
    splits = stratified_kfold(data.labels, folds, seed)
    return selection.evaluate(Linear(solver, epochs, chunk_rows, loss, seed), data, data.labels, splits,
                              {"C": list(Cs)}, class_weight=class_weight, select=select, inner_folds=inner_folds,
                              inner_seed=seed, cluster=cluster)


@pytest.fixture
def no_env(monkeypatch, tmp_path):
    """Run in an empty directory with no cluster environment variables."""
    monkeypatch.delenv("GRAMTILE_CLUSTER_FILE", raising=False)
    monkeypatch.delenv("GRAMTILE_SCHEDULER", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def senseval_head(src: Path, dst: Path, k: int) -> Path:
    """The first k instances of a senseval file, as a well-formed file of its own."""
    out, count = [], 0
    for line in src.read_text().splitlines(keepends=True):
        out.append(line)
        if line.strip() == "</instance>":
            count += 1
            if count == k:
                break
    dst.write_text("".join(out) + "</lexelt>\n</corpus>\n")
    return dst


def senseval_subset(src, dst, positions):
    """A well-formed senseval file holding the instances at ``positions`` of ``src``."""
    text = src.read_text()
    head = text[:text.index("<instance ")]
    blocks = re.findall(r"<instance .*?</instance>\s*", text, flags=re.S)
    dst.write_text(head + "".join(blocks[int(i)] for i in positions) + "</lexelt>\n</corpus>\n")
    return dst
