"""Import every kernel family so that each registers its spec classes.

``REGISTRY`` maps the stable ``kind`` id to the spec class. Import this module (or call
:func:`kinds`) before building specs from JSON.
"""
from __future__ import annotations

import importlib

from gramtile.kernels.spec import REGISTRY, spec_from_dict  # noqa: F401

#: Kernel family modules; each registers its specs on import. Missing modules are skipped
#: only while a family is being written (listed in ``_optional``).
_FAMILIES = ("composite", "tree_kernels", "bag_kernels", "subsequence", "dependency_path", "relation_subtree", "route", "hdag", "wsd_kernels")


def _load():
    for name in _FAMILIES:
        try:
            importlib.import_module(f"gramtile.kernels.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"gramtile.kernels.{name}":
                raise


_load()


def kinds() -> list:
    """Registered kernel kinds, sorted."""
    return sorted(REGISTRY)
