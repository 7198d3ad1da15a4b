"""A safe builder of ``torch.utils._pytree.TreeSpec`` from ``treespec_dumps`` text.

The text is read by :mod:`treeclass._io.torchspec`; node types are resolved only among the
names registered with torch's pytree and its built-in containers, through the torch adapter's
accessors (nothing imported); a treeclass node's arity is checked against its context. Built
bottom-up without recursion. Every failure is a :class:`~treeclass.TreespecLoadError` (or
:class:`~treeclass.UnregisteredNameError` naming the name).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Final

import torch.utils._pytree as pytree

from .._backends.torch import (
    NOT_KEPT,
    child_count,
    class_for_serialized_name,
    kept_context,
    serialization_of,
)
from .._errors import TreespecLoadError, UnregisteredNameError
from .._io.torchspec import Where, arity, json_context, parse_json, read, where

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["parse_json", "treespec_from_json"]

#: The type torch's TreeSpec holds for a container of :data:`treeclass._io.torchspec.CONTAINERS`.
_TYPES: Final[dict[str, Any]] = {
    "builtins.tuple": tuple,
    "builtins.list": list,
    "builtins.dict": dict,
    "collections.OrderedDict": collections.OrderedDict,
    "collections.defaultdict": collections.defaultdict,
    "collections.deque": collections.deque,
}


def _unregistered(name: str) -> UnregisteredNameError:
    return UnregisteredNameError(
        f"this treespec uses the serialized name {name!r}, but no class is registered under it "
        f"in this process; import the module that defines the class registered as {name!r} "
        "(with treeclass: name=... on pytree_dataclass / register_dataclass / "
        "register_namedtuple) before loading."
    )


def _resolve(name: str, context: Any, at: Where, k: int) -> tuple[Any, Any]:
    """``(type, context)`` of a node as torch's TreeSpec holds it."""
    typ = _TYPES.get(name)
    if typ is not None:
        return typ, context
    if name == "collections.namedtuple":
        cls = class_for_serialized_name(context)
        fields: Any = getattr(cls, "_fields", None)
        if cls is None or fields.__class__ is not tuple:
            raise _unregistered(context)
        arity(f"{where(at)} ({context!r})", len(fields), k)
        return collections.namedtuple, cls
    cls = class_for_serialized_name(name)
    serialize = None if cls is None else serialization_of(cls)
    if cls is None or serialize is None:
        raise _unregistered(name)
    label = f"{where(at)} ({name!r})"
    if serialize.from_dumpable_context is None:
        # torch would json.loads it with its enum hook (which imports); we parse it strictly.
        return cls, json_context(context, label)
    if context.__class__ is str:
        parse_json(context, f"the context of {label}")  # duplicate keys, bad numbers
    try:
        value = serialize.from_dumpable_context(context)
    except TreespecLoadError:
        raise
    except Exception as e:
        raise TreespecLoadError(
            f"the context of {label} was refused by the from_dumpable_context registered for "
            f"{cls.__module__}.{cls.__qualname__}: {type(e).__name__}: {str(e)[:200]}"
        ) from None
    expected = child_count(cls, value)
    if expected is not None:
        arity(label, expected, k)
    return cls, value


def _leaf() -> pytree.TreeSpec:
    make: Callable[[], pytree.TreeSpec] | None = getattr(pytree, "treespec_leaf", None)
    return make() if make is not None else pytree.TreeSpec(None, None, [])


def treespec_from_json(text: str | bytes | bytearray) -> pytree.TreeSpec:
    """Build a torch ``TreeSpec`` from ``treespec_dumps`` text, safely (see the module docs).

    Raises:
        UnregisteredNameError: a node type name (or a namedtuple's name) is not registered.
        TreespecLoadError: anything else wrong with the text.
    """
    entries = read(text)
    leaf = _leaf()
    # (name, context text, arity) -> [type, context, copy?, spec]: a context nodes may share
    # (kept_context), with the frozen spec of such a node whose children are all leaves.
    known: dict[tuple[str, str, int], list[Any]] = {}
    built: list[pytree.TreeSpec] = []
    for name, context, k, flat, at in reversed(entries):
        if name is None:
            built.append(leaf)
            continue
        memo = None
        if context.__class__ is str:
            key = (name, context, k)
            memo = known.get(key)
            if memo is None:
                typ, value = _resolve(name, context, at, k)
                kept = kept_context(value)
                if kept is not NOT_KEPT:
                    memo = known[key] = [typ, kept, kept.__class__ is list, None]
            else:
                typ, value = memo[0], memo[1]
                if memo[2]:
                    value = value.copy()
        else:
            typ, value = _resolve(name, context, at, k)
        if flat:
            if memo is None or memo[2]:
                built.append(pytree.TreeSpec(typ, value, [leaf] * k))
            else:
                if memo[3] is None:
                    memo[3] = pytree.TreeSpec(typ, value, [leaf] * k)
                built.append(memo[3])
            continue
        kids = built[len(built) - k :] if k else []
        if k:
            del built[len(built) - k :]
            kids.reverse()
        built.append(pytree.TreeSpec(typ, value, kids))
    return built[0]
