"""Reports of evaluation rows: markdown tables and learning-curve plots."""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError


def plot_learning_curve(rows, path, metric: str = "accuracy", title: str | None = None) -> None:
    """Write a PNG of ``metric`` against training-set size, one line per model setting.

    Error bars show ``accuracy_std`` (the spread over splits) when plotting accuracy.
    """
    plt = optional.pyplot()

    if not rows:
        raise EvaluationError("no learning-curve rows to plot")
    if metric not in rows[0]:
        raise EvaluationError(f"metric {metric!r} is not in the rows; use one of "
                              f"{[k for k, v in rows[0].items() if isinstance(v, float)]}")
    lines = {}
    for r in rows:
        lab = f"{r['kernel']} {r['model']}" + (f" C={r['C']:g}" if r.get("C") is not None else "")
        lines.setdefault(lab, []).append(r)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for lab, rs in lines.items():
        rs = sorted(rs, key=lambda r: r["n_train"])
        x = [r["n_train"] for r in rs]
        yv = [r[metric] for r in rs]
        err = [r.get("accuracy_std", 0.0) for r in rs] if metric == "accuracy" else None
        ax.errorbar(x, yv, yerr=err, marker="o", capsize=3, label=lab)
    ax.set_xlabel("training examples")
    ax.set_ylabel(metric)
    ax.set_title(title or f"learning curve ({metric})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


DEFAULT_COLUMNS = ("kernel", "model", "C", "C_grid", "C_chosen", "epochs", "m", "class_weight", "multiclass",
                   "fraction", "n_train", "n_test", "accuracy", "accuracy_std", "precision", "recall", "f1",
                   "macro_f1", "micro_f1")


_GENERAL = ("C", "C_chosen", "fraction", "n_train")  # grid values: shown as given, not padded to floatfmt

#: the score columns of each task kind's result tables (after its spread ``<first>_std`` in the
#: overall table, where the rows have one)
SCORE_COLUMNS = {"classification": ("accuracy", "precision", "recall", "f1"),
                 "regression": ("pearson", "spearman", "mse"),
                 "ranking": ("map", "mrr", "p_at_1", "ndcg", "n_groups")}


def task_columns(rows, params, task: str) -> list:
    """The columns of a regression's or ranking's result table: kernel, model, each parameter of
    ``params`` (names) with its ``_grid`` and ``_chosen`` of nested selection, ``n_train``,
    ``n_test``, the task's scores and the spread over the splits; those present with a value in
    some row."""
    score = SCORE_COLUMNS[task]
    cols = ["kernel", "model", *[c for p in params for c in (p, f"{p}_grid", f"{p}_chosen")], "split", "n_train",
            "n_test", *score[:1], f"{score[0]}_std", *score[1:]]
    return [c for c in cols if any(r.get(c) is not None for r in rows)]


def report_tables(report: dict, floatfmt: str = ".4f") -> str:
    """The confusion matrix (rows = truth, columns = prediction) and per-class precision, recall,
    F1 and support of one :func:`~gramtile.pipeline.learn.metrics.classification_report`, as markdown."""
    labs = [str(x) for x in report["labels"]]
    conf = ["| truth \\ predicted | " + " | ".join(labs) + " |", "|" + "|".join("---" for _ in range(len(labs) + 1)) + "|"]
    conf += ["| " + lab + " | " + " | ".join(str(v) for v in row) + " |" for lab, row in zip(labs, report["confusion"])]
    per = [{"class": lab, **report["per_class"][lab]} for lab in labs]
    return "\n".join(conf) + "\n\n" + markdown_table(per, columns=["class", "precision", "recall", "f1", "support"],
                                                       floatfmt=floatfmt)


def _cell(col, v, floatfmt, general=()):
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)) and (col in _GENERAL or col in general):
        return format(float(v), "g")
    if isinstance(v, (float, np.floating)):
        return format(float(v), floatfmt)
    return str(v).replace("|", "\\|")


def markdown_table(rows, columns=None, floatfmt: str = ".4f", general=()) -> str:
    """Render result rows as a GitHub markdown table.

    ``columns`` defaults to those of :data:`DEFAULT_COLUMNS` present in any row; a row
    without a column shows ``-``. Numbers are written with ``floatfmt``, except grid values (C,
    and the columns named in ``general``), written as given.
    """
    rows = list(rows)
    if columns is None:
        present = set().union(*(r.keys() for r in rows)) if rows else set()
        columns = [c for c in DEFAULT_COLUMNS if c in present and any(r.get(c) is not None for r in rows)]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(c, r.get(c), floatfmt, general) for c in columns) + " |")
    return "\n".join(lines)
