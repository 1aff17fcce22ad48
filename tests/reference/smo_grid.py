"""The C grid of an smo SVM solved in one process, one problem after another: the reference the
task form (``gramtile.pipeline.learn.fits``: one :class:`Chain` per problem, run anywhere) is
checked against, and the driver of the smo-against-SVC agreement tests. It was
``crossval.smo_fit_predict`` before every fit became a task; only the tests use it."""
import time

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import read_block
from gramtile.pipeline.learn.smo import RowCache, class_C, solve_binary
from gramtile.pipeline.progress import log


def smo_fit_predict(source, y, train, test, Cs, classes, class_weight=None, cache_mb: float = 200.0,
                    tol: float = 1e-3, row_file=None, shrinking: bool = True) -> dict:
    """Fit the SVM with :mod:`~gramtile.pipeline.learn.smo` for every C of ``Cs`` and predict ``test``.

    Binary: one problem, ``classes[1]`` positive (SVC's convention: f > 0 predicts ``classes[1]``).
    More classes: one-vs-rest, the largest decision value wins, ties to the later class (as
    ``OneVsRestClassifier``); class weights ``"balanced"`` balance each binary problem (as there),
    a dict weights the examples of each original label. The C grid is solved in increasing order,
    each problem warm-started from its solution at the previous C (the box only grows, so that
    solution stays feasible). K(train, train) is read through one :class:`RowCache` of
    ``cache_mb`` (from ``row_file`` when given); predictions read K(test, support) in bands of at
    most ``cache_mb`` (from ``row_file`` too), after the cache is released.

    Returns
    -------
    dict C -> predicted labels of ``test``
    """
    y = np.asarray(y)
    train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
    ytr = y[train]
    t0 = time.perf_counter()
    rows = RowCache(source, train, cache_mb, row_file=row_file)
    binary = len(classes) == 2
    problems = [classes[1]] if binary else list(classes)
    sols, prev = {}, {}
    for C in sorted(set(float(c) for c in Cs)):
        for p in problems:
            yc = np.where(ytr == p, 1.0, -1.0)
            box = class_C(ytr, C, class_weight) if binary or isinstance(class_weight, dict) else \
                class_C(yc, C, class_weight)
            a0 = None
            if p in prev and np.all(box >= prev[p][1]):
                a0 = prev[p][0]
            t1 = time.perf_counter()
            sol = solve_binary(rows, yc, box, tol=tol, alpha0=a0, shrinking=shrinking)
            log.debug(f"  smo C={C:g} class {p!r}: {sol.iterations} iterations, {sol.misses} row reads, "
                      f"{sol.hits} hits, {time.perf_counter() - t1:.1f} s")
            if not sol.converged:
                raise EvaluationError(f"smo did not converge at C={C:g} for class {p!r} in {sol.iterations} "
                                      "iterations; raise the tolerance (tol) or use --solver libsvm")
            prev[p] = (sol.alpha, box)
            sols[(C, p)] = (yc, sol)
    t_fit, hits, misses = time.perf_counter() - t0, rows.hits, rows.misses
    its = sum(sol.iterations for _, sol in sols.values())
    del rows  # its slab: the prediction's bands take that memory
    t1 = time.perf_counter()
    used = np.zeros(train.size, dtype=bool)
    for _, sol in sols.values():
        used |= sol.alpha > 0
    sv = np.flatnonzero(used)
    coef = {k: (sol.alpha * yc)[sv] for k, (yc, sol) in sols.items()}
    dec = {k: np.empty(test.size) for k in sols}
    band = max(1, int(cache_mb * 1e6 // (8 * max(1, sv.size))))
    pos = row_file.positions(source) if row_file is not None else None
    for a in range(0, test.size, band):
        if pos is None:
            Kb = read_block(source, test[a:a + band], train[sv], "test x support")
        else:
            Kb, buf, cols = np.empty((min(band, test.size - a), sv.size)), np.empty(row_file.n), pos[train[sv]]
            for k, r in enumerate(pos[test[a:a + band]].tolist()):
                row_file.read_into(r, cols, Kb[k], buf)
        for k, (_, sol) in sols.items():
            dec[k][a:a + band] = Kb @ coef[k] - sol.rho
        del Kb
    log.info(f"  smo fits on {train.size} examples: {len(sols)} problems, {its} iterations, {misses} row reads, "
             f"hit rate {hits / max(1, hits + misses):.3f}, {t_fit:.1f} s; prediction of {test.size} on "
             f"{sv.size} support vectors {time.perf_counter() - t1:.1f} s")
    cl = np.asarray(classes)
    preds = {}
    for C in Cs:
        C = float(C)
        if binary:
            preds[C] = np.where(dec[(C, classes[1])] > 0, cl[1], cl[0])
        else:
            S = np.column_stack([dec[(C, c)] for c in classes])
            preds[C] = cl[S.shape[1] - 1 - np.argmax(S[:, ::-1], axis=1)]
    return preds
