"""KernelSVR and KernelRanker, the scikit-learn estimators on structures for real targets: equal to
their learners run on the precomputed kernel of :func:`gramtile.gram`, scikit-learn's conventions
(NotFittedError, clone, parameters), exported from the package face. Real trees from bracket
strings (no data files)."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.svm import SVR

import gramtile
from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.learners.rank import PairRanker
from gramtile.pipeline.learn.metrics import ranking_report

SPEC = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}


def _trees(rng, n):
    words = ["a", "b", "c", "d", "e", "f"]
    out = []
    for _ in range(n):
        nps = " ".join(f"(NP (D {rng.choice(words)}) (N {rng.choice(words)}))" for _ in range(rng.integers(1, 4)))
        out.append(f"(S {nps} (VP (V {rng.choice(words)})))")
    return gramtile.parse(out)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    docs = _trees(rng, 48)
    K = gramtile.gram(SPEC, docs)
    y = K[:, :3].sum(axis=1) + 0.1 * rng.normal(size=48)  # a target the kernel can see
    return docs, K, y


def test_exported_from_the_package_face():
    assert {"KernelSVR", "KernelRanker"} <= set(gramtile.__all__)
    assert gramtile.KernelSVR.__module__ == gramtile.KernelRanker.__module__ == "gramtile.pipeline.learn.estimator"


@pytest.mark.timeout(120)
def test_kernel_svr_equals_svr_on_the_precomputed_kernel(data):
    docs, K, y = data
    tr, te = np.arange(36), np.arange(36, 48)
    for C, eps in ((0.5, 0.05), (10.0, 0.2)):
        est = gramtile.KernelSVR(kernel=SPEC, C=C, epsilon=eps).fit([docs[i] for i in tr], y[tr])
        ref = SVR(kernel="precomputed", C=C, epsilon=eps).fit(K[np.ix_(tr, tr)], y[tr])
        got = est.predict([docs[i] for i in te])
        assert np.allclose(got, ref.predict(K[np.ix_(te, tr)]), atol=1e-9)
        assert np.array_equal(est.support_, ref.support_)
        assert np.allclose(est.dual_coef_, ref.dual_coef_[0]) and est.intercept_ == pytest.approx(ref.intercept_[0])
        # new examples: the kernel against the support examples only
        fresh = gramtile.KernelSVR(kernel=SPEC, C=C, epsilon=eps).fit([docs[i] for i in tr], y[tr])
        assert np.allclose(fresh.predict([docs[i] for i in te]), got, atol=1e-9)
        assert fresh.n_kernel_pairs_["predict"] == te.size * est.support_.size
        assert est.score([docs[i] for i in te], y[te]) == pytest.approx(
            1 - np.sum((y[te] - got) ** 2) / np.sum((y[te] - y[te].mean()) ** 2))


@pytest.mark.timeout(120)
def test_kernel_ranker_equals_the_rank_learner_on_the_precomputed_kernel(data):
    docs, K, y = data
    groups = np.repeat(np.arange(8), 6)
    rel = np.zeros(48)
    for q in range(8):
        m = np.flatnonzero(groups == q)
        rel[m[np.argsort(-y[m])[:2]]] = 1.0
    tr, te = np.arange(30), np.arange(30, 48)
    est = gramtile.KernelRanker(kernel=SPEC, C=1.0).fit([docs[i] for i in tr], rel[tr], groups=groups[tr])
    ref = PairRanker(1.0).fit(K[np.ix_(tr, tr)], rel[tr], groups[tr])
    got = est.predict([docs[i] for i in te])
    assert np.allclose(got, ref.predict(K[np.ix_(te, tr)]), atol=1e-9)
    assert est.n_pairs_ == 5 * 2 * 4  # 5 groups of 2 relevant x 4 irrelevant
    assert est.score([docs[i] for i in te], rel[te], groups[te]) == \
        ranking_report(rel[te], got, groups[te])["map"]
    # without groups every pair of the training set is compared: another model
    one = gramtile.KernelRanker(kernel=SPEC, C=1.0).fit([docs[i] for i in tr], rel[tr])
    assert one.n_pairs_ == int(rel[tr].sum() * (tr.size - rel[tr].sum()))


def test_scikit_learn_conventions_and_bad_inputs(data):
    docs, K, y = data
    for est in (gramtile.KernelSVR(kernel=SPEC, C=2.0), gramtile.KernelRanker(kernel=SPEC, C=2.0)):
        with pytest.raises(NotFittedError):
            est.predict(docs[:3])
        c = clone(est)
        assert c.get_params()["C"] == 2.0 and c.get_params()["kernel__kernel__lam"] == 0.4
        with pytest.raises(PredictInputError, match="numeric array"):
            est.fit(np.zeros((4, 3)), y[:4])
        with pytest.raises(EvaluationError, match="targets"):
            est.fit(docs[:4], y[:3])
    with pytest.raises(EvaluationError, match="kernel=None"):
        gramtile.KernelSVR().fit(docs[:4], y[:4])
    with pytest.raises(EvaluationError, match="group id per example"):
        gramtile.KernelRanker(kernel=SPEC).fit(docs[:4], y[:4], groups=[1, 2])
