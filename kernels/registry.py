"""Every kernel family, imported so that each registers its spec classes (and its feature map,
``gramtile.kernels.maps``, where it has one); the spec builders.

``REGISTRY`` (in :mod:`gramtile.kernels.spec`) maps the stable ``kind`` id to the spec class;
a family module fills it when imported. Build specs from JSON through this module
(:func:`spec_from_dict`, :func:`parse_spec`, :func:`as_spec`), which guarantees every kind is
registered; :mod:`gramtile.kernels.spec` alone knows only the families already imported.
"""
from __future__ import annotations

from gramtile.kernels import (  # noqa: F401  (each family registers its specs on import)
    bag_kernels,
    composite,
    dependency_path,
    hdag,
    relation_subtree,
    route,
    sptk,
    subsequence,
    tree_kernels,
    within_pair,
    wsd_kernels,
)
from gramtile.kernels.maps import bag as bag_map  # noqa: F401  (each module of maps registers its map)
from gramtile.kernels.maps import feature_map, no_map_reason
from gramtile.kernels.maps import route as route_map  # noqa: F401
from gramtile.kernels.maps import subsequence as subsequence_map  # noqa: F401
from gramtile.kernels.maps import tree as tree_map  # noqa: F401
from gramtile.kernels.spec import REGISTRY, as_spec, parse_spec, spec_from_dict

__all__ = ["REGISTRY", "as_spec", "feature_map", "has_map", "kinds", "no_map_reason", "parse_spec",
           "spec_from_dict"]


def has_map(spec) -> bool:
    """Whether a base spec has a finite explicit feature map (``gramtile.kernels.maps``)."""
    return feature_map(spec) is not None


def kinds() -> list:
    """Registered kernel kinds, sorted."""
    return sorted(REGISTRY)
