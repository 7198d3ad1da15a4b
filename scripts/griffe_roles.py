"""A griffe extension for the docs site: Sphinx roles in docstrings become code spans.

The docstrings use Sphinx cross-reference roles (``:func:`load```, ``:class:`~treeclass.X```)
and reST literal blocks (``text::``), and their example sections are headed ``Example:``;
mkdocstrings renders docstrings as Markdown, where
those would show as raw text. This turns ``:role:`~a.b.c``` into ```c``` and
``:role:`a.b``` into ```a.b```, and a paragraph ending in ``::`` into one ending in ``:``
(the indented block after it is a code block in Markdown too), and ``Example:`` into
``Examples:``. mkdocs.yml loads it.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"(\S)::$", re.MULTILINE)
# Google style's "Example:" is read by griffe as an admonition (its doctest rendered as a
# quote); "Examples:" is the section whose ">>>" lines it renders as code.
_EXAMPLE = re.compile(r"^(\s*)Example:$", re.MULTILINE)


def _role(m: re.Match[str]) -> str:
    target = m[2]
    if m[1]:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` with its Sphinx roles and reST literal markers made Markdown."""
    text = _EXAMPLE.sub(r"\1Examples:", text)
    return _LITERAL.sub(r"\1:", _ROLE.sub(_role, text))


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded object's docstring with :func:`rewrite`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: D102
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
