"""Key paths read straight from a treespec document's node list, building no class.

A document says everything a key path needs (positions, dict keys, a class's ``data`` fields,
a namedtuple's ``fields``); each entry is written by the one rule of :mod:`treeclass._core.keys`.
No class is built, so no ``__init__`` runs on placeholders. The walks are iterative (any
depth) and linear: :func:`walk` hands out a live list of entries, not joined prefixes.
"""

from __future__ import annotations

from itertools import chain, compress, count, cycle, repeat
from operator import add, is_not
from typing import TYPE_CHECKING

from .._core.keys import attr_entry, index_entry
from .._core.names import DEFAULT_DICT, DICT, LIST, ORDERED_DICT, TUPLE
from .._core.registry import node_for_name
from .._errors import TreeclassError
from .format import all_leaves, nodes_to_spec

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Final

__all__ = ["child_entries", "leaf_paths", "walk"]

_DICTS: Final = frozenset((DICT, ORDERED_DICT))
_NONE_AT_ALL: Final[list[str]] = []  # the entries of every node without children (read only)
_SEQUENCES: Final = frozenset((TUPLE, LIST))


def _scalar_entry(key: Any) -> str | None:
    """The entry of a dict key stored as a JSON scalar (a str, bool, null, int or float)."""
    cls = key.__class__
    if cls is str or cls is bool or cls is float or cls is int or key is None:
        try:
            return index_entry(key)
        except ValueError:  # an int of more digits than int -> str allows
            return None
    return None


def _decode_batch(batch: list[tuple[int, list[Any]]]) -> dict[int, list[str]]:
    """Decode the keys of several dict nodes with one :func:`.format.nodes_to_spec` call."""
    nodes: list[Any] = [(LIST, None, len(batch))]
    total = 0
    for _, keys in batch:
        nodes.append((ORDERED_DICT, keys, len(keys)))
        nodes.extend([None] * len(keys))
        total += len(keys)
    dicts: list[dict[Any, int]] = nodes_to_spec(nodes).unflatten(range(total))
    out: dict[int, list[str]] = {}
    for (index, _), d in zip(batch, dicts):
        ordered = sorted(d.items(), key=lambda kv: kv[1])
        out[index] = [index_entry(k) for k, _ in ordered]
    return out


def _dict_keys(name: str, state: Any) -> Any:
    if name in _DICTS:
        return state
    if name == DEFAULT_DICT and state.__class__ is dict:
        return state.get("keys")
    return None


def child_entries(nodes: Sequence[Any], *, strict: bool = True) -> list[list[str] | None]:
    """For each node of a document's node list, the key entries of its children.

    ``None`` for a leaf; nodes with the same entries may share one list (read only). A dict
    key that cannot be decoded raises with ``strict`` (for a loaded document), else shows as
    its JSON form (``[<{"registered":[...]}>]``), for names that may not be registered here.

    Raises:
        TreeclassError: with ``strict``, a dict key could not be decoded.
    """
    out: list[list[str] | None] = [None] * len(nodes)  # (leaves: None)
    pending: list[tuple[int, list[Any]]] = []
    last: dict[str, tuple[list[str], list[str]]] = {}  # per class: its last fields, entries
    positions: dict[int, list[str]] = {}  # arity -> "[0]", "[1]"... (tuples, lists)
    # Per node object met before (by identity, alive in nodes: node lists may repeat one
    # object for equal nodes), its entries.
    met: dict[int, list[str]] = {}
    for i in compress(count(), map(is_not, nodes, repeat(None))):  # the nodes (not leaves)
        item = nodes[i]
        found = met.get(id(item))
        if found is not None:
            out[i] = found
            continue
        name, state, arity = item
        if not arity:
            out[i] = _NONE_AT_ALL
            continue
        memo = last.get(name)  # (only classes' names: their children are their fields)
        if (
            memo is not None
            and state.__class__ is dict
            and memo[0] == state.get("data", state.get("fields"))  # as the class's last node
        ):
            out[i] = memo[1]
            continue
        keys = _dict_keys(name, state)
        entries: list[str] | None = None
        if name in _SEQUENCES:
            entries = positions.get(arity)
            if entries is None:
                entries = positions[arity] = list(map(index_entry, range(arity)))
        elif keys is not None:
            if (
                keys.__class__ is list
                and len(keys) == arity
                and tuple(map(type, keys)) == (str,) * arity
            ):
                entries = list(map(index_entry, keys))  # str keys, the usual case
            elif keys.__class__ is list and len(keys) == arity:
                scalars: list[Any] = list(map(_scalar_entry, keys))
                if None not in scalars:
                    entries = scalars
                else:
                    pending.append((i, keys))
                    entries = []  # filled in below
        elif state.__class__ is dict:
            fields = state.get("data", state.get("fields"))
            if (
                fields.__class__ is list
                and len(fields) == arity
                and all(f.__class__ is str for f in fields)
            ):
                entries = list(map(attr_entry, fields))
                if name != DEFAULT_DICT:  # (a class: later nodes with these fields share them)
                    last[name] = (fields, entries)
        if entries is None:
            entries = list(map(index_entry, range(arity)))
        elif not pending or pending[-1][0] != i:  # (a pending node's entries come below)
            met[id(item)] = entries
        out[i] = entries
    if pending:
        try:
            decoded = _decode_batch(pending)
        except TreeclassError:
            if strict:
                raise
            import json

            for i, keys in pending:
                out[i] = [f"[<{json.dumps(k)}>]" for k in keys]
        else:
            for i, entries in decoded.items():
                out[i] = entries
    return out


