"""KernelSVC (pipeline/learn/estimator.py): the scikit-learn facade on real trees.

Checked against scikit-learn run on the precomputed full matrix: same cross-validation scores,
same best C, same predictions; and the kernel pool: a grid over C evaluates no pair twice.
"""
import numpy as np
import pytest
from conftest import require_data
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import SVC

from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.estimator import KernelSVC, clear_pool, pool_stats
from gramtile.pipeline.parsing.formats import read

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


def test_kernel_built_from_examples_is_not_pooled_and_predicts_with_the_training_space(tmp_path):
    """An LSA soft-matched kernel depends on the examples its space is built from: KernelSVC fits on
    the training examples' K (no pool) and predicts with that space, as an SVC on the training K fed
    K(test, train) computed with the training space (a vocabulary starting with the training strings,
    unseen symbols out of the space)."""
    from test_model_resources import _senseval_subset

    from gramtile.pipeline.compute.inmemory import evaluate_block, gram_with_resources
    from gramtile.pipeline.readers.senseval import read_senseval
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocab, Vocabularies
    from gramtile.workflows.recipes.wsd import subsample_indices

    src = require_data("senseval_hard_line_serve") / "serve.pos"
    pick = subsample_indices(np.zeros(src.read_text().count("<instance ")), 60)
    docs = list(read_senseval(_senseval_subset(src, tmp_path / "s.pos", pick)))
    train, test = docs[:45], docs[45:]
    y = np.array([d.label for d in train])
    lsa = {"kind": "syntagmatic", "similarity": "lsa", "space_rep": "seq"}
    clear_pool()
    # an earlier fit on other examples (a pool would now hold their space's values)
    KernelSVC(kernel=lsa, C=1.0).fit(docs[30:], [d.label for d in docs[30:]])
    before = pool_stats()["fit_pairs"]
    est = KernelSVC(kernel=lsa, C=1.0, multiclass="ovo").fit(train, y)
    K, strings, values = gram_with_resources(lsa, train)
    assert pool_stats()["fit_pairs"] - before == K.size
    np.testing.assert_allclose(est.decision_function(train), SVC(kernel="precomputed", C=1.0,
                               decision_function_shape="ovo").fit(K, y).decision_function(K), atol=1e-8)
    vocabs = Vocabularies({"sym": Vocab(strings)})
    bx = {"wsd": encode([d.structures["wsd"] for d in test], vocabs)}
    by = {"wsd": encode([d.structures["wsd"] for d in train], vocabs)}
    ((name, F),) = values.items()
    bx[name] = np.vstack([F, np.zeros((len(vocabs.sym) - len(strings), F.shape[1]))])
    K_test = evaluate_block(lsa, bx, by)[0]
    expected = SVC(kernel="precomputed", C=1.0).fit(K, y).predict(K_test)
    assert est.predict(test).tolist() == expected.tolist()
    # a later fit on other examples does not change this model's kernel either
    KernelSVC(kernel=lsa, C=1.0).fit(docs[10:], [d.label for d in docs[10:]])
    assert est.predict(test).tolist() == expected.tolist()
