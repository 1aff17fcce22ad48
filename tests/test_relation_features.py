"""Zelenko Appendix C features and the Winnow learner (pipeline/relation_features.py)."""
import numpy as np
import pytest
from scipy.sparse import csr_matrix

from gramtile.kernels.errors import EvaluationError
from gramtile.pipeline.relation import RelationExample as R
from gramtile.pipeline.relation_features import Winnow, feature_learner, feature_matrix, relation_features


def example():
    return R("Sentence", "none", None, (
        R("PNP", "member", "smith"),
        R("Verb", "none", "be"),
        R("NP", "none", "scientist", (R("Prep", "none", "of", (R("ONP", "affiliation", "corporation"),)),))))


def test_features_of_a_small_tree():
    f = relation_features(example())
    assert f == {
        "n|0|Sentence,none",
        "n|1|PNP,member", "n|1|PNP,member,smith", "n|1|member,smith",
        "n|1|Verb,none", "n|1|Verb,none,be", "n|1|none,be",
        "n|1|NP,none", "n|1|NP,none,scientist", "n|1|none,scientist",
        "n|2|Prep,none", "n|2|Prep,none,of", "n|2|none,of",
        "n|3|ONP,affiliation", "n|3|ONP,affiliation,corporation", "n|3|affiliation,corporation",
        "pc|0|Sentence,none>PNP,member", "pc|0|Sentence,none>PNP,member,smith",
        "pc|0|Sentence,none>Verb,none", "pc|0|Sentence,none>Verb,none,be",
        "pc|0|Sentence,none>NP,none", "pc|0|Sentence,none>NP,none,scientist",
        "pc|1|NP,none>Prep,none", "pc|1|NP,none,scientist>Prep,none,of",
        "pc|2|Prep,none>ONP,affiliation", "pc|2|Prep,none,of>ONP,affiliation,corporation",
        "sib|0|PNP,member+Verb,none", "sib|0|PNP,member,smith+Verb,none,be",
        "sib|0|Verb,none+NP,none", "sib|0|Verb,none,be+NP,none,scientist",
    }


def test_feature_matrix_uses_the_training_vocabulary():
    X, vocab = feature_matrix([example(), R("PNP", "member", "jones")])
    assert X.shape == (2, len(vocab)) and set(X.data) == {1.0}
    assert X[0].sum() == len(relation_features(example()))
    Y, _ = feature_matrix([R("PNP", "member", "brown")], vocab)
    assert Y.shape == (1, len(vocab)) and Y.sum() == 1  # only n|0|PNP,member is known


def test_winnow_learns_a_monotone_disjunction():
    # target: x0 or x3 over 40 binary features; Winnow's mistake bound is O(k log n)
    rng = np.random.default_rng(1)
    X = (rng.random((400, 40)) < 0.1).astype(float)
    y = np.where((X[:, 0] + X[:, 3]) > 0, "pos", "neg")
    w = Winnow(alpha=2.0, theta=20.0, epochs=20, seed=0).fit(X, y)
    assert (w.predict(X) == y).all()
    assert w.mistakes_[-1] == 0 and sum(w.mistakes_) < 60
    assert w.coef_[0] >= 20 and w.coef_[3] >= 20
    Xt = (rng.random((200, 40)) < 0.1).astype(float)
    yt = np.where((Xt[:, 0] + Xt[:, 3]) > 0, "pos", "neg")
    assert (w.predict(csr_matrix(Xt)) == yt).mean() > 0.95


def test_winnow_errors():
    with pytest.raises(EvaluationError, match="binary features"):
        Winnow().fit(np.array([[0.5, 1.0], [1.0, 0.0]]), ["a", "b"])
    with pytest.raises(EvaluationError, match="binary learner"):
        Winnow().fit(np.eye(3), ["a", "b", "c"])
    with pytest.raises(EvaluationError, match="alpha"):
        Winnow(alpha=1.0)
    w = Winnow().fit(np.eye(2), ["a", "b"])
    with pytest.raises(EvaluationError, match="3 features"):
        w.predict(np.ones((1, 3)))


def test_feature_learners_fit_relation_features():
    pos = [R("Sentence", "none", None, (R("PNP", "member", f"p{i}"), R("Prep", "none", "of"),
                                        R("ONP", "affiliation", f"o{i}"))) for i in range(10)]
    neg = [R("Sentence", "none", None, (R("PNP", "member", f"p{i}"), R("Verb", "none", "hate"),
                                        R("ONP", "affiliation", f"o{i}"))) for i in range(10)]
    X, vocab = feature_matrix(pos + neg)
    y = np.array(["1"] * 10 + ["-1"] * 10)
    for name in ("naive_bayes", "winnow", "linear_svm"):
        assert (feature_learner(name).fit(X, y).predict(X) == y).all(), name
    with pytest.raises(EvaluationError, match="unknown feature learner"):
        feature_learner("boosting")
