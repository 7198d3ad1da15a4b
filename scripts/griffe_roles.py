"""A griffe extension for the docs site: Sphinx roles in docstrings become code spans.

The docstrings use Sphinx cross-reference roles (``:func:`load```, ``:class:`~treeclass.X```)
and reST literal blocks (``text::``), and their example sections are headed ``Example:``;
mkdocstrings renders docstrings as Markdown, where
those would show as raw text. This turns ``:role:`~a.b.c``` into ```c``` and
``:role:`a.b``` into ```a.b```, a paragraph ending in ``::`` and the indented block after it
into one ending in ``:`` and a fenced code block, ``.. versionadded:: 0.1.0`` (and
``versionchanged``) into an italic line, and ``Example:`` into ``Examples:``.
mkdocs.yml loads it.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"\S::$")
_ITEM = re.compile(r"^\s*[*-] ")
_VERSION = re.compile(r"^(\s*)\.\. version(added|changed|removed):: *(\S+) *(.*)$", re.MULTILINE)
_VERSION_WORDS = {"added": "Added", "changed": "Changed", "removed": "Removed"}
# Google style's "Example:" is read by griffe as an admonition (its doctest rendered as a
# quote); "Examples:" is the section whose ">>>" lines it renders as code.
_EXAMPLE = re.compile(r"^(\s*)Example:$", re.MULTILINE)


def _role(m: re.Match[str]) -> str:
    target = m[2]
    if m[1]:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _version(m: re.Match[str]) -> str:
    text = f"{m[1]}*{_VERSION_WORDS[m[2]]} in version {m[3]}"
    return f"{text}:* {m[4]}\n" if m[4] else f"{text}.*\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _literal_blocks(text: str) -> str:
    """Each reST literal block of ``text`` as a fenced code block.

    A literal block is a paragraph ending in ``::``, then lines indented deeper than the
    paragraph's text. In a list item the fence is indented 4 columns past the item's marker,
    which Python-Markdown needs to keep it in the item.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if _LITERAL.search(line) is None:
            out.append(line)
            continue
        start = i - 1
        while start > 0 and lines[start - 1].strip():
            start -= 1
        item = _ITEM.match(lines[start])
        content = item.end() if item else _indent(lines[start])
        fence = " " * (_indent(lines[start]) + 4 if item else content)
        out.append(line[:-2] + ":")
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > content):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
            i -= 1
        code = textwrap.dedent("\n".join(block)).strip("\n").splitlines()
        if code:
            out += ["", fence + "```text", *(fence + c if c else "" for c in code), fence + "```"]
    return "\n".join(out)


def rewrite(text: str) -> str:
    """The docstring ``text`` with its Sphinx roles, literal blocks and examples as Markdown."""
    text = _EXAMPLE.sub(r"\1Examples:", text)
    text = _VERSION.sub(_version, text)
    return _literal_blocks(_ROLE.sub(_role, text))


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded object's docstring with :func:`rewrite`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: D102
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
