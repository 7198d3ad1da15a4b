"""Every unnamed class of a function ``jax.export`` is serializing, in one error.

``Exported.serialize()`` writes the input and output structures node by node and calls the
``serialize_auxdata`` of each custom node; treeclass's placeholder for a class without a name
(:func:`treeclass._backends.jax._refuse`) raises there. JAX hands that callback only the
node's own auxdata, so :func:`all_unnamed` finds the :class:`jax.export.Exported` being
serialized on the stack -- the ``exp`` argument of ``jax._src.export.serialization.serialize``
(checked with jax 0.10.2) -- and lists every class of its ``in_tree`` and ``out_tree`` that
cannot be written. If that frame is not found (another jax version), the error names the
one class JAX asked about, as before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any, Final

import jax

from .._errors import UnnamedClassError
from .._nodes import NodeType
from .._registry import node_type_for, registered_node
from .._unnamed import unnamed_error

__all__ = ["CHECKED_JAX_VERSION", "all_unnamed"]

#: The jax version whose ``serialize(exp, ...)`` frame :func:`_exported_on_stack` reads.
CHECKED_JAX_VERSION: Final = "0.10.2"
_MAX_FRAMES: Final = 200  # Exported.serialize -> serialize -> _serialize_exported -> ... nesting


def _exported_on_stack() -> Any:
    """The ``jax.export.Exported`` being serialized by this thread, or ``None``."""
    frame: FrameType | None = sys._getframe(1)
    exported_type = jax.export.Exported
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        candidate = frame.f_locals.get("exp")
        if isinstance(candidate, exported_type):
            return candidate
        frame = frame.f_back
    return None


def _node_types(treedef: Any) -> Iterator[NodeType | None]:
    """The treeclass node type of every custom node of a JAX ``PyTreeDef``, in pre-order."""
    stack = [treedef]
    while stack:
        t = stack.pop()
        data = t.node_data()
        if data is None:
            continue
        cls = data[0]
        if isinstance(cls, type):
            yield registered_node(cls) or node_type_for(cls)
        stack.extend(reversed(t.children()))


def all_unnamed(message: str) -> UnnamedClassError:
    """The error for an unnamed class met by ``jax.export``: every such class, or ``message``."""
    exported = _exported_on_stack()
    if exported is None:
        return UnnamedClassError(message)
    try:
        types = [*_node_types(exported.in_tree), *_node_types(exported.out_tree)]
    except Exception:  # pragma: no cover - a structure this jax version reads otherwise
        return UnnamedClassError(message)
    error = unnamed_error(types)
    return error if "\n" in str(error) else UnnamedClassError(message)
