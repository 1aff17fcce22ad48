"""KernelSVC (pipeline/estimator.py): the scikit-learn facade on real trees.

Checked against scikit-learn run on the precomputed full matrix: same cross-validation scores,
same best C, same predictions; and the kernel pool: a grid over C evaluates no pair twice.
"""
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import SVC

from conftest import require_data
from gramtile.kernels.errors import EvaluationError
from gramtile.pipeline.estimator import KernelSVC, clear_pool, pool_stats
from gramtile.pipeline.evaluate import gram
from gramtile.pipeline.readers import read

SPEC = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}
N = 150


@pytest.fixture(scope="module")
def num():
    """NUM vs rest: N seeded trees of the SVM-Light-TK test file (sorted by label, so sampled)."""
    docs = list(read(require_data("trec_qc_num_constituency") / "NUM_test.dat", "svmlighttk"))
    docs = [docs[i] for i in np.random.default_rng(0).choice(len(docs), N, replace=False)]
    y = np.array([d.label for d in docs])
    assert len(set(y)) == 2
    return docs, y, gram(SPEC, docs)


def trees(docs):
    return [d.structures["tree"] for d in docs]


def test_grid_search_over_C_equals_precomputed_and_reuses_pairs(num):
    docs, y, K = num
    clear_pool()
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"C": [0.1, 1.0, 10.0]}
    ours = GridSearchCV(KernelSVC(kernel=SPEC), grid, cv=cv).fit(docs, y)
    ref = GridSearchCV(SVC(kernel="precomputed"), grid, cv=cv).fit(K, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    assert ours.best_params_ == ref.best_params_
    # 3 folds x 3 C + the refit = 10 fits, but each pair is evaluated at most about once
    # (m new examples cost m x (pool + m); predict on held-out folds: test x support vectors)
    s = pool_stats()
    assert s["fit_pairs"] <= N * N
    # a second grid over other C values evaluates no pair: every example is in the pool
    GridSearchCV(KernelSVC(kernel=SPEC), {"C": [0.5, 2.0]}, cv=cv).fit(docs, y)
    assert pool_stats()["pairs"] == s["pairs"]


def test_predict_new_examples_uses_support_vectors_only(num):
    docs, y, K = num
    clear_pool()
    tr, te = np.arange(0, 100), np.arange(100, N)
    est = KernelSVC(kernel=SPEC, C=1.0).fit([docs[i] for i in tr], y[tr])
    before = pool_stats()["predict_pairs"]
    pred = est.predict([docs[i] for i in te])
    n_sv = est.model_.n_support
    assert pool_stats()["predict_pairs"] - before == len(te) * n_sv
    assert n_sv < len(tr)
    ref = SVC(kernel="precomputed", C=1.0).fit(K[np.ix_(tr, tr)], y[tr]).predict(K[np.ix_(te, tr)])
    assert pred.tolist() == ref.tolist()
    assert est.score([docs[i] for i in te], y[te]) == pytest.approx(np.mean(ref == y[te]))


def test_in_a_pipeline_on_bare_trees(num):
    docs, y, K = num
    clear_pool()
    pipe = Pipeline([("trees", FunctionTransformer(trees)), ("svm", KernelSVC(kernel=SPEC))])
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    gs = GridSearchCV(pipe, {"svm__C": [0.3, 3.0]}, cv=cv).fit(docs, y)
    ref = GridSearchCV(SVC(kernel="precomputed"), {"C": [0.3, 3.0]}, cv=cv).fit(K, y)
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    assert gs.predict(docs[:20]).tolist() == ref.predict(K[:20]).tolist()


def test_bad_inputs(num):
    docs, y, _ = num
    with pytest.raises(EvaluationError, match="kernel=None"):
        KernelSVC().fit(docs[:10], y[:10])
    with pytest.raises(EvaluationError, match="reads"):
        KernelSVC(kernel={"kind": "bow", "on": "tokens"}).fit(docs[:10], y[:10])
    with pytest.raises(EvaluationError, match="labels"):
        KernelSVC(kernel=SPEC).fit(docs[:10], y[:9])
