"""Griffe extension of the documentation site: the Sphinx roles of gramtile's docstrings as links.

gramtile's docstrings are numpy style and name other objects with Sphinx roles
(``:func:`gram```, ``:class:`~gramtile.pipeline.compute.runtime.Runtime```, ``:meth:``,
``:mod:``, ``:data:``, ``:attr:``, ``:exc:``, ``:obj:``). mkdocstrings reads Markdown, where such
a role would show as literal text. This extension rewrites each role, before the docstring is
parsed, as an *optional* cross-reference of mkdocs-autorefs: a link when the named object is on a
page of the site, plain code otherwise (never an unresolved-reference warning, so
``mkdocs build --strict`` stays meaningful for the links the pages write themselves).

The name is resolved as Sphinx would: relative to the docstring's object and its parents
(griffe's ``Object.resolve``), a dotted name by its first part; ``~`` shows only the last part.
"""
from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?P<role>func|class|meth|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full path ``target`` names from ``obj``'s scope (itself when it cannot be resolved)."""
    head, _, rest = target.partition(".")
    try:
        base = obj.resolve(head)
    except (griffe.NameResolutionError, griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError):
        return target
    return f"{base}.{rest}" if rest else base


def rewrite(text: str, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs cross-reference."""
    def one(match: re.Match[str]) -> str:
        target = match["target"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<ref>[^>]+)>", target)   # :func:`title <path>`
        if explicit:
            title, target = explicit["title"], explicit["ref"]
        else:
            short = target.startswith("~")
            target = target.lstrip("~.!")
            title = target.rsplit(".", 1)[-1] if short else target
        if match["role"] in ("func", "meth") and not title.endswith(")"):
            title += "()"
        ident = html.escape(_resolve(obj, target), quote=True)
        return f'<autoref identifier="{ident}" optional><code>{html.escape(title)}</code></autoref>'
    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = rewrite(obj.docstring.value, obj)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        # the package's own module is not among the objects of on_object
        self.on_object(obj=pkg, loader=loader)
