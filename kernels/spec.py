"""Kernel specs: frozen, validated values that name a kernel and its parameters.

A spec is the science of a Gram matrix: ``kind`` (stable id), parameters, the representation
it reads, and ``spec_hash`` (sha256 of the canonical JSON of ``to_dict()``), which goes into
stores and Dask task keys. Execution settings (tiles, workers) are never part of a spec.

Base specs evaluate blocks from batches (:meth:`BaseSpec.block`, :meth:`BaseSpec.diag`);
composite specs (:mod:`gramtile.kernels.composite`) only combine their parts' blocks and
diagonals, so a composite is derivable from stored base matrices without recomputing pairs.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from gramtile.kernels.errors import KernelSpecError

REGISTRY: dict[str, type] = {}

#: Default corpus representation name read by each batch kind.
DEFAULT_REP = {"tree": "tree", "dep": "dep", "seq": "seq", "ptree": "ptree", "wsd": "wsd",
               "bag": "bow", "relation": "relation", "hdag": "hdag"}


def register(cls):
    """Class decorator: add a spec class to the registry under its ``kind``."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    if cls.kind in REGISTRY and REGISTRY[cls.kind] is not cls:
        raise TypeError(f"kernel kind {cls.kind!r} registered twice ({REGISTRY[cls.kind].__name__}, {cls.__name__})")
    REGISTRY[cls.kind] = cls
    return cls


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