def walk(
    nodes: Sequence[Any], entries: Sequence[list[str] | None]
) -> Iterator[tuple[int, list[str], int]]:
    """Yield ``(index, parts, length)`` for every node, in pre-order.

    ``parts`` is the node's key path as a list of entries (a live list: read it before the
    next step), ``length`` the length of ``"".join(parts)``. ``nodes`` must be one complete
    tree (as a document's node list is once loaded) and ``entries`` from
    :func:`child_entries`.
    """
    parts: list[str] = []
    lengths: list[int] = [0]
    stack: list[list[Any]] = []  # [child entries, index of the next child]
    for i in range(len(nodes)):
        if stack:
            top = stack[-1]
            key: str = top[0][top[1]]
            top[1] += 1
            parts.append(key)
            lengths.append(lengths[-1] + len(key))
        yield i, parts, lengths[-1]
        children = entries[i]
        if children:
            stack.append([children, 0])
            continue
        # A leaf, or a node without children: close it and every ancestor it completes.
        if stack:
            parts.pop()
            lengths.pop()
        while stack and stack[-1][1] == len(stack[-1][0]):
            stack.pop()
            if stack:
                parts.pop()
                lengths.pop()


def leaf_paths(nodes: Sequence[Any], entries: Sequence[list[str] | None]) -> list[str]:
    """The key path of every leaf, in leaf order (what :func:`walk` joins at each leaf).

    ``nodes`` and ``entries`` as for :func:`walk`. Each node's own path is built once, and
    only for a leaf under it.
    """
    out: list[str] = []
    parts: list[str] = []  # keys of the open nodes below the root
    # Open nodes: [child entries, next child, path (built on first need)]; first, one above
    # the root whose only child (the root) has the key "".
    frames: list[list[Any]] = [[[""], 0, ""]]
    # Per list of child entries (by identity: nodes of one class share theirs), the last
    # children seen under it (leaves and nodes without children) and their leaves' keys.
    spans: dict[int, tuple[Sequence[list[str] | None], list[str]]] = {}
    i = 0
    while frames:
        top = frames[-1]
        kids = top[0]
        c = top[1]
        if c == len(kids):
            frames.pop()
            if frames:
                parts.pop()
            continue
        key = kids[c]
        top[1] = c + 1
        grand = entries[i]
        i += 1
        if grand is not None and not grand:
            continue  # a node without children
        path = top[2]
        if path is None and grand is None:
            path = top[2] = "".join(parts)
        if grand is None:  # a leaf
            out.append(path + key)
            continue
        k = len(grand)
        keys: list[str] | None = None  # the leaves' keys, when the children are all ends
        if k <= 16:
            span = entries[i : i + k]
            known = spans.get(id(grand))  # the last node with these child entries
            if known is not None and known[0] == span:
                keys = known[1]
            elif span.count(None) + span.count([]) == k:
                # Children leaves or nodes without children: the leaves' paths in one go.
                keys = [e for e, x in zip(grand, span) if x is None]
                spans[id(grand)] = (span, keys)
        elif all_leaves(nodes, i, k):
            keys = grand
        elif (alike := _alike_children(entries, i, k)) is not None:
            # Children alike (a dict of one class's nodes...): every leaf's path at once.
            if path is None:
                path = top[2] = "".join(parts)
            path += key
            ends, size = alike  # (the keys of the leaves under each child)
            times: Any = repeat  # (repeat(path, n) for each child's path)
            each: Iterable[str] = chain.from_iterable(
                map(times, map(path.__add__, grand), repeat(len(ends)))
            )
            out.extend(map(add, each, cycle(ends)))
            i += k * size
            continue
        if keys is not None:
            if path is None:
                path = top[2] = "".join(parts)
            path += key
            out.extend(map(path.__add__, keys))
            i += k
            continue
        parts.append(key)
        frames.append([grand, 0, None])
    return out


def _alike_children(
    entries: Sequence[list[str] | None], i: int, k: int
) -> tuple[list[str], int] | None:
    """The leaves' keys and size of the ``k`` subtrees from ``entries[i]``, when alike.

    Alike: each has the child entries of the first (equal lists), and children that are
    leaves or nodes without children, as the first's are. ``None`` otherwise (after work
    linear in what was looked at).
    """
    first = entries[i]
    if not first or len(first) > 16:
        return None
    span = entries[i + 1 : i + 1 + len(first)]
    if span.count(None) + span.count([]) != len(first):
        return None
    size = 1 + len(first)
    end = i + size * k
    if end > len(entries) or entries[i:end:size].count(first) != k:
        return None
    for p, x in enumerate(span, 1):
        if entries[i + p : end : size].count(x) != k:
            return None
    return [e for e, x in zip(first, span) if x is None], size


def current_child_entries(
    nodes: list[Any], entries: list[list[str] | None]
) -> list[list[str] | None] | None:
    """``entries`` (from :func:`child_entries` of a loaded document) by today's field names.

    A copy with the children of classes that renamed fields (``aliases=``, a ``migrate=``
    hook) named as today, or ``None`` when every node's are as written (the usual case).
    """
    out: list[list[str] | None] | None = None
    found: dict[str, Any] = {}
    for i, item in enumerate(nodes):
        if item is None:
            continue
        name = item[0]
        child_names = found.get(name, found)
        if child_names is found:
            node = node_for_name(name)
            codec = None if node is None else node.codec
            child_names = found[name] = None if codec is None else codec.child_names
        if child_names is None:
            continue
        names = child_names(item[1])
        if names is None:  # pragma: no cover - the document loaded, so its states do
            continue
        renamed = list(map(attr_entry, names))
        if renamed != entries[i]:
            if out is None:
                out = list(entries)
            out[i] = renamed
    return out
