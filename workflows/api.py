"""The command line as Python functions: ``gramtile.prepare``, ``gram``, ``features``,
``evaluate``, ``train``, ``predict``, ``export`` and ``open``.

Each function runs the command of the same name with the same options, as keywords: an option
``--fold-seed 3`` is ``fold_seed=3``, a flag ``--normalized`` is ``normalized=True``, a list
(``C=[0.1, 1, 10]``) is written as the command line writes it (``--C 0.1,1,10``), a kernel spec
may be a dict. The options are checked by the command's own parser, so a bad one fails with the
message the command line gives (a :class:`~gramtile.workflows.errors.UsageError` naming it).
``cluster`` is a cluster profile name or scheduler address, as ``--cluster`` takes, or a connected
``distributed.Client`` or a :class:`~gramtile.pipeline.compute.runtime.Runtime` (kept open across
calls). Each returns what its command wrote, opened: a store, the evaluation results, a model.

Examples
--------
>>> import gramtile
>>> corpus = gramtile.prepare("questions.tsv", "corpus.zarr", format="tsv")       # doctest: +SKIP
>>> K = gramtile.gram({"kind": "sst", "lam": 0.4}, corpus="corpus.zarr", out="sst.zarr",
...                   cluster="local")                                               # doctest: +SKIP
>>> results = gramtile.evaluate(gram="sst.zarr", normalized=True, C=[0.1, 1, 10])   # doctest: +SKIP
>>> results["rows"][0]["accuracy"]                                                   # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.inmemory import encode_with_resources
from gramtile.pipeline.compute.inmemory import gram as gram_in_memory
from gramtile.pipeline.compute.prepare import prepare_documents
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.estimator import gram_on
from gramtile.pipeline.learn.model_files import is_model_dir, load_model
from gramtile.pipeline.parsing.convert import parse
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.feature_store import FeatureStore, is_feature_store
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import GramView
from gramtile.pipeline.stores.storage import beside, location
from gramtile.workflows import cli
from gramtile.workflows.errors import UsageError

# ---- one command, run from Python --------------------------------------------------------------

def _raise_usage(name: str):
    def error(message: str):
        raise UsageError(f"gramtile.{name}(): {message} (options are keywords: --fold-seed 3 is fold_seed=3)")
    return error


def _token(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_token(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _argv(name: str, parser: argparse.ArgumentParser, options: dict[str, Any]) -> list[str]:
    """The command line ``gramtile NAME ...`` that gives ``options`` (keywords named by the
    options: ``--fold-seed`` is ``fold_seed``); an unknown keyword is refused, listing the known ones."""
    actions: dict[str, argparse.Action] = {}
    for a in parser._actions:
        if a.help is not argparse.SUPPRESS and a.dest not in ("help", "verbosity"):
            # by the option's name (--format: format=) and by its destination (fmt=)
            for key in [s[2:].replace("-", "_") for s in a.option_strings if s.startswith("--")] + [a.dest]:
                actions.setdefault(key, a)
    argv = [name]
    for key, value in options.items():
        a = actions.get(key)
        if a is None:
            raise UsageError(f"gramtile.{name}(): unknown option {key}=; it takes {', '.join(sorted(actions))}")
        if value is None:
            continue
        if not a.option_strings:  # a positional argument
            argv.append(_token(value))
        elif isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if not isinstance(value, bool):
                raise UsageError(f"gramtile.{name}(): {key}={value!r}; give True or False")
            if value is isinstance(a, argparse._StoreTrueAction):
                argv.append(a.option_strings[-1])
        elif isinstance(a, argparse._AppendAction):  # --gram A --gram B
            for v in value if isinstance(value, (list, tuple)) else [value]:
                argv += [a.option_strings[-1], _token(v)]
        elif a.nargs in ("+", "*") and isinstance(value, (list, tuple)):
            argv += [a.option_strings[-1], *(_token(v) for v in value)]
        else:
            argv += [a.option_strings[-1], _token(value)]
    return argv


def command(name: str, cluster: Any = None, **options: Any) -> argparse.Namespace:
    """Run ``gramtile NAME`` with ``options`` (keywords, see the module docstring); return its
    parsed options (what the command was given), after it ran. A nonzero exit status (e.g. a
    Gram store left incomplete) is a :class:`UsageError` naming the command."""
    parser = cli.build_parser((name,))
    parser.error = _raise_usage(name)  # type: ignore[method-assign]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    sub.error = _raise_usage(name)  # type: ignore[method-assign]
    live = cluster is not None and not isinstance(cluster, str)
    if cluster is not None:
        if not any(a.dest == "cluster" for a in sub._actions):
            raise UsageError(f"gramtile.{name}(): runs in this process and takes no cluster=")
        if not live:
            options = {**options, "cluster": cluster}
    args = parser.parse_args(_argv(name, sub, options))
    if live:
        args.cluster = Runtime.of(cluster)  # a Client or Runtime: a bad one fails here, naming what is accepted
    rc = cli.run(args)
    if rc != 0:
        raise UsageError(f"gramtile.{name}() ended with exit status {rc} (see its messages above)")
    return args


# ---- the commands ------------------------------------------------------------------------------

def prepare(input: str | os.PathLike[str], out: str | os.PathLike[str], *, cluster: Any = None,
            **options: Any) -> CorpusStore:
    """``gramtile prepare --input INPUT --out OUT [options]``: read, parse and shard a corpus into
    a corpus store (resumable). Options as the command's (``format=``, ``reps=``,
    ``text_col=``, ``labels=``, ...). Returns the corpus store, opened for reading."""
    command("prepare", cluster, input=input, out=out, **options)
    return CorpusStore.open(out)


def gram(spec: Any, X: Any = None, Y: Any = None, *, out: str | os.PathLike[str] | None = None,
         corpus: str | os.PathLike[str] | None = None, cluster: Any = None,
         **options: Any) -> np.ndarray | GramView:
    """The Gram matrix of kernel ``spec``: in memory for small inputs, or through the tiled engine
    into a Gram store.

    Parameters
    ----------
    spec : KernelSpec, dict or JSON string
    X, Y : examples, optional
        What :func:`gramtile.parse` reads (raw text, bracket strings, spaCy Docs, Documents, a
        DataFrame, ...) or lists of structures; ``Y=None`` gives the square K(X, X).
    out : path or fsspec URL, optional
        Compute through the tiled engine into this Gram store (created, or resumed when it exists
        for the same inputs) and return a view of it. ``X`` (and ``Y``) are first stored as a
        corpus store ``OUT.corpus.zarr`` beside it; a rerun with other examples is refused.
    corpus : path or URL of a corpus store, optional
        Instead of ``X``: compute over this corpus store (``gramtile gram --corpus``); needs ``out``.
    cluster : profile name, scheduler address, distributed.Client or Runtime, optional
        Where the tiles run. Without ``out``, the blocks are computed as tasks there and returned
        in memory (bitwise those of the default, which runs in this process).
    options
        The other options of ``gramtile gram`` (``rows``, ``cols``, ``tile``, ``dtype``,
        ``landmarks``, ``path``, ``no_progress``, ...), with ``out``.

    Returns
    -------
    ndarray (len(X), len(Y)) without ``out``; with it, the store's
    :class:`~gramtile.pipeline.stores.gram_view.GramView` (``to_numpy()``, ``to_dask()``,
    ``to_xarray()``, ``block(rows, cols)``).
    """
    if (X is None) == (corpus is None):
        raise UsageError("gramtile.gram(): give the examples X or a corpus store corpus=, not both")
    if out is None:
        if corpus is not None or options:
            raise UsageError(f"gramtile.gram(): {'corpus=' if corpus is not None else ', '.join(options) + '='} "
                             "needs out= (a Gram store to compute into)")
        if cluster is None:
            return gram_in_memory(spec, X, Y)
        spec = as_spec(spec)
        bx, by, _ = encode_with_resources(spec, X, Y)
        with Runtime.of(cluster, progress=False) as rt:
            K, _ = gram_on(rt, spec, bx, by)
        return K
    spec_json = as_spec(spec).to_json()  # a bad spec fails before any store is written
    if X is not None:
        if any(k in options for k in ("rows", "cols")):
            raise UsageError("gramtile.gram(): rows= and cols= select examples of a corpus store; with X (and Y) "
                             "the rows are X and the columns Y")
        docs_x = parse(X)
        docs_y = [] if Y is None else parse(Y)
        corpus = beside(out, ".corpus.zarr")
        prepare_documents([*docs_x, *docs_y], corpus)  # parsed already: written in this process
        if docs_y:
            n = len(docs_x)
            options = {**options, "rows": f"0:{n}", "cols": f"{n}:{n + len(docs_y)}"}
    command("gram", cluster, corpus=corpus, kernel=spec_json, out=out, **options)
    return GramStore.open(out).view()


def features(corpus: str | os.PathLike[str], kernel: Any, out: str | os.PathLike[str],
             **options: Any) -> FeatureStore:
    """``gramtile features``: explicit feature rows of an st, bow, route or exact subsequence
    kernel into a feature store. Returns the store."""
    command("features", corpus=corpus, kernel=as_spec(kernel).to_json(), out=out, **options)
    return FeatureStore(out)


def evaluate(gram: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None, *,
             cluster: Any = None, out: str | os.PathLike[str] | None = None, **options: Any) -> dict[str, Any]:
    """``gramtile evaluate``: k-fold (or fixed-split) evaluation from a Gram store (``gram=``, a
    list for a composite) or a feature store (``features=``), with the command's options
    (``folds``, ``C``, ``model``, ``normalized``, ``split``, ``task``, ...). Returns the results
    the command writes to ``OUT/results.json`` (``rows``: the pooled scores per setting,
    ``fold_rows``, ``predictions``, ...); without ``out`` they are written to a temporary folder."""
    grams = None if gram is None else [gram] if isinstance(gram, (str, os.PathLike)) else list(gram)
    if out is not None:
        command("evaluate", cluster, gram=grams, out=out, **options)
        return dict(json.loads((Path(out) / "results.json").read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory(prefix="gramtile-evaluate-") as tmp:
        command("evaluate", cluster, gram=grams, out=Path(tmp) / "results", **options)
        return dict(json.loads((Path(tmp) / "results" / "results.json").read_text(encoding="utf-8")))


def train(out: str | os.PathLike[str], *, cluster: Any = None, **options: Any) -> Any:
    """``gramtile train --out OUT``: train a classifier, regressor or ranker from a Gram store
    (``gram=``), a corpus store or a feature store, with the command's options. Returns the saved
    model, loaded (``predict(docs)``, ``predictions(docs)``)."""
    command("train", cluster, out=out, **options)
    return load_model(out)


def predict(model_dir: str | os.PathLike[str], input: str | os.PathLike[str], *,
            out: str | os.PathLike[str] | None = None, **options: Any) -> list[dict[str, Any]] | Path:
    """``gramtile predict``: predictions of a saved model for the examples of the file ``input``.
    Without ``out``: one dict per example (``id``, ``predicted``, the scores, the gold label or
    target when the input has one); with ``out``, the file written there (.tsv or .json)."""
    if out is not None:
        command("predict", model_dir=model_dir, input=input, out=out, **options)
        return Path(out)
    with tempfile.TemporaryDirectory(prefix="gramtile-predict-") as tmp:
        path = Path(tmp) / "predictions.json"
        command("predict", model_dir=model_dir, input=input, out=path, **options)
        return list(json.loads(path.read_text(encoding="utf-8")))


def export(store: str | os.PathLike[str], out: str | os.PathLike[str], **options: Any) -> Path:
    """``gramtile export STORE --out OUT``: K of a complete Gram store (or a selection) as .npy,
    LIBSVM or SVM-light, with ids and labels beside it. Returns the path written."""
    command("export", store=store, out=out, **options)
    return Path(out)


def open_store(path: str | os.PathLike[str]) -> CorpusStore | GramStore | FeatureStore | Any:
    """Open what gramtile wrote at ``path`` (exported as ``gramtile.open``): a corpus store, a
    Gram store, a feature store (each for reading) or a model directory (loaded)."""
    if is_model_dir(path):
        return load_model(path)
    if is_feature_store(path):
        return FeatureStore(path)
    loc = location(path)
    if not loc.exists("zarr.json"):
        raise StoreError(f"{loc.path}: no gramtile store or model directory there (no zarr.json, no model files). "
                         "Fix: check the path; stores are made by `gramtile prepare`, `gram` and `features`, models "
                         "by `gramtile train`")
    attrs = zarr.open_group(loc.zarr_store(), mode="r").attrs
    if "gramtile" in attrs:
        return GramStore.open(path)
    if "manifest" in attrs:
        return CorpusStore.open(path)
    raise StoreError(f"{loc.path} is a Zarr group but not a gramtile store (neither a Gram store's nor a corpus "
                     "store's attributes). Fix: point at a store gramtile made")