@dataclass(frozen=True)
class KernelSpec:
    """Base of every spec. Subclasses are frozen dataclasses whose fields are the parameters."""

    kind: ClassVar[str] = ""
    #: Parameters added after stores of this kind existed: left out of the spec (its JSON and
    #: hash) while they hold their default, so every Gram store computed before they existed
    #: keeps its spec hash.
    added_later: ClassVar[tuple] = ()

    def __post_init__(self):
        self.validate()

    # -- identity ------------------------------------------------------------------------
    def params(self) -> dict:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in self.added_later and v == f.default:
                continue
            out[f.name] = v
        return out

    def to_dict(self) -> dict:
        d = {"kind": self.kind}
        for k, v in self.params().items():
            d[k] = _to_json(v)
        return d

    @property
    def spec_hash(self) -> str:
        return hashlib.sha256(_canonical(self.to_dict()).encode()).hexdigest()

    def to_json(self) -> str:
        return _canonical(self.to_dict())

    @classmethod
    def from_params(cls, d: dict):
        """Build from the parameter part of a spec dict (``kind`` already removed)."""
        allowed = {f.name for f in fields(cls)}
        for k in d:
            if k not in allowed:
                raise KernelSpecError(
                    f"unknown key {k!r} in kernel spec of kind {cls.kind!r}; allowed keys: {sorted(allowed)}")
        return cls(**d)

    # -- validation helpers --------------------------------------------------------------
    def validate(self):
        """Check parameters; raise :class:`KernelSpecError` naming parameter, range and value."""

    def _number(self, name, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
        v = getattr(self, name)
        ok_type = isinstance(v, (int, float)) and not isinstance(v, bool)
        if integer:
            ok_type = isinstance(v, int) and not isinstance(v, bool)
        rng = f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{')' if hi_open else ']'}"
        if not ok_type or (isinstance(v, float) and not math.isfinite(v)):
            want = "an integer" if integer else "a number"
            raise KernelSpecError(f"parameter {name!r} of kernel {self.kind!r} must be {want} in {rng}, got {v!r}")
        bad = (lo is not None and (v < lo or (lo_open and v == lo))) or \
              (hi is not None and (v > hi or (hi_open and v == hi)))
        if bad:
            raise KernelSpecError(f"parameter {name!r} of kernel {self.kind!r} must be in {rng}, got {v!r}")
        if not integer:
            object.__setattr__(self, name, float(v))

    def _choice(self, name, choices):
        v = getattr(self, name)
        if v not in choices:
            raise KernelSpecError(f"parameter {name!r} of kernel {self.kind!r} must be one of {list(choices)}, got {v!r}")

    def _string(self, name):
        v = getattr(self, name)
        if not isinstance(v, str) or not v:
            raise KernelSpecError(f"parameter {name!r} of kernel {self.kind!r} must be a non-empty string, got {v!r}")

    def _flag(self, name):
        v = getattr(self, name)
        if not isinstance(v, bool):
            raise KernelSpecError(f"parameter {name!r} of kernel {self.kind!r} must be true or false, got {v!r}")

    # -- structure -----------------------------------------------------------------------
    def parts(self) -> tuple:
        """Direct sub-specs (empty for base kernels)."""
        return ()

    def base_specs(self) -> list:
        """All distinct base specs below (or equal to) this one, depth-first, by hash."""
        seen, out = set(), []

        def walk(s):
            if not s.parts():
                if s.spec_hash not in seen:
                    seen.add(s.spec_hash)
                    out.append(s)
            for p in s.parts():
                walk(p)

        walk(self)
        return out

    def reps(self) -> list:
        """Sorted names of the corpus representations this spec's base kernels read."""
        return sorted({r for b in self.base_specs() for r in b.rep_names})

    def combine(self, base: dict):
        """Evaluate from base results ``{spec_hash: (K, diag_rows, diag_cols)}``.

        Returns ``(K, diag_rows, diag_cols)`` for this spec.
        """
        return base[self.spec_hash]


@dataclass(frozen=True)
class BaseSpec(KernelSpec):
    """A kernel computed from one representation by a Numba core.

    Subclasses set ``reads`` (the batch kind) and implement :meth:`block` and :meth:`diag`.
    """

    reads: ClassVar[str] = ""

    def default_rep(self) -> str:
        return DEFAULT_REP[self.reads]

    @property
    def rep_name(self) -> str:
        """Name of the corpus representation this kernel reads (the ``rep`` parameter)."""
        return getattr(self, "rep", None) or self.default_rep()

    @property
    def rep_names(self) -> tuple:
        """Every representation this kernel reads: its ``rep_name``, or both fields' for a
        kernel that compares the two texts of one example (:mod:`gramtile.kernels.within_pair`)."""
        return (self.rep_name,)

    def block(self, X, Y=None) -> np.ndarray:
        """Dense float64 block K[i, j] = k(X_i, Y_j), shape (X.n, Y.n); Y=None means Y = X."""
        raise NotImplementedError

    def diag(self, X) -> np.ndarray:
        """Self-kernels k(X_i, X_i), shape (X.n,)."""
        raise NotImplementedError

    def paired(self, X, Y) -> np.ndarray:
        """``k(X_i, Y_i)`` of two batches of one length, shape (X.n,): one example at a time here;
        kernels whose core can walk the pairs in one pass override it."""
        return np.array([self.block(X.take([i]), Y.take([i]))[0, 0] for i in range(X.n)], dtype=np.float64)


def _to_json(v):
    if isinstance(v, KernelSpec):
        return v.to_dict()
    if isinstance(v, tuple):
        return [_to_json(x) for x in v]
    return v


def spec_from_dict(d) -> KernelSpec:
    """Build a spec from its JSON dict (docs/formats.md); nested specs are built recursively."""
    if isinstance(d, KernelSpec):
        return d
    if not isinstance(d, dict):
        raise KernelSpecError(f"a kernel spec must be a JSON object like {{\"kind\": \"sst\", \"lam\": 0.4}}, got {d!r}")
    if "kind" not in d:
        raise KernelSpecError(f"kernel spec {d!r} has no 'kind'; known kinds: {sorted(REGISTRY)}")
    kind = d["kind"]
    cls = REGISTRY.get(kind)
    if cls is None:
        raise KernelSpecError(f"unknown kernel kind {kind!r}; known kinds: {sorted(REGISTRY)}")
    params = {k: v for k, v in d.items() if k != "kind"}
    return cls.from_params(params)


def parse_spec(text: str) -> KernelSpec:
    """Parse a CLI ``--kernel`` value: inline JSON, or ``@path`` to a JSON file."""

    src = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                src = f.read()
        except OSError as e:
            raise KernelSpecError(f"cannot read kernel spec file {text[1:]!r}: {e.strerror}") from None
    try:
        d = json.loads(src)
    except json.JSONDecodeError as e:
        raise KernelSpecError(f"kernel spec is not valid JSON ({e.msg} at character {e.pos}): {src!r}; "
                              f"write it like '{{\"kind\": \"sst\", \"lam\": 0.4}}'") from None
    return spec_from_dict(d)


def as_spec(spec) -> KernelSpec:
    if isinstance(spec, KernelSpec):
        return spec
    if isinstance(spec, str):
        return parse_spec(spec)
    return spec_from_dict(spec)
