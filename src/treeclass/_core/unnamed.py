"""One error for every class of a structure that has no name (or a superseded one).

Writers call :func:`unnamed_error` on the first failure, so that users fix every class in one
round: it names each class that cannot be written, with the message of
:meth:`~treeclass._core.nodes.NodeType.require_name`; :func:`several` joins them into one error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .._errors import UnnamedClassError
from .nodes import NodeType

__all__ = ["several", "unnamed_error"]

_SEVERAL: Final = (
    "{n} classes in the structure cannot be serialized; fix them all before writing it again:"
)


def several(messages: Iterable[str]) -> UnnamedClassError:
    """One error holding every message, numbered; one message alone is the error unchanged.

    ``messages`` are distinct, each about one class, in the order the classes first appear.
    """
    found = list(messages)
    if len(found) <= 1:  # (none: the caller's class was named meanwhile by another thread)
        return UnnamedClassError(found[0] if found else "a class has no name")
    lines = [_SEVERAL.format(n=len(found))]
    lines.extend(f"  {i}. {m}" for i, m in enumerate(found, 1))
    return UnnamedClassError("\n".join(lines))


def unnamed_message(nt: NodeType) -> str | None:
    """Why ``nt``'s class cannot be written and how to fix it, or ``None`` if it can be."""
    if nt.name is not None and not nt.superseded:
        return None
    try:
        nt.require_name()
    except UnnamedClassError as e:
        return str(e)
    return None  # pragma: no cover - named meanwhile by another thread


def unnamed_error(node_types: Iterable[NodeType | None]) -> UnnamedClassError:
    """The error naming every class among ``node_types`` that cannot be written, with its fix.

    ``node_types`` are the node types of one structure, repeats and ``None`` (leaves)
    included; classes are listed in the order they first appear.
    """
    messages: dict[NodeType, str] = {}
    for nt in node_types:
        if nt is None or nt in messages:
            continue
        message = unnamed_message(nt)
        if message is not None:
            messages[nt] = message
    return several(messages.values())
