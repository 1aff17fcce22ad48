"""The kernel voted perceptron: a hand-traced case, an explicit-feature (primal) reference,
a naive kernel-expansion reference on real TREC NUM-vs-rest tree kernels, and input checks."""
import numpy as np
import pytest
from conftest import require_data

from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.metrics import accuracy, binary_prf
from gramtile.pipeline.learn.perceptron import VotedPerceptron
from gramtile.pipeline.parsing.formats import read


def primal_voted_perceptron(X, y, epochs, order=None):
    """Freund & Schapire's algorithm with explicit vectors (y in ±1): list of (v, c)."""
    v, c, out = np.zeros(X.shape[1]), 0, []
    for _ in range(epochs):
        for i in (range(len(y)) if order is None else order):
            if y[i] * (v @ X[i]) > 0:
                c += 1
            else:
                out.append((v, c))
                v, c = v + y[i] * X[i], 1
    out.append((v, c))
    return out


def primal_vote(vectors, Xt):
    return np.array([sum(c * np.sign(v @ x) for v, c in vectors) for x in Xt])


def test_hand_traced_two_points():
    # x0 = (1, 0) label +1, x1 = (-1, 0) label -1, linear kernel.
    # epoch 1: x0 scores 0 -> mistake, v2 = x0 (c2 = 1); x1 scores -1 -> right (c2 = 2)
    # epoch 2: both right -> c2 = 4. So one mistake, counts (c1, c2) = (0, 4).
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    m = VotedPerceptron(epochs=2).fit(X @ X.T, ["+1", "-1"])
    idx, ylab, counts = m.models_[0]
    assert idx.tolist() == [0] and ylab.tolist() == [1.0] and counts.tolist() == [0, 4]
    Xt = np.array([[0.5, 3.0], [-2.0, 1.0], [0.0, 5.0]])
    # votes: v1 abstains (score 0); v2 = x0 votes sign(x_1) with weight 4; the last point ties at 0
    assert m.decision_function(Xt @ X.T).tolist() == [4.0, -4.0, 0.0]
    assert m.predict(Xt @ X.T).tolist() == ["+1", "-1", "-1"]  # a 0 vote goes to the negative class


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_primal_reference_on_noisy_data(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.7 * rng.normal(size=60) > 0, 1, -1)  # not separable
    Xt = rng.normal(size=(25, 4))
    m = VotedPerceptron(epochs=3).fit(X @ X.T, y)
    ref = primal_voted_perceptron(X, y, 3)
    assert m.n_mistakes_ == [len(ref) - 1]
    np.testing.assert_allclose(m.decision_function(Xt @ X.T), primal_vote(ref, Xt), atol=1e-9)
    avg = VotedPerceptron(epochs=3, vote="averaged").fit(X @ X.T, y)
    np.testing.assert_allclose(avg.decision_function(Xt @ X.T),
                               [sum(c * (v @ x) for v, c in ref) for x in Xt], rtol=1e-9, atol=1e-9)


def test_linearly_separable_is_learned_exactly():
    # two classes separated by the line x0 = 0 with margin 1: the perceptron converges
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, size=(80, 2))
    X[:, 0] += np.sign(X[:, 0])
    y = np.where(X[:, 0] > 0, "pos", "neg")
    K = X @ X.T + 1.0  # + 1: a bias feature
    m = VotedPerceptron(epochs=10).fit(K, y)
    assert (m.predict(K) == y).all()
    Xt = np.array([[2.5, 0.0], [-2.5, 2.0], [4.0, -3.0], [-1.5, -3.0]])
    assert m.predict(Xt @ X.T + 1.0).tolist() == ["pos", "neg", "pos", "neg"]


def test_multiclass_one_vs_rest_on_separated_clusters():
    rng = np.random.default_rng(3)
    centres = np.array([[6.0, 0.0], [-6.0, 0.0], [0.0, 6.0]])
    y = np.repeat(["a", "b", "c"], 20)
    X = centres[np.repeat([0, 1, 2], 20)] + rng.normal(size=(60, 2))
    order = rng.permutation(60)
    X, y = X[order], y[order]
    K = X @ X.T + 1.0
    m = VotedPerceptron(epochs=3).fit(K, y)
    assert m.classes_.tolist() == ["a", "b", "c"] and len(m.models_) == 3
    assert m.decision_function(K).shape == (60, 3)
    assert (m.predict(K) == y).all()


