"""scikit-learn conventions (issue 17): top-level estimators, nested kernel__ parameters for
GridSearchCV, predict_proba (Platt scaling, off by default), GramTransformer, the applicable
estimator checks, and SavedModel.predict on structures, raw texts and spaCy Docs. Real NUM
trees, real scikit-learn, real spaCy."""
import numpy as np
import pytest
from conftest import require_data
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC
from sklearn.utils import estimator_checks as ec

import gramtile
from gramtile.pipeline.learn.errors import PredictInputError
from gramtile.pipeline.parsing.formats import read

SST = {"kind": "sst", "lam": 0.4}
SPEC = {"kind": "normalized", "kernel": SST}
N = 90

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def num():
    docs = list(read(require_data("trec_qc_num_constituency") / "NUM_test.dat", "svmlighttk"))
    docs = [docs[i] for i in np.random.default_rng(1).choice(len(docs), N, replace=False)]
    return docs, np.array([d.label for d in docs])


def test_estimators_are_importable_from_the_top_level():
    from gramtile import GramTransformer, KernelSVC, VotedPerceptron  # noqa: F401
    assert gramtile.KernelSVC.__module__ == "gramtile.pipeline.learn.estimator"
    assert {"KernelSVC", "GramTransformer", "VotedPerceptron"} <= set(gramtile.__all__)


def test_nested_kernel_parameters_for_grid_search(num):
    docs, y = num
    est = gramtile.KernelSVC(kernel=SPEC)
    p = est.get_params()
    assert p["kernel__kernel__lam"] == 0.4 and p["kernel__kind"] == "normalized"
    assert clone(est.set_params(kernel__kernel__lam=0.2)).kernel["kernel"]["lam"] == 0.2
    with pytest.raises(gramtile.pipeline.learn.errors.EvaluationError, match="no parameter 'lamb'"):
        est.set_params(kernel__kernel__lamb=1)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    gs = GridSearchCV(gramtile.KernelSVC(kernel=SPEC), {"C": [1.0], "kernel__kernel__lam": [0.1, 0.8]}, cv=cv)
    gs.fit([d.structures["tree"] for d in docs], y)
    for lam, score in zip(gs.cv_results_["param_kernel__kernel__lam"], gs.cv_results_["mean_test_score"]):
        K = gramtile.gram({"kind": "normalized", "kernel": {"kind": "sst", "lam": float(lam)}}, docs)
        want = [np.mean(SVC(kernel="precomputed").fit(K[np.ix_(tr, tr)], y[tr]).predict(K[np.ix_(te, tr)]) == y[te])
                for tr, te in cv.split(K, y)]
        assert score == pytest.approx(np.mean(want), abs=1e-12)
    assert gs.best_estimator_.kernel["kernel"]["lam"] == gs.best_params_["kernel__kernel__lam"]


def test_predict_proba_is_platt_scaling_and_off_by_default(num):
    docs, y = num
    X = [d.structures["tree"] for d in docs]
    off = gramtile.KernelSVC(kernel=SPEC).fit(X[:60], y[:60])
    with pytest.raises(AttributeError, match="probability=True"):
        off.predict_proba(X[60:])
    on = gramtile.KernelSVC(kernel=SPEC, probability=True, random_state=0).fit(X[:60], y[:60])
    P = on.predict_proba(X[60:])
    K = gramtile.gram(SPEC, docs)
    from sklearn.calibration import CalibratedClassifierCV
    ref = CalibratedClassifierCV(SVC(kernel="precomputed"), method="sigmoid", ensemble=False,
                                 cv=StratifiedKFold(5, shuffle=True, random_state=0)).fit(K[:60, :60], y[:60])
    assert P.shape == (30, 2) and np.allclose(P.sum(axis=1), 1) and len(np.unique(P[:, 0])) > 2
    assert np.allclose(P, ref.predict_proba(K[60:, :60]), atol=1e-10)


def test_gram_transformer_returns_K_of_x_and_train_in_a_pipeline(num):
    docs, y = num
    X = [d.structures["tree"] for d in docs]
    t = gramtile.GramTransformer(kernel=SST, normalized=True).fit(X[:60])
    K = gramtile.gram(SPEC, docs)
    assert np.allclose(t.transform(X[60:]), K[60:, :60], rtol=1e-12, atol=0)
    assert np.allclose(gramtile.GramTransformer(kernel=SPEC).fit_transform(X[:60]), K[:60, :60], rtol=1e-12, atol=0)
    pipe = Pipeline([("k", gramtile.GramTransformer(kernel=SPEC)), ("svm", SVC(kernel="precomputed"))]).fit(X[:60], y[:60])
    direct = SVC(kernel="precomputed").fit(K[:60, :60], y[:60]).predict(K[60:, :60])
    assert (pipe.predict(X[60:]) == direct).all()
    assert pipe.get_params()["k__kernel__kernel__lam"] == 0.4


APPLICABLE_CHECKS = (ec.check_parameters_default_constructible, ec.check_no_attributes_set_in_init,
                     ec.check_get_params_invariance, ec.check_set_params, ec.check_estimator_repr,
                     ec.check_estimator_cloneable, ec.check_do_not_raise_errors_in_init_or_set_params,
                     ec.check_mixin_order, ec.check_estimators_unfitted, ec.check_estimator_tags_renamed,
                     ec.check_valid_tag_types)


@pytest.mark.parametrize("check", APPLICABLE_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("make", [lambda: gramtile.KernelSVC(kernel=SPEC), lambda: gramtile.GramTransformer(kernel=SPEC),
                                  lambda: gramtile.KernelSVR(kernel=SPEC), lambda: gramtile.KernelRanker(kernel=SPEC)],
                         ids=["KernelSVC", "GramTransformer", "KernelSVR", "KernelRanker"])
def test_estimator_checks_that_apply_to_estimators_on_structures(check, make):
    est = make()
    check(type(est).__name__, est)


def test_saved_model_predict_takes_structures_texts_and_spacy_docs(num):
    docs, y = num
    m = gramtile.KernelSVC(kernel=SPEC).fit([d.structures["tree"] for d in docs], y).model_
    bare = m.predict([d.structures["tree"] for d in docs[:5]])  # AttributeError: 'Tree' ... before
    assert list(bare) == list(m.predict(docs[:5]))
    with pytest.raises(PredictInputError, match="example 0 is a int"):
        m.predict([3])
    spacy = pytest.importorskip("spacy")
    texts = ["How many people live in Paris ?", "Who wrote Hamlet ?"]
    m2 = m  # texts and Docs are parsed; their "tree" is derived from the dependency parse
    from_text = m2.predict(texts)
    from gramtile.pipeline.parsing.parse import load_model
    nlp = load_model()
    from_docs = m2.predict([nlp(t) for t in texts])
    assert list(from_text) == list(from_docs) and set(from_text) <= set(y)
    assert spacy  # the real parser ran
