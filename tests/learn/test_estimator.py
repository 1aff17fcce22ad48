"""KernelSVC (pipeline/learn/estimator.py): the scikit-learn facade on real trees.

Checked against scikit-learn run on the precomputed full matrix: same cross-validation scores,
same best C, same predictions, SVC's fitted attributes and sample weights; the kernel pool,
owned by each instance: a refit evaluates no pair twice, a clone starts without one, a pickle
carries it; and the Gram blocks on threads and on a real Dask LocalCluster, bitwise equal to the
in-process ones.
"""
import pickle

import numpy as np
import pytest
from conftest import require_data, senseval_subset
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import SVC

import gramtile.pipeline.learn.estimator as estimator_module
from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.estimator import GramTransformer, KernelSVC
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


def test_grid_search_over_C_equals_precomputed(num):
    docs, y, K = num
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"C": [0.1, 1.0, 10.0]}
    ours = GridSearchCV(KernelSVC(kernel=SPEC), grid, cv=cv).fit(docs, y)
    ref = GridSearchCV(SVC(kernel="precomputed"), grid, cv=cv).fit(K, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    assert ours.best_params_ == ref.best_params_
    # the refit is a clone: its own pool, K over the N examples (N (N + 1) / 2 pairs), nothing else
    assert ours.best_estimator_.n_kernel_pairs_ == {"fit": N * (N + 1) // 2, "predict": 0}


def test_the_pool_belongs_to_the_instance(num):
    docs, y, K = num
    tr, te = docs[:100], docs[100:]
    est = KernelSVC(kernel=SPEC, C=1.0).fit(tr, y[:100])
    assert est.n_kernel_pairs_ == {"fit": 100 * 101 // 2, "predict": 0}
    np.testing.assert_array_equal(est.decision_function(te), KernelSVC(kernel=SPEC).fit(tr, y[:100]).decision_function(te))
    # a refit of this instance with another C, on examples it has seen, evaluates no pair
    est.set_params(C=10.0).fit(docs[20:100], y[20:100])
    assert est.n_kernel_pairs_["fit"] == 100 * 101 // 2
    # the new examples only: 100 x 50 pairs with the pool, 50 x 51 / 2 among themselves
    est.fit(docs, y)
    assert est.n_kernel_pairs_["fit"] == 100 * 101 // 2 + 100 * 50 + 50 * 51 // 2
    np.testing.assert_array_equal(est._kernel_pool.K, K)  # pairs (p, q), p <= q, as K(x_p, x_q): gram's
    pred_before = est.n_kernel_pairs_["predict"]
    est.predict(te)  # in the pool: sliced
    assert est.n_kernel_pairs_["predict"] == pred_before
    # another instance has its own pool; a clone starts without one
    other = KernelSVC(kernel=SPEC).fit(tr, y[:100])
    assert other.n_kernel_pairs_["fit"] == 100 * 101 // 2
    fresh = clone(est)
    assert not hasattr(fresh, "_kernel_pool") and not hasattr(fresh, "n_kernel_pairs_")
    with pytest.raises(NotFittedError):
        fresh.predict(te)
    # a pickle carries the pool and the model
    back = pickle.loads(pickle.dumps(est))
    assert back.predict(te).tolist() == est.predict(te).tolist()
    np.testing.assert_array_equal(back.decision_function(te), est.decision_function(te))
    assert back.n_kernel_pairs_ == est.n_kernel_pairs_  # predicted from the carried pool
    for name in ("_POOLS", "_STATS", "pool_stats", "clear_pool"):
        assert not hasattr(estimator_module, name)


def test_predict_new_examples_uses_support_vectors_only(num):
    docs, y, K = num
    tr, te = np.arange(0, 100), np.arange(100, N)
    est = KernelSVC(kernel=SPEC, C=1.0).fit([docs[i] for i in tr], y[tr])
    pred = est.predict([docs[i] for i in te])
    n_sv = est.model_.n_support
    assert est.n_kernel_pairs_["predict"] == len(te) * n_sv == len(te) * len(est.support_)
    assert n_sv < len(tr)
    ref = SVC(kernel="precomputed", C=1.0).fit(K[np.ix_(tr, tr)], y[tr]).predict(K[np.ix_(te, tr)])
    assert pred.tolist() == ref.tolist()
    assert est.score([docs[i] for i in te], y[te]) == pytest.approx(np.mean(ref == y[te]))


def test_in_a_pipeline_on_bare_trees(num):
    docs, y, K = num
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

    from gramtile.pipeline.compute.inmemory import evaluate_block, gram_with_resources
    from gramtile.pipeline.readers.senseval import read_senseval
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocab, Vocabularies
    from gramtile.workflows.recipes.wsd import subsample_indices

    src = require_data("senseval_hard_line_serve") / "serve.pos"
    pick = subsample_indices(np.zeros(src.read_text().count("<instance ")), 60)
    docs = list(read_senseval(senseval_subset(src, tmp_path / "s.pos", pick)))
    train, test = docs[:45], docs[45:]
    y = np.array([d.label for d in train])
    lsa = {"kind": "syntagmatic", "similarity": "lsa", "space_rep": "seq"}
    est = KernelSVC(kernel=lsa, C=1.0, multiclass="ovo")
    # an earlier fit of this instance on other examples (a pool would now hold their space's values)
    est.fit(docs[30:], [d.label for d in docs[30:]])
    before = est.n_kernel_pairs_["fit"]
    est.fit(train, y)
    K, strings, values = gram_with_resources(lsa, train)
    assert est.n_kernel_pairs_["fit"] - before == len(train) * (len(train) + 1) // 2
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
    # on threads of this process: bitwise the same kernel values (the space built once, here)
    threaded = KernelSVC(kernel=lsa, C=1.0, multiclass="ovo", n_jobs=2).fit(train, y)
    np.testing.assert_array_equal(threaded.decision_function(test), est.decision_function(test))
    np.testing.assert_array_equal(threaded.dual_coef_, est.dual_coef_)


@pytest.fixture(scope="module")
def coarse():
    """Six coarse TREC classes: 150 seeded questions of the KeLP test file, their grct trees."""
    from itertools import islice
    docs = list(islice(read(require_data("trec_qc_kelp_trees") / "TREC_10.coarse.klp.gz", "kelp"), 500))
    docs = [docs[i] for i in np.random.default_rng(2).choice(len(docs), 150, replace=False)]
    X = [d.structures["grct"] for d in docs]
    y = np.array([d.label for d in docs])
    assert len(set(y[:110])) >= 5
    return X, y, gram(SPEC, X)


def _reproduced(est, X_test):
    """K(X_test, support_vectors_) @ dual_coef_.T + intercept_, K evaluated here by gramtile.gram."""
    return gram(SPEC, X_test, est.support_vectors_) @ est.dual_coef_.T + est.intercept_


def test_binary_fitted_attributes_are_svcs(num):
    docs, y, K = num
    X = trees(docs)
    est = KernelSVC(kernel=SPEC, C=2.0).fit(X[:100], y[:100])
    ref = SVC(kernel="precomputed", C=2.0).fit(K[:100, :100], y[:100])
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_array_equal(est.n_support_, ref.n_support_)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-12)
    assert est.dual_coef_.shape == (1, len(est.support_)) and est.intercept_.shape == (1,)
    assert [d.structures["tree"] for d in est.support_vectors_] == [X[i] for i in est.support_]
    df = est.decision_function(X[100:])
    np.testing.assert_allclose(_reproduced(est, X[100:])[:, 0], df, rtol=0, atol=1e-12)
    np.testing.assert_allclose(df, ref.decision_function(K[100:, :100]), rtol=0, atol=1e-12)
    assert (np.sign(df) > 0).sum() > 0 and (np.sign(df) < 0).sum() > 0


def test_one_vs_one_fitted_attributes_are_svcs(coarse):
    X, y, K = coarse
    est = KernelSVC(kernel=SPEC, multiclass="ovo").fit(X[:110], y[:110])
    ref = SVC(kernel="precomputed", decision_function_shape="ovo").fit(K[:110, :110], y[:110])
    k = len(ref.classes_)
    assert est.classes_.tolist() == ref.classes_.tolist()
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_array_equal(est.n_support_, ref.n_support_)
    assert est.dual_coef_.shape == (k - 1, len(est.support_)) and est.intercept_.shape == (k * (k - 1) // 2,)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(est.decision_function(X[110:]), ref.decision_function(K[110:, :110]), atol=1e-12)
    assert est.predict(X[110:]).tolist() == ref.predict(K[110:, :110]).tolist()


def test_one_vs_rest_dual_coef_reproduces_the_decision_function(coarse):
    X, y, K = coarse
    est = KernelSVC(kernel=SPEC, C=3.0).fit(X[:110], y[:110])
    ref = OneVsRestClassifier(SVC(kernel="precomputed", C=3.0)).fit(K[:110, :110], y[:110])
    k = len(est.classes_)
    assert est.dual_coef_.shape == (k, len(est.support_)) and est.intercept_.shape == (k,)
    assert (np.diff(est.support_) > 0).all()
    assert est.support_.tolist() == sorted(set().union(*(e.support_.tolist() for e in ref.estimators_)))
    assert est.n_support_.tolist() == [int(np.sum(y[est.support_] == c)) for c in est.classes_]
    df = est.decision_function(X[110:])
    assert df.shape == (40, k)
    np.testing.assert_allclose(_reproduced(est, X[110:]), df, rtol=0, atol=1e-12)
    np.testing.assert_allclose(df, ref.decision_function(K[110:, :110]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.intercept_, [e.intercept_[0] for e in ref.estimators_], rtol=1e-12)
    assert est.predict(X[110:]).tolist() == ref.predict(K[110:, :110]).tolist()


def test_sample_weight_goes_to_libsvm(num, coarse):
    docs, y, K = num
    X = trees(docs)
    w = np.random.default_rng(3).uniform(0.1, 3.0, 100)
    est = KernelSVC(kernel=SPEC).fit(X[:100], y[:100], sample_weight=w)
    ref = SVC(kernel="precomputed").fit(K[:100, :100], y[:100], sample_weight=w)
    plain = SVC(kernel="precomputed").fit(K[:100, :100], y[:100])
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-12, atol=1e-14)
    assert not np.array_equal(ref.support_, plain.support_) or not np.allclose(ref.dual_coef_, plain.dual_coef_)
    np.testing.assert_allclose(est.decision_function(X[100:]), ref.decision_function(K[100:, :100]), atol=1e-12)
    # zero weights: those examples take no part, and support_ still indexes the training X (libsvm
    # drops them and SVC's support_ indexes the rest, which SVC(kernel="precomputed") then misreads
    # as columns of the full K; the reference here is the SVC fitted on the others)
    w0 = np.where(np.arange(100) % 3 == 0, 0.0, 1.0)
    est0 = KernelSVC(kernel=SPEC).fit(X[:100], y[:100], sample_weight=w0)
    keep = np.flatnonzero(w0)
    ref0 = SVC(kernel="precomputed").fit(K[np.ix_(keep, keep)], y[keep])
    np.testing.assert_array_equal(est0.support_, keep[ref0.support_])
    assert not (np.asarray(est0.support_) % 3 == 0).any()
    df0 = est0.decision_function(X[100:])
    np.testing.assert_allclose(df0, ref0.decision_function(K[100:, keep]), atol=1e-12)
    np.testing.assert_allclose(_reproduced(est0, X[100:])[:, 0], df0, atol=1e-12)
    # one-vs-rest: as OneVsRestClassifier routing sample_weight to each SVC
    Xc, yc, Kc = coarse
    wc = np.random.default_rng(4).uniform(0.1, 3.0, 110)
    ovr = KernelSVC(kernel=SPEC).fit(Xc[:110], yc[:110], sample_weight=wc)
    with config_context(enable_metadata_routing=True):
        refc = OneVsRestClassifier(SVC(kernel="precomputed").set_fit_request(sample_weight=True)).fit(
            Kc[:110, :110], yc[:110], sample_weight=wc)
    np.testing.assert_allclose(ovr.decision_function(Xc[110:]), refc.decision_function(Kc[110:, :110]), atol=1e-12)
    with pytest.raises(EvaluationError, match="sample_weight of shape"):
        KernelSVC(kernel=SPEC).fit(X[:100], y[:100], sample_weight=w[:99])
    with pytest.raises(EvaluationError, match="non-negative"):
        KernelSVC(kernel=SPEC).fit(X[:100], y[:100], sample_weight=-w)


def test_not_fitted_raises_scikit_learns_error(num):
    docs, y, _ = num
    X = trees(docs)[:5]
    for method in ("predict", "decision_function", "predict_proba"):
        with pytest.raises(NotFittedError, match="not fitted"):
            getattr(KernelSVC(kernel=SPEC, probability=True), method)(X)
    with pytest.raises(NotFittedError, match="not fitted"):
        GramTransformer(kernel=SPEC).transform(X)


def test_gram_blocks_on_threads_and_dask_are_bitwise_the_in_process_ones(num):
    """The Gram of fit, prediction and transform computed as tiles on a threads executor and on
    a real Dask LocalCluster of two worker processes: bitwise the in-process values."""
    distributed = pytest.importorskip("distributed")
    docs, y, _ = num
    X = trees(docs)
    tr, te = X[:110], X[110:]
    base = KernelSVC(kernel=SPEC).fit(tr, y[:110])
    df = base.decision_function(te)
    ref_t = GramTransformer(kernel=SPEC).fit(tr).transform(te)

    def same(est):
        np.testing.assert_array_equal(est._kernel_pool.K, base._kernel_pool.K)
        np.testing.assert_array_equal(est.dual_coef_, base.dual_coef_)
        np.testing.assert_array_equal(est.decision_function(te), df)
        assert est.n_kernel_pairs_ == base.n_kernel_pairs_

    same(KernelSVC(kernel=SPEC, n_jobs=2).fit(tr, y[:110]))
    same(KernelSVC(kernel=SPEC, cluster="threads").fit(tr, y[:110]))
    np.testing.assert_array_equal(GramTransformer(kernel=SPEC, n_jobs=2).fit(tr).transform(te), ref_t)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            distributed.Client(lc) as client:
        with distributed.get_task_stream(client) as ts:
            on_dask = KernelSVC(kernel=SPEC, cluster=client).fit(tr, y[:110])
            same(on_dask)
        tiles = [t for t in ts.data if "Gram tile" in str(t["key"])]
        assert len({t["worker"] for t in tiles}) == 2 and len(tiles) == 10 + 4  # fit: 4 x 5 / 2 tiles, predict: 4 x 1
        np.testing.assert_array_equal(GramTransformer(kernel=SPEC, cluster=client).fit(tr).transform(te), ref_t)
        # GridSearchCV clones it: the clones share the client (a connection, not a value to copy)
        assert clone(on_dask).cluster is client
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(on_dask)
        with Runtime(client=client) as rt:
            same(KernelSVC(kernel=SPEC, cluster=rt).fit(tr, y[:110]))
    with pytest.raises(EvaluationError, match="pass one of them"):
        KernelSVC(kernel=SPEC, n_jobs=2, cluster="threads").fit(tr, y[:110])
    with pytest.raises(EvaluationError, match="n_jobs=0"):
        KernelSVC(kernel=SPEC, n_jobs=0).fit(tr, y[:110])