def test_deterministic_and_seeded_order():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = np.where(X[:, 0] + rng.normal(size=50) > 0, 1, -1)
    K = X @ X.T
    a = VotedPerceptron(epochs=2).fit(K, y)
    b = VotedPerceptron(epochs=2).fit(K, y)
    assert [m[0].tolist() for m in a.models_] == [m[0].tolist() for m in b.models_]
    s1 = VotedPerceptron(epochs=2, seed=7).fit(K, y)
    s2 = VotedPerceptron(epochs=2, seed=7).fit(K, y)
    assert s1.models_[0][0].tolist() == s2.models_[0][0].tolist()
    assert s1.models_[0][0].tolist() != a.models_[0][0].tolist()
    # the seeded run is Freund & Schapire's algorithm on the shuffled visiting order
    r = np.random.default_rng(7)
    order = np.concatenate([r.permutation(50), r.permutation(50)])
    ref = [(v, c) for v, c in primal_voted_perceptron(X, y, 1, order=order)]
    assert s1.n_mistakes_ == [len(ref) - 1]
    np.testing.assert_allclose(s1.decision_function(K), primal_vote(ref, X), atol=1e-9)


def test_bad_input_raises_typed_errors():
    K = np.eye(3)
    with pytest.raises(EvaluationError, match="epochs=0"):
        VotedPerceptron(epochs=0)
    with pytest.raises(EvaluationError, match="vote="):
        VotedPerceptron(vote="majority")
    with pytest.raises(EvaluationError, match="shape"):
        VotedPerceptron().fit(K, [1, -1])
    with pytest.raises(EvaluationError, match="one class"):
        VotedPerceptron().fit(K, [1, 1, 1])
    with pytest.raises(EvaluationError, match="NaN"):
        VotedPerceptron().fit(np.full((2, 2), np.nan), [1, -1])
    with pytest.raises(EvaluationError, match="fit"):
        VotedPerceptron().predict(K)
    m = VotedPerceptron().fit(K, [1, -1, 1])
    with pytest.raises(EvaluationError, match="trained on 3"):
        m.predict(np.ones((2, 4)))


# ---- real data: TREC questions, NUM vs rest, normalised tree kernels -------------------------

def naive_kernel_voted_perceptron(K, y, epochs):
    """Obvious kernel form: each score recomputed from the list of mistakes (no incremental state)."""
    mistakes, counts = [], [0]
    for _ in range(epochs):
        for i in range(len(y)):
            score = sum(y[l] * K[l, i] for l in mistakes)
            if y[i] * score > 0:
                counts[-1] += 1
            else:
                mistakes.append(i)
                counts.append(1)
    return mistakes, counts


def naive_vote(K_test, y, mistakes, counts):
    out = []
    for row in K_test:
        s, score = 0.0, 0.0
        s += counts[0] * 0.0  # v1 = 0 abstains
        for j, l in enumerate(mistakes):
            score += y[l] * row[l]
            s += counts[j + 1] * np.sign(score)
        out.append(s)
    return np.array(out)


@pytest.fixture(scope="module")
def num_vs_rest():
    d = require_data("trec_qc_num_constituency")
    train = list(read(d / "NUM_train.dat", "svmlighttk"))
    test = list(read(d / "NUM_test.dat", "svmlighttk"))
    rng = np.random.default_rng(0)
    # the files are ordered by label, so take seeded samples in shuffled order
    docs = [train[i] for i in rng.choice(len(train), 400, replace=False)] + \
           [test[i] for i in rng.choice(len(test), 150, replace=False)]
    K = gram({"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}, docs)
    y = np.array([doc.label for doc in docs])
    return K[:400, :400], y[:400], K[400:, :400], y[400:]


def test_real_num_vs_rest_equals_naive_reference(num_vs_rest):
    Ktr, ytr, Kte, yte = num_vs_rest
    assert set(ytr) == {"1", "-1"}
    m = VotedPerceptron(epochs=2).fit(Ktr, ytr)
    ypm = np.where(ytr == "1", 1.0, -1.0)
    mistakes, counts = naive_kernel_voted_perceptron(Ktr, ypm, 2)
    assert m.models_[0][0].tolist() == mistakes
    assert m.models_[0][2].tolist() == counts
    np.testing.assert_allclose(m.decision_function(Kte), naive_vote(Kte, ypm, mistakes, counts), atol=1e-6)


def test_real_num_vs_rest_learns(num_vs_rest):
    Ktr, ytr, Kte, yte = num_vs_rest
    pred = VotedPerceptron(epochs=2).fit(Ktr, ytr).predict(Kte)
    majority = max(np.mean(yte == "1"), np.mean(yte == "-1"))
    # clearly better than always answering the majority class, and finds NUM questions
    assert accuracy(yte, pred) > majority + 0.05
    p, r, f = binary_prf(yte, pred, "1")
    assert p > 0.8 and f > 0.5
