"""What a kernel spec needs besides its examples: the corpus resources it names, as keys.

Kernels name corpus-level data they read (``resources()`` of a spec: ``similarity/wordnet``,
``similarity/lsa/lemmas``, ``domain/lsa/100``). A :class:`ResourceKey` pairs such a name with
the representation whose examples build it (the kernel's ``space_rep``, else the one it reads);
its ``param_hash`` names the stored group (:mod:`gramtile.pipeline.stores.resource_store`).
The ``--resources`` option of ``gramtile prepare`` is parsed here too.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.kernels.subsequence import VECTORS_PREFIX as SUBSEQUENCE_VECTORS
from gramtile.pipeline.resources import vector_sources as vs
from gramtile.pipeline.resources.lexical import PREFIX as LEXICAL_PREFIX
from gramtile.pipeline.resources.lexical import table_params


def resource_names(base) -> tuple:
    """Names of the corpus resources a base spec needs besides its batch (usually none).

    A spec may define ``resources()`` returning names such as ``"similarity/wordnet"`` (soft
    matching matrices); the evaluator looks them up in the same mapping as the batches and
    passes them as ``block(X, Y, resources={name: value})`` and ``diag(X, resources=...)``.
    Specs without ``resources()`` keep the plain ``block(X, Y)`` signature.
    """
    get = getattr(base, "resources", None)
    return tuple(get()) if get is not None else ()


def resource_rep(base, name: str):
    """The representation whose examples build resource ``name`` of base spec ``base``.

    None for WordNet synonymy (a function of the vocabulary alone); else the spec's
    ``space_rep`` when set (e.g. an LSA space from the whole contexts for a kernel reading
    target sentences), otherwise the representation the kernel reads.
    """
    if name == "similarity/wordnet":
        return None
    if name.startswith(SUBSEQUENCE_VECTORS):  # the vectors' own rule (vectors_key)
        return base.rep_name if vs.source_kind(name[len(SUBSEQUENCE_VECTORS):]) == "corpus" else None
    return getattr(base, "space_rep", None) or base.rep_name


def resource_reps(spec) -> dict:
    """``{resource name: feeding representation}`` over the base kernels of ``spec``, in order.

    Raises
    ------
    KernelSpecError
        Two base kernels need the same resource built from different representations: both
        would be looked up under one name, so one would silently read the other's space.
    """
    out = {}
    for base in as_spec(spec).base_specs():
        for name in resource_names(base):
            rep = resource_rep(base, name)
            if name in out and out[name] != rep:
                raise KernelSpecError(
                    f"kernel {as_spec(spec).to_json()} needs resource {name!r} built from representation "
                    f"{out[name]!r} and from {rep!r} (parameter 'space_rep'); one evaluation holds one {name!r}. "
                    f"Fix: give those kernels the same space_rep, or compute them as separate Gram stores and "
                    f"combine the stores")
            out.setdefault(name, rep)
    return out


#: Version of the stored layout and of the build recipe (part of every param hash).
FORMAT_VERSION = 1
GROUP = "resources"
#: LSA dimensions and SVD seed of the soft-matching space (kernels name no dimensions for it).
LSA_DIMS = 100
SEED = 0

_HELP = ("valid items: 'wordnet', 'lsa' or 'lsa:100' (the soft-matching LSA space over lemmas), "
         "'domain' or 'domain:DIMS' (the domain kernel's space, DIMS an integer >= 1), each optionally "
         "followed by '@REP' (a representation of the store); e.g. --resources wordnet,lsa:100,domain:100")


#: Name prefix of a stored vector source: ``vectors:`` + the canonical source.
VECTORS = "vectors:"


@dataclass(frozen=True)
class ResourceKey:
    """One resource: the name kernels use, and the representation whose examples build it.

    ``rep`` is None for resources of the vocabulary alone (WordNet synonymy).
    """

    name: str
    rep: str | None = None

    def params(self) -> dict:
        """Build parameters; their hash names the stored group."""
        p = {"format": FORMAT_VERSION, "name": self.name, "rep": self.rep}
        if self.name.startswith("similarity/lsa/"):
            p.update(dims=LSA_DIMS, random_state=SEED, field=self.name.rsplit("/", 1)[1])
        elif self.name.startswith("domain/lsa/"):
            p.update(dims=int(self.name.rsplit("/", 1)[1]), random_state=SEED, idf="log(N/df)")
        elif self.name.startswith("sptk:") and '"source":"lsa"' in self.name:
            p.update(dims=LSA_DIMS, random_state=SEED)
        elif self.name.startswith(VECTORS + "corpus:") or self.name.startswith(SUBSEQUENCE_VECTORS + "corpus:"):
            p.update(dims=vs.DIMS, window=vs.WINDOW, min_count=vs.MIN_COUNT, seed=vs.SEED)
        return p

    @property
    def param_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.params(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def group(self) -> str:
        """Path of the resource's group inside the corpus store (an SPTK table, whose name holds
        JSON and perhaps a file path, is named by its param hash alone)."""
        if self.name.startswith("sptk:"):
            return f"{GROUP}/sptk-{self.param_hash}"
        if self.name.startswith(VECTORS):
            return f"{GROUP}/vectors-{self.param_hash}"
        if self.name.startswith(SUBSEQUENCE_VECTORS):
            return f"{GROUP}/similarity.vectors-{self.param_hash}"
        return f"{GROUP}/{self.name.replace('/', '.')}-{self.param_hash}"


def keys_of(spec) -> list:
    """The :class:`ResourceKey` of every resource the spec's base kernels name, in order.

    Each key's representation is the kernel's ``space_rep`` when set, else the representation
    it reads (:func:`gramtile.pipeline.compute.inmemory.resource_rep`); ``--resources lsa@seq`` builds the
    key of ``similarity: lsa, space_rep: seq``.

    Raises
    ------
    KernelSpecError
        Two base kernels need one resource name from different representations.
    """

    # the feeding representation is the kernel's space_rep when set, else the one it reads
    return [ResourceKey(name, rep) for name, rep in resource_reps(spec).items()]


# ---- vector sources ----------------------------------------------------------------------------

def vectors_key(source: str, rep: str | None) -> ResourceKey:
    """The key of the stored vectors of ``source``: a ``corpus:`` builder's vectors are trained on
    the examples of ``rep``; a file's or a spaCy pipeline's depend on the vocabulary alone."""
    source = vs.canonical_source(source)
    return ResourceKey(VECTORS + source, rep if vs.source_kind(source) == "corpus" else None)


def table_vectors_key(key: ResourceKey) -> ResourceKey | None:
    """The vectors an SPTK table of source ``vectors``, or the subsequence kernel's vector
    similarity, is built from (None for other resources): a corpus builder's trained on the
    resource's own representation."""
    if key.name.startswith(SUBSEQUENCE_VECTORS):
        return vectors_key(key.name[len(SUBSEQUENCE_VECTORS):], key.rep)
    if not key.name.startswith(LEXICAL_PREFIX):
        return None
    p = table_params(key.name)
    return vectors_key(p["vectors"], key.rep) if p["source"] == "vectors" else None


