"""The treespec document: text <-> framework-neutral node list <-> :class:`TreeSpec`.

A document (``docs/format.md``; JSON Schema ``treespec.schema.json``) is one canonical,
compact JSON object::

    {"format":"treeclass.treespec","leaves":3,"nodes":[...],"version":1}

``nodes`` is the tree in pre-order as a *flat* list: ``null`` is a leaf, ``[name, state, arity]``
a node whose ``arity`` children are the next subtrees. Every structure -- the embedded
registry's and the frameworks' -- goes through that node list. Loading never imports, never
looks anything up by module path and takes time linear in the document's size; every bad
input is a :class:`~treeclass.TreespecLoadError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias

from .._core.json import (
    EXACT_SCALARS,
    SCALAR_TYPES,
    census,
    dumps_canonical,
    loads_checked,
    loads_strict,
    strict_scanner,
)
from .._core.nodes import NodeType, dropping_node
from .._core.registry import node_for_name
from .._core.state import Layout
from .._core.tree import NONE_ENTRY, TreeSpec
from .._core.unnamed import unnamed_error
from .._errors import TreespecLoadError, UnnamedClassError, brief, unregistered_name

__all__ = [
    "FORMAT_ID",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "Node",
    "all_leaves",
    "aux_to_bytes",
    "dumps_nodes",
    "loads_nodes",
    "nodes_to_spec",
    "spec_to_nodes",
    "state_from_bytes",
    "unregistered_names",
]

#: One entry of the node list: ``None`` (a leaf) or ``(name, state, arity)`` (a tuple when
#: made here, a JSON list when read from a document).
Node: TypeAlias = "Sequence[Any] | None"

#: The version of the treespec document this release writes.
FORMAT_VERSION: Final = 1
#: The versions this release reads.
READABLE_VERSIONS: Final = (1,)
#: The value of the ``"format"`` key of every document.
FORMAT_ID: Final = "treeclass.treespec"
_KEYS: Final = frozenset(("format", "version", "leaves", "nodes"))


def _short(n: int) -> str:
    try:
        text = str(n)
    except ValueError:  # more digits than Python prints (JSON parsing already refuses them)
        return f"an integer of {n.bit_length()} bits"
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def all_leaves(nodes: Sequence[Node], start: int, k: int) -> bool:
    """Whether ``nodes[start:start + k]`` are all leaves (``None``).

    Probed in doubling chunks: the work is at most twice the run of leaves there, so a walk
    stays linear whatever arities a document claims.
    """
    if k <= 16:
        return nodes[start : start + k].count(None) == k
    end = start + k
    if end > len(nodes):
        return False
    pos = start
    step = 8
    while pos < end:
        stop = min(pos + step, end)
        if nodes[pos:stop].count(None) != stop - pos:
            return False
        pos = stop
        step *= 2
    return True


# --- spec <-> node list ---------------------------------------------------------------------------


def spec_to_nodes(spec: TreeSpec) -> list[Node]:
    """The framework-neutral node list of ``spec``, in pre-order.

    Raises:
        UnnamedClassError: a node's class (or namedtuple) has no registered name.
        UnserializableStaticError: a static value has no JSON form.
    """
    # Per node type: name, getstate, last auxdata, its value classes (when exact scalars, for
    # which equal is the same: compared first, so == runs on those only) and its node,
    # repeated for an equal auxdata (dumps_nodes writes a repeated node once).
    cache: dict[NodeType, list[Any]] = {}
    out: list[Node] = []
    append = out.append
    for e in spec._entries:
        if e is None:
            append(None)
            continue
        nt, aux, k, leafy = e
        h = cache.get(nt)
        if h is None:
            try:
                name = nt.require_name()
            except UnnamedClassError:  # say at once what every class of the spec needs
                raise unnamed_error(e[0] for e in spec._entries if e is not None) from None
            h = cache[nt] = [name, nt.getstate, None, None, None]  # (no node yet)
        node = h[4]
        if (
            node is None
            or node[2] != k
            or not (
                aux is h[2]
                or (aux.__class__ is tuple and tuple(map(type, aux)) == h[3] and aux == h[2])
            )
        ):
            node = h[4] = (h[0], h[1](aux), k)
            h[2] = aux
            plain = aux.__class__ is tuple and EXACT_SCALARS.issuperset(map(type, aux))
            h[3] = tuple(map(type, aux)) if plain else None
        append(node)
        if leafy and k:
            out.extend([None] * k)
    return out


def unregistered_names(nodes: Sequence[Node]) -> list[str]:
    """Every name of a checked node list that no class is registered under here, each once.

    In the order of first use; what an :class:`~treeclass.UnregisteredNameError` lists, so
    that one load names every class to import (never importing anything).
    """
    names = dict.fromkeys(node[0] for node in nodes if node is not None)
    return [name for name in names if node_for_name(name) is None]


def _node_type(name: str, nodes: Sequence[Node]) -> NodeType:
    nt = node_for_name(name)
    if nt is None:
        raise unregistered_name(unregistered_names(nodes), "this treespec")
    return nt


def nodes_to_spec(nodes: Sequence[Node]) -> TreeSpec:
    """Build the embedded registry's :class:`~treeclass.TreeSpec` from a node list.

    ``nodes`` must hold one complete tree, as :func:`loads_nodes` checks. Names are resolved
    among registered names (aliases included); states go through each node type's
    ``load_state``. A node whose children are not one per data field today (absent or
    removed fields: a :class:`~treeclass._core.state.Layout`) gets ``None`` children for the
    absent fields whose default is ``None``, and a node type that drops removed fields'
    children and fills the other defaults on unflatten
    (:func:`~treeclass._core.nodes.dropping_node`), so the leaves still line up.

    Raises:
        TreespecLoadError: a state is wrong, or does not give its node the arity it has.
        UnregisteredNameError: a name is not registered in this process.
    """
    types: dict[str, NodeType] = {}
    entries: list[Any] = []
    append = entries.append
    n = len(nodes)
    leaves = 0
    i = 0
    # Open nodes inside a node that lacks children in the document (only there: the None
    # children its plan adds go between theirs): [plan, next child, children left].
    frames: list[list[Any]] = []
    while True:
        while frames:  # fill in planned None children; close finished nodes
            frame = frames[-1]
            if not frame[2]:
                frames.pop()
            elif not frame[0][frame[1]]:
                append(NONE_ENTRY)
                frame[1] += 1
                frame[2] -= 1
            else:
                frame[1] += 1
                frame[2] -= 1
                break
        if i >= n:
            break
        item = nodes[i]
        if item is None:
            append(None)
            leaves += 1
            i += 1
            continue
        name, state, k = item
        nt = types.get(name)
        if nt is None:
            nt = types[name] = _node_type(name, nodes)
        try:
            aux, plan = nt.load_state(state)
        except TreespecLoadError as e:
            # (a migrate hook's own error stays the cause, for the traceback)
            raise type(e)(f"node {i} ({brief(name, 100)}): {e}") from e.__cause__
        if plan is None:
            expect = nt.arity_of(aux)
        else:
            if isinstance(plan, Layout):  # removed fields' children: a node that drops them
                nt = dropping_node(nt, plan)
                plan = plan.plan
            expect = sum(plan)
        if expect is not None and expect != k:
            raise TreespecLoadError(
                f"node {i} ({brief(name, 100)}) has {_short(k)} children but its state gives "
                f"it {expect}."
            )
        i += 1
        if plan is not None:  # some children are not in the document: no leafy shortcut
            append((nt, aux, len(plan), False))
            frames.append([plan, 0, len(plan)])
            continue
        # Canonical form (as tree_flatten makes it): a node whose children are all leaves
        # holds them itself; they get no entries of their own.
        leafy = all_leaves(nodes, i, k)
        append((nt, aux, k, leafy))
        if leafy:
            leaves += k
            i += k
        elif k and frames:
            frames.append([(True,) * k, 0, k])  # (every child in the document)
    return TreeSpec._make(tuple(entries), leaves)


# --- document <-> node list -------------------------------------------------------------------


def dumps_nodes(nodes: Sequence[Node]) -> str:
    """The canonical document text of a node list (whatever registry it was made from).

    A node object that appears many times (:func:`spec_to_nodes` repeats equal nodes) is
    encoded once; the text is the same as encoding the whole document in one go.
    """
    leaves = nodes.count(None)
    inner = len(nodes) - leaves  # the nodes that are not leaves
    if inner >= 16:
        distinct = dict(zip(map(id, nodes), nodes))  # (nodes holds them: ids stay unique)
        if (len(distinct) - 1) * 4 <= inner:
            texts = {i: "null" if n is None else dumps_canonical(n) for i, n in distinct.items()}
            listed = ",".join(map(texts.__getitem__, map(id, nodes)))
            return (
                f'{{"format":"{FORMAT_ID}","leaves":{leaves},"nodes":[{listed}],'
                f'"version":{FORMAT_VERSION}}}'
            )
    return dumps_canonical(
        {
            "format": FORMAT_ID,
            "leaves": leaves,
            "nodes": nodes,
            "version": FORMAT_VERSION,
        }
    )


def _bad(message: str) -> TreespecLoadError:
    return TreespecLoadError(f"not a loadable treeclass treespec: {message}")


def loads_nodes(text: str | bytes | bytearray) -> list[Node]:
    """Parse and check a document; return its node list (names are not looked up here).

    The one reader of treespec documents (also of :func:`loads_spec`'s general path): the
    document's own ``nodes`` list, checked to hold exactly one complete tree.

    Raises:
        TreespecLoadError: the text is not such a document (any problem at all).
    """
    return loads_checked(_as_text(text), _check_document, _not_json)


def _not_json(e: ValueError) -> TreespecLoadError:
    return _bad(f"the text is not valid JSON ({e!s:.200}).")


def _as_text(text: str | bytes | bytearray) -> str:
    if isinstance(text, str):
        return text
    if not isinstance(text, (bytes, bytearray)):
        raise TreespecLoadError(
            "treespec_loads() takes the document as str, bytes or bytearray, got "
            f"{type(text).__name__}."
        )
    try:
        return bytes(text).decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_json(e) from None


def loads_spec(text: str | bytes | bytearray) -> tuple[list[Node], TreeSpec]:
    """:func:`nodes_to_spec` of :func:`loads_nodes` (the node list, read only, and the spec).

    A document in canonical form is read by walking its text (:func:`_loads_canonical`);
    any other, or one it gives up on, by the two functions, which name what is wrong.

    Raises:
        TreespecLoadError: as :func:`loads_nodes` and :func:`nodes_to_spec`.
        UnregisteredNameError: as :func:`nodes_to_spec`.
    """
    text = _as_text(text)
    done = _loads_canonical(text)
    if done is not None:
        return done
    nodes = loads_nodes(text)  # (another form, anything unusual: the general path)
    return nodes, nodes_to_spec(nodes)


# The canonical text around the node list (dumps_nodes writes sorted keys, no spaces).
_HEAD: Final = '{"format":"' + FORMAT_ID + '","leaves":'
_NODES_KEY: Final = ',"nodes":['
_TAIL: Final = '],"version":' + str(FORMAT_VERSION) + "}"
#: ``",null" * k``: the text of ``k`` leaf children after their node.
_NULL_RUNS: Final = tuple(",null" * k for k in range(65))
_LEAF_RUNS: Final = tuple((None,) * k for k in range(65))


class _Seen:
    """A node text read in a document, with what it loads as."""

    __slots__ = ("entry", "fresh", "item", "k", "leafy", "nt", "shared", "size", "text")

    def __init__(self, text: str, item: list[Any], nt: NodeType) -> None:
        k: int = item[2]
        self.text = text
        self.size = len(text)
        self.item = item
        self.k = k
        self.nt = nt
        #: Whether other nodes of its text may share its auxdata (worked out on first use).
        self.shared: bool | None = None
        #: Its entry in the spec, and as a node whose children are all leaves (see load).
        self.entry: tuple[NodeType, Any, int, bool] = (nt, None, k, False)
        self.leafy = self.entry
        #: Whether the state is parsed again for each load: a class's migrate hook may
        #: change the state it is given (as the general path, which parses every node).
        evolution = None if nt.info is None else nt.info.evolution
        self.fresh = evolution is not None and evolution.migrate is not None

    def load(self, first: bool = False) -> bool:
        """Load the state (again, for another node of the same text: a new auxdata)."""
        try:
            again = self.fresh and not first
            state = strict_scanner()(self.text, 0)[0][1] if again else self.item[1]
            aux, plan = self.nt.load_state(state)
        except (TreespecLoadError, ValueError, RecursionError):
            return False
        expect = self.nt.arity_of(aux)
        if plan is not None or (expect is not None and expect != self.k):
            return False
        self.entry = (self.nt, aux, self.k, False)
        self.leafy = (self.nt, aux, self.k, True)
        return True


def _shareable(state: Any) -> bool:
    """Whether equal state text may give one auxdata to every node that has it.

    Yes when the auxdata is immutable and one text is one value: a ``null`` state, str
    keys, JSON scalar static values (floats too: equal text, unlike ``==``, is one value).
    """
    cls = state.__class__
    if state is None:
        return True
    if cls is list:
        return all(k.__class__ is str for k in state)
    if cls is not dict:
        return False
    static = state.get("static")
    return static.__class__ is dict and SCALAR_TYPES.issuperset(map(type, static.values()))


def _null_run(text: str, pos: int, k: int) -> bool:
    """Whether ``text[pos:]`` starts with ``k`` (> 64) leaves (``,null`` each).

    Compared in blocks of 64, stopping at the first that differs (linear, as
    :func:`all_leaves`).
    """
    if len(text) - pos < 5 * k:
        return False
    block = _NULL_RUNS[64]
    while k > 64:
        if not text.startswith(block, pos):
            return False
        pos += 320
        k -= 64
    return text.startswith(_NULL_RUNS[k], pos)


def _read_node(scan: Callable[[str, int], tuple[Any, int]], text: str, pos: int) -> _Seen | None:
    """The node whose text starts at ``text[pos]``, parsed strictly and loaded, or ``None``."""
    try:
        item, end = scan(text, pos)
    except (ValueError, RecursionError):
        return None
    if item.__class__ is not list or len(item) != 3:
        return None
    name, _, k = item
    if name.__class__ is not str or k.__class__ is not int or k < 0:
        return None
    nt = node_for_name(name)
    if nt is None:
        return None
    seen = _Seen(text[pos:end], item, nt)
    return seen if seen.load(first=True) else None


#: Node texts read in earlier documents whose auxdata is shared (immutable, no migrate hook),
#: by the text of their name: the first look of a document for a name it has not read yet.
_KEPT: dict[str, list[_Seen]] = {}
_KEPT_NAMES: Final = 256  # names kept at most (forgotten all at once past that)
_KEPT_SIZE: Final = 1024  # the longest node text kept


def _known_before(key: str, text: str, pos: int) -> _Seen | None:
    """A node text kept from an earlier document (name text ``key``) at ``text[pos]``.

    Only if its name still loads as the node type it was read with (else ``None``).
    """
    for seen in _KEPT.get(key, ()):
        if text.startswith(seen.text, pos) and node_for_name(seen.item[0]) is seen.nt:
            return seen
    return None


def _keep(key: str, seen: _Seen) -> None:
    """Keep ``seen`` (a node text whose auxdata is shared) for later documents."""
    if not key or seen.size > _KEPT_SIZE:
        return
    kept = _KEPT.get(key)
    if kept is None:
        if len(_KEPT) >= _KEPT_NAMES:
            _KEPT.clear()
        _KEPT[key] = [seen]
    elif len(kept) < 4:
        kept.append(seen)
    else:
        kept[len(seen.text) % 4] = seen


def _loads_canonical(text: str) -> tuple[list[Node], TreeSpec] | None:
    """:func:`loads_spec` of a document in the canonical form :func:`dumps_nodes` writes.

    A node whose text was read before in the document is not parsed again (one text is one
    value); a new one is parsed strictly (:func:`treeclass._core.json.strict_scanner`).
    Each node is compared with at most a few earlier texts of its name, so work stays
    linear. ``None`` for any other form or anything unusual (an error, a node needing a
    plan): the general path reads and names it.
    """
    if text.__class__ is not str or not text.startswith(_HEAD):  # (a subclass: the general way)
        return None
    scan = strict_scanner()
    try:
        declared, pos = scan(text, len(_HEAD))
    except (ValueError, RecursionError):
        return None
    if declared.__class__ is not int or not text.startswith(_NODES_KEY, pos):
        return None
    pos += len(_NODES_KEY)
    startswith = text.startswith
    find = text.find
    known: dict[str, list[_Seen]] = {}  # by the text of a name: the nodes read with it
    last: _Seen | None = None
    nodes: list[Node] = []
    entries: list[Any] = []
    append = entries.append
    need = 1
    leaves = 0
    hits = misses = 0
    # The last node's start, and the counts there; ``shared``: its auxdata may be shared.
    mark = -1
    mark_nodes = mark_entries = mark_leaves = mark_need = 0
    shared: bool | None = False
    try:
        while True:
            if startswith("null", pos):
                nodes.append(None)
                append(None)
                leaves += 1
                need -= 1
                pos += 4
            else:
                if shared:
                    # Documents repeat themselves (a chain, a list of instances: one node and
                    # the leaves after it, again and again): the text since the last node's
                    # start, if it comes again, each time followed by a node, is read as it
                    # was. Its node and leaves change ``need`` most at its end, so the tree
                    # stays open through ``most`` repeats (the loop goes on past them).
                    seg = text[mark:pos]
                    step = len(seg)
                    change = need - mark_need
                    most = len(text) if change >= 0 else (need - 1) // -change
                    stop = pos + step * most
                    end = pos
                    while end < stop and startswith(seg, end) and startswith("[", end + step):
                        end += step
                    if end > pos:
                        count = (end - pos) // step
                        nodes += nodes[mark_nodes:] * count
                        entries += entries[mark_entries:] * count
                        leaves += (leaves - mark_leaves) * count
                        need += change * count
                        pos = end
                mark, mark_nodes, mark_entries = pos, len(nodes), len(entries)
                mark_leaves, mark_need = leaves, need
                seen = last
                same = None
                key = ""
                # Most nodes so far new: a document of distinct nodes is read without
                # comparing each node with the nodes kept (only with the last one).
                keeping = misses <= 16 or hits >= misses
                if seen is not None and not startswith(seen.text, pos):
                    seen = None
                if seen is None and keeping:
                    end = find('"', pos + 2)  # the name's text ends there (or at a \")
                    if end < 0:
                        return None
                    key = text[pos + 2 : end]
                    same = known.get(key)
                    if same is not None:
                        for s in same:
                            if startswith(s.text, pos):
                                seen = s
                                break
                    else:
                        seen = _known_before(key, text, pos)
                        if seen is not None:
                            known[key] = same = [seen]
                if seen is None:
                    seen = _read_node(scan, text, pos)
                    if seen is None:
                        return None
                    misses += 1
                    last = seen
                    if keeping:
                        if same is None:
                            known[key] = [seen]
                        elif len(same) < 4:
                            same.append(seen)
                        else:
                            same[misses % 4] = seen
                else:
                    hits += 1
                    last = seen
                    shared = seen.shared
                    if shared is None:
                        shared = seen.shared = _shareable(seen.item[1])
                    if not shared and not seen.load():
                        return None
                shared = seen.shared
                if shared is None:
                    shared = seen.shared = _shareable(seen.item[1])
                    if shared and not seen.fresh:
                        _keep(key, seen)
                pos += seen.size
                k = seen.k
                if startswith(_NULL_RUNS[k], pos) if k <= 64 else _null_run(text, pos, k):
                    nodes.append(seen.item)
                    nodes += _LEAF_RUNS[k] if k <= 64 else [None] * k
                    append(seen.leafy)
                    pos += 5 * k
                    leaves += k
                    need -= 1
                else:
                    nodes.append(seen.item)
                    append(seen.entry)
                    need += k - 1
            if not need:
                break
            if text[pos] != ",":
                return None
            pos += 1
    except IndexError:  # the text ended inside the node list
        return None
    if leaves != declared or not startswith(_TAIL, pos) or pos + len(_TAIL) != len(text):
        return None
    return nodes, TreeSpec._make(tuple(entries), leaves)


def _differ(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except RecursionError:  # pragma: no cover - nested about as deep as the parser allows
        return True


def _check_document(doc: Any) -> tuple[list[Node], int, int]:
    """The checked node list of a parsed document, and its census (for ``no_duplicates``)."""
    if doc.__class__ is not dict:
        raise _bad(f"the document must be a JSON object, got {doc.__class__.__name__}.")
    if doc.get("format") != FORMAT_ID:
        raise _bad(f'the document\'s "format" must be {FORMAT_ID!r}.')
    version = doc.get("version")
    if version.__class__ is not int:
        raise _bad(f'"version" must be an integer, got {brief(version, 40)}.')
    if version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        if version > FORMAT_VERSION:
            raise TreespecLoadError(
                f"this treespec was written in format version {_short(version)} by a newer "
                f"treeclass; this release reads format version(s) {readable}. Upgrade "
                "treeclass to load it."
            )
        raise _bad(f"format version {_short(version)} does not exist; versions are {readable}.")
    if frozenset(doc) != _KEYS:
        raise _bad(f"the document's keys must be {sorted(_KEYS)!r}, got {brief(sorted(doc), 200)}.")
    nodes = doc["nodes"]
    leaves = doc["leaves"]
    if nodes.__class__ is not list or not nodes:
        raise _bad('"nodes" must be a non-empty list.')
    if leaves.__class__ is not int:
        raise _bad(f'"leaves" must be an integer, got {brief(leaves, 40)}.')
    # The census of the states: per name, the last state seen and its counts (an equal
    # state has equal counts).
    members = len(doc)
    colons = 0
    seen: dict[str, tuple[Any, int, int]] = {}
    need = 1
    count = 0
    n = len(nodes)
    i = 0
    while i < n:
        if not need:
            raise _bad(f"node {i} is past the end of the tree.")
        item = nodes[i]
        if item is None:
            count += 1
            need -= 1
            i += 1
            continue
        if item.__class__ is not list or len(item) != 3:
            raise _bad(
                f"node {i} must be null (a leaf) or [name, state, arity], got {brief(item, 80)}."
            )
        name, state, k = item
        if name.__class__ is not str:
            raise _bad(f"node {i} has a name that is not a string: {brief(name, 60)}.")
        if k.__class__ is not int or k < 0:
            raise _bad(f"node {i} has an arity that is not a count: {brief(k, 40)}.")
        if k > n - i - 1:
            raise _bad(
                f"node {i} claims {_short(k)} children but only {n - i - 1} nodes follow it; "
                "the document was truncated or edited."
            )
        memo = seen.get(name)
        if memo is None or (state is not memo[0] and _differ(state, memo[0])):
            m, c = census(state)
            memo = seen[name] = (state, m, c + name.count(":"))
        members += memo[1]
        colons += memo[2]
        i += 1
        if k and all_leaves(nodes, i, k):  # skip the leaf children
            count += k
            need -= 1
            i += k
        else:
            need += k - 1
    if need:
        raise _bad(
            f"the node list ends {_short(need)} subtree(s) short of a complete tree; the "
            "document was truncated or edited."
        )
    if count != leaves:
        raise _bad(f'"leaves" says {_short(leaves)} but the node list has {count} leaves.')
    return nodes, members, colons


# --- auxdata as bytes (what jax.export and torch contexts store) ----------------------------------


def aux_to_bytes(node: NodeType, aux: Any) -> bytes:
    """Canonical ASCII JSON of ``node.getstate(aux)``.

    Raises:
        UnserializableStaticError: a static value has no JSON form.
    """
    return dumps_canonical(node.getstate(aux)).encode("ascii")


def state_from_bytes(node: NodeType, data: bytes | str) -> Any:
    """The JSON state in ``data`` (as :func:`aux_to_bytes` writes it), parsed strictly.

    Raises:
        TreespecLoadError: ``data`` is not valid JSON.
    """
    try:
        return loads_strict(data)
    except ValueError as e:
        raise TreespecLoadError(
            f"the saved auxdata of {node.qualname} is not valid JSON: {brief(str(e), 200)}"
        ) from None
