"""Zelenko Appendix C features and the Winnow learner (pipeline/learn/relation_features.py)."""
import numpy as np
import pytest
from scipy.sparse import csr_matrix

from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import Split
from gramtile.pipeline.learn.learners.registry import LEARNERS
from gramtile.pipeline.learn.metrics import binary_prf
from gramtile.pipeline.learn.relation_features import (
    FeatureSVM,
    RelationExamples,
    Winnow,
    feature_learner,
    feature_matrix,
    relation_features,
)
from gramtile.pipeline.learn.sources import ArrayKernelSource
from gramtile.pipeline.representations.relation import RelationExample as R


def example():
    return R("Sentence", "none", None, (
        R("PNP", "member", "smith"),
        R("Verb", "none", "be"),
        R("NP", "none", "scientist", (R("Prep", "none", "of", (R("ONP", "affiliation", "corporation"),)),))))


def test_features_of_a_small_tree():
    # Appendix C by hand: T = Class(Type),Role (PNP -> Person, ONP -> Organization), X = =Text,Role
    f = relation_features(example())
    assert f == {
        "n|0|Sentence,none",
        "n|1|Person,member", "n|1|=smith,member", "n|1|Verb,none", "n|1|=be,none",
        "n|1|NP,none", "n|1|=scientist,none",
        "n|2|Prep,none", "n|2|=of,none", "n|3|Organization,affiliation", "n|3|=corporation,affiliation",
        # the Sentence node has no Text: only its T conjoins with the children's T and X
        "pc|0|Sentence,none>Person,member", "pc|0|Sentence,none>=smith,member",
        "pc|0|Sentence,none>Verb,none", "pc|0|Sentence,none>=be,none",
        "pc|0|Sentence,none>NP,none", "pc|0|Sentence,none>=scientist,none",
        "pc|1|NP,none>Prep,none", "pc|1|NP,none>=of,none", "pc|1|=scientist,none>Prep,none",
        "pc|1|=scientist,none>=of,none",
        "pc|2|Prep,none>Organization,affiliation", "pc|2|Prep,none>=corporation,affiliation",
        "pc|2|=of,none>Organization,affiliation", "pc|2|=of,none>=corporation,affiliation",
        "sib|1|Person,member+Verb,none", "sib|1|Person,member+=be,none", "sib|1|=smith,member+Verb,none",
        "sib|1|=smith,member+=be,none", "sib|1|Verb,none+NP,none", "sib|1|Verb,none+=scientist,none",
        "sib|1|=be,none+NP,none", "sib|1|=be,none+=scientist,none",
        # triples: exactly one X among three adjacent siblings
        "tri|1|Person,member+Verb,none+=scientist,none", "tri|1|Person,member+=be,none+NP,none",
        "tri|1|=smith,member+Verb,none+NP,none",
    }


def test_feature_matrix_uses_the_training_vocabulary():
    X, vocab = feature_matrix([example(), R("PNP", "member", "jones")])
    assert X.shape == (2, len(vocab)) and set(X.data) == {1.0}
    assert X[0].sum() == len(relation_features(example()))
    Y, _ = feature_matrix([R("PNP", "member", "brown")], vocab)
    assert Y.shape == (1, len(vocab)) and Y.sum() == 1  # only n|0|Person,member is known


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


def varied_examples(n=40, seed=0):
    """Relation examples whose words say the label (with noise), and their labels."""
    rng = np.random.default_rng(seed)
    verbs, nouns = ["be", "work", "join", "lead", "see", "meet"], ["scientist", "head", "member", "fan", "friend"]
    xs, ys = [], []
    for i in range(n):
        v, w = verbs[rng.integers(len(verbs))], nouns[rng.integers(len(nouns))]
        pos = (v in ("work", "join", "lead")) != (rng.random() < 0.15)
        xs.append(R("Sentence", "none", None, (R("PNP", "member", f"p{i % 7}"), R("Verb", "none", v),
                                                R("NP", "none", w, (R("ONP", "affiliation", f"o{i % 5}"),)))))
        ys.append("1" if pos else "-1")
    return xs, np.array(ys)


def test_feature_svm_in_the_selection_loop_equals_linear_svc_with_each_part_vocabulary():
    """Each training part builds its own vocabulary; the scores are those of LinearSVC fitted by
    hand on the same parts; the learner is not one of the registry's models."""
    xs, y = varied_examples()
    idx = np.arange(len(xs))
    splits = [Split(idx[idx % 3 != f], idx[idx % 3 == f], f"part-{f}") for f in range(3)]
    grid = [0.01, 0.1, 1.0, 10.0]
    point, ev = selection.choose(FeatureSVM(), RelationExamples(xs), y, {"C": grid}, splits=splits, metric="f1",
                                 score="mean", positive="1", cluster="sequential")
    ref = []
    for C in grid:
        f1 = []
        for sp in splits:
            Xa, vocab = feature_matrix([xs[i] for i in sp.train])
            Xb, _ = feature_matrix([xs[i] for i in sp.test], vocab)
            pred = feature_learner("linear_svm", C=C).fit(Xa, y[sp.train]).predict(Xb)
            f1.append(binary_prf(y[sp.test], pred, "1")[2])
        ref.append(float(np.mean(f1)))
    assert selection.point_scores(ev, "f1", "mean") == ref
    assert point["C"] == min(C for C, v in zip(grid, ref) if v == max(ref))
    assert FeatureSVM.name not in LEARNERS
    with pytest.raises(EvaluationError, match="relation examples"):
        selection.evaluate(FeatureSVM(), ArrayKernelSource(np.eye(len(xs))), y, splits, {"C": [1.0]})