#: Representation kinds a corpus builder can read words from (vector_sources.example_words).
TRAINABLE_KINDS = ("tree", "seq", "wsd", "dep")


def keys_for_vectors_option(source: str, representations: dict) -> list:
    """The keys of a ``--vectors`` value for a store with ``representations`` (name -> kind).

    ``corpus:BUILDER@REP`` trains on REP; without ``@REP`` on every representation of the kinds
    :data:`TRAINABLE_KINDS` (an SPTK spec's table reads the vectors trained on its own ``rep``)."""
    text = source.strip()
    rep = None
    if vs.source_kind(text) == "corpus" and "@" in text:
        text, _, rep = text.partition("@")
        if not rep:
            raise KernelSpecError(f"--vectors {source!r}: '@' must be followed by a representation name")
    vs.canonical_source(text)  # a bad builder fails here
    if vs.source_kind(text) != "corpus":
        return [vectors_key(text, None)]
    if rep is not None:
        if rep not in representations:
            raise KernelSpecError(f"--vectors {source!r}: representation {rep!r} is not in the store (it holds "
                                  f"{sorted(representations)})")
        reps = [rep]
    else:
        reps = [r for r, kind in representations.items() if kind in TRAINABLE_KINDS]
        if not reps:
            raise KernelSpecError(f"--vectors {source!r}: the store holds no representation vectors can be trained "
                                  f"on (kinds {', '.join(TRAINABLE_KINDS)}; it holds {representations})")
    return [vectors_key(text, r) for r in reps]


# ---- the --resources option --------------------------------------------------------------------

def parse_option(text: str) -> list:
    """Parse ``--resources`` (``wordnet,lsa:100,domain:100[@REP]``) into (kind, dims, rep) items.

    Raises
    ------
    KernelSpecError
        Naming the parameter, the bad item and the valid values.
    """
    if not isinstance(text, str) or not text.strip():
        raise KernelSpecError(f"parameter --resources = {text!r} is empty; {_HELP}")
    items = []
    for raw in text.split(","):
        item = raw.strip()
        base, _, rep = item.partition("@")
        kind, _, dims = base.partition(":")
        bad = None
        if kind not in ("wordnet", "lsa", "domain"):
            bad = f"unknown resource {kind!r}"
        elif kind == "wordnet" and dims:
            bad = "wordnet takes no dimensions"
        elif kind == "wordnet" and rep:
            bad = "wordnet depends on the vocabulary only and takes no '@REP'"
        elif dims and not (dims.isdigit() and int(dims) >= 1):
            bad = f"dimensions {dims!r} are not an integer >= 1"
        elif kind == "lsa" and dims and int(dims) != LSA_DIMS:
            bad = (f"the soft-matching kernels read a {LSA_DIMS}-dimensional LSA space, so lsa:{dims} would "
                   f"never be used")
        elif "@" in item and not rep:
            bad = "'@' must be followed by a representation name"
        if bad:
            raise KernelSpecError(f"parameter --resources: item {item!r}: {bad}; {_HELP}")
        d = int(dims) if dims else (LSA_DIMS if kind == "lsa" else 100)
        items.append((kind, d, rep or None))
    return items


def keys_for_option(text: str, representations: dict) -> list:
    """The :class:`ResourceKey` list of a ``--resources`` value for a store with ``representations``
    (name -> kind). Without ``@REP`` an LSA or domain item covers every representation it can be
    built from (kinds ``seq`` and ``wsd``: the examples with lemmas and words)."""
    keys = []
    usable = [r for r, kind in sorted(representations.items()) if kind in ("seq", "wsd")]
    for kind, dims, rep in parse_option(text):
        if kind == "wordnet":
            keys.append(ResourceKey("similarity/wordnet"))
            continue
        if rep is not None and rep not in representations:
            raise KernelSpecError(f"parameter --resources: representation {rep!r} is not in the store (it holds "
                                  f"{sorted(representations)}); {_HELP}")
        reps = [rep] if rep else usable
        if not reps:
            raise KernelSpecError(f"parameter --resources: {kind} needs a representation of kind seq or wsd, "
                                  f"the store holds {representations}; drop {kind!r} from --resources")
        name = "similarity/lsa/lemmas" if kind == "lsa" else f"domain/lsa/{dims}"
        keys.extend(ResourceKey(name, r) for r in reps)
    return list(dict.fromkeys(keys))
