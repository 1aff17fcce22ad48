"""The dual coordinate descent linear SVM (pipeline/learn/dcd.py) against scikit-learn's
LinearSVC(dual=True) (LIBLINEAR) on random problems both solve."""
import numpy as np
import pytest
from sklearn.svm import LinearSVC

from gramtile.pipeline.learn import dcd
from gramtile.pipeline.learn.errors import EvaluationError


def problem(seed):
    """A random problem: features of a few hundred rows (a row subset is trained on, the rest
    tested), 2-4 classes shifted apart in some directions, sometimes overlapping."""
    rng = np.random.default_rng(seed)
    n, d, k = int(rng.integers(80, 300)), int(rng.integers(2, 30)), int(rng.integers(2, 5))
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d)
    y = rng.integers(0, k, n)
    X += rng.normal(size=(k, d))[y] * rng.uniform(0.2, 2.0)
    train = np.sort(rng.choice(n, int(0.75 * n), replace=False))
    test = np.setdiff1d(np.arange(n), train)
    C = float(10 ** rng.uniform(-2, 1))
    cw = None if rng.random() < 0.5 else {c: float(rng.uniform(0.3, 3.0)) for c in range(k)}
    loss = "hinge" if rng.random() < 0.6 else "squared_hinge"
    bias = float(rng.choice([1.0, 0.5, 3.0]))
    return X, y, train, test, C, cw, loss, bias


def primal(X, y, w, b, C, cw, loss, pos):
    """The primal objective of LIBLINEAR's problem for w (bias weight b / bias folded in)."""
    t = np.where(y == pos, 1.0, -1.0)
    Ci = np.array([C * (cw or {}).get(c, 1.0) if c == pos or len(np.unique(y)) == 2 else C for c in y])
    slack = np.maximum(0.0, 1 - t * (X @ w + b))
    return 0.5 * (w @ w) + float(np.sum(Ci * (slack ** 2 if loss == "squared_hinge" else slack)))


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_liblinear(seed):
    X, y, train, test, C, cw, loss, bias = problem(seed)
    m = dcd.fit(X, train, y[train], C=C, class_weight=cw, loss=loss, bias=bias, tol=1e-8, max_iter=1_000_000)
    sk = LinearSVC(C=C, loss=loss, dual=True, tol=1e-8, max_iter=2_000_000, class_weight=cw,
                   intercept_scaling=bias).fit(X[train], y[train])
    assert m.classes == sk.classes_.tolist()
    assert m.converged
    classes = m.classes
    pos = [classes[1]] if len(classes) == 2 else classes
    for k, (f, p) in enumerate(zip(m.fits, pos)):
        # the sklearn solution's primal objective, computed independently, against our dual one
        b_sk = sk.intercept_[k] / bias
        P_sk = primal(np.c_[X[train], np.full(train.size, bias)], y[train], np.r_[sk.coef_[k], b_sk], 0.0, C, cw,
                      loss, p)
        assert f.primal_objective + f.dual_objective >= -1e-9 * abs(f.primal_objective)  # weak duality
        assert abs(f.dual_objective + P_sk) <= 1e-6 * abs(P_sk), (f.dual_objective, P_sk)
        assert abs(f.primal_objective - P_sk) <= 1e-6 * abs(P_sk)
    for rows in (test, train):
        d_ours = m.decision_function(X, rows)
        d_sk = sk.decision_function(X[rows])
        same = m.predict(X, rows) == sk.predict(X[rows])
        # a multi-class decision is arbitrary where the top two values tie (both -1: two
        # one-vs-rest functions with the point on their margin); those are not counted
        top2 = np.sort(np.atleast_2d(d_sk.T).T, axis=1)[:, -2:] if d_sk.ndim == 2 else None
        tie = np.zeros(rows.size, bool) if top2 is None else top2[:, 1] - top2[:, 0] < 1e-6
        assert np.mean(same | tie) >= 0.999 and tie.mean() < 0.05
        np.testing.assert_allclose(d_ours, d_sk, atol=1e-4 * max(1.0, np.abs(d_sk).max()))
    assert np.mean(m.predict(X, test) == y[test]) == np.mean(sk.predict(X[test]) == y[test])


def test_rows_are_read_in_place():
    X, y, train, test, C, cw, loss, bias = problem(3)
    X0 = X.copy()
    a = dcd.fit(X, train, y[train], C=C, tol=1e-8, max_iter=100_000)
    # the same problem as a copied, reordered array gives the same model
    perm = np.random.default_rng(0).permutation(train.size)
    Xc = np.ascontiguousarray(X[train][perm])
    b = dcd.fit(Xc, np.arange(train.size), y[train][perm], C=C, tol=1e-8, max_iter=100_000)
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-5)
    assert np.array_equal(X, X0)  # the feature array is not written to


def test_balanced_weights_as_sklearn():
    X, y, train, _, C, _, _, _ = problem(11)
    m = dcd.fit(X, train, y[train], C=C, class_weight="balanced", tol=1e-8, max_iter=1_000_000)
    sk = LinearSVC(C=C, loss="hinge", dual=True, tol=1e-9, max_iter=2_000_000, class_weight="balanced").fit(
        X[train], y[train])
    np.testing.assert_allclose(m.coef, sk.coef_, atol=1e-5)


def test_bad_input():
    X = np.random.default_rng(0).normal(size=(10, 3))
    y = np.array([0, 1] * 5)
    with pytest.raises(EvaluationError, match="C-contiguous float64"):
        dcd.fit(X.astype(np.float32), np.arange(10), y)
    with pytest.raises(EvaluationError, match="row positions"):
        dcd.fit(X, np.arange(11), np.r_[y, 0])
    with pytest.raises(EvaluationError, match="one class only"):
        dcd.fit(X, np.arange(5) * 2, y[::2])
    with pytest.raises(EvaluationError, match="loss="):
        dcd.fit(X, np.arange(10), y, loss="log")
    with pytest.raises(EvaluationError, match="class_weight names class 7"):
        dcd.fit(X, np.arange(10), y, class_weight={7: 1.0})
    with pytest.raises(EvaluationError, match="C=0"):
        dcd.fit(X, np.arange(10), y, C=0.0)
