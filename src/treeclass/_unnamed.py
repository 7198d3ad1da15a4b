"""One error for every class of a structure that has no name (or a superseded one).

A writer meets the classes of a structure one by one; stopping at the first unnamed one
made users fix and rerun once per class (``optax.chain(...)`` of hand-named states took
three rounds). The writers call :func:`unnamed_error` on the first failure instead: it looks
at every node type of the structure and says, for each class that cannot be written, why
and how to fix it (the message :meth:`~treeclass._nodes.NodeType.require_name` gives for
one class).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ._errors import UnnamedClassError
from ._nodes import NodeType

__all__ = ["unnamed_error"]

_SEVERAL: Final = (
    "{n} classes in the structure cannot be serialized; fix them all before writing it again:"
)


def unnamed_error(node_types: Iterable[NodeType | None]) -> UnnamedClassError:
    """The error naming every class among ``node_types`` that cannot be written, with its fix.

    ``node_types`` are the node types of one structure, repeats and ``None`` (leaves)
    included; classes are listed in the order they first appear.
    """
    messages: dict[NodeType, str] = {}
    for nt in node_types:
        if nt is None or nt in messages or (nt.name is not None and not nt.superseded):
            continue
        try:
            nt.require_name()
        except UnnamedClassError as e:
            messages[nt] = str(e)
    if len(messages) <= 1:  # (none: the caller's class was named meanwhile by another thread)
        return UnnamedClassError(next(iter(messages.values()), "a class has no name"))
    lines = [_SEVERAL.format(n=len(messages))]
    lines.extend(f"  {i}. {m}" for i, m in enumerate(messages.values(), 1))
    return UnnamedClassError("\n".join(lines))
