"""Per-class auxdata getstate / setstate: static values to a JSON-safe form and back.

(First version: the serialization issue hardens and extends this module; the two entry points
and their contract stay: ``setstate(json.loads(json.dumps(getstate(aux)))) == aux``.)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ._registry import NodeDef

__all__ = ["make_getstate", "make_setstate"]


def make_getstate(node: NodeDef) -> Callable[[Any], Any]:
    """Return ``getstate(aux) -> JSON-safe value`` for ``node``."""
    raise NotImplementedError


def make_setstate(node: NodeDef) -> Callable[[Any], Any]:
    """Return ``setstate(value) -> aux`` for ``node``."""
    raise NotImplementedError
