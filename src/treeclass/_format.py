"""Treespec JSON: a versioned, framework-neutral document, and safe loading.

A document (see ``docs/format.md`` and the JSON Schema ``treespec.schema.json`` shipped with
the package) is one canonical, compact JSON object::

    {"format":"treeclass.treespec","leaves":3,"nodes":[...],"version":1}

``nodes`` is the tree in pre-order as a *flat* list, so the document's nesting does not grow
with the tree's depth: ``null`` is a leaf, ``[name, state, arity]`` a node with ``arity``
children (the next subtrees in the list). ``name`` is a registered name or a built-in one
(``"tuple"``, ``"list"``, ``"dict"``, ``"collections.OrderedDict"``,
``"collections.defaultdict"``, ``"None"``); ``state`` is the node's auxdata as JSON.

Everything goes through a framework-neutral node list -- the same list, ``None`` for a leaf
and a ``(name, state, arity)`` sequence for a node -- so the document can be turned into (and
made from) the structures of JAX, PyTorch or optree as well as the embedded registry's
:class:`~treeclass.TreeSpec`:

- :func:`loads_nodes` / :func:`dumps_nodes`: document text <-> node list (no name lookups);
- :func:`nodes_to_spec` / :func:`spec_to_nodes`: node list <-> embedded ``TreeSpec``.

Loading never imports a module, looks anything up by module path, or calls anything that was
not registered; every bad input is a :class:`~treeclass.TreespecLoadError` (a ``ValueError``).
"""

from __future__ import annotations

from ._auxdata import brief, decode_for, dumps_canonical, encode_for, loads_json
from ._errors import (
    TreeclassTypeError,
    TreespecLoadError,
    UnnamedClassError,
    UnregisteredNameError,
)
from ._tree import BUILTIN_NAMES, BUILTIN_NODE_TYPES, NodeType, TreeSpec

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final, TypeAlias

    #: One entry of the framework-neutral node list: ``None`` (a leaf) or ``(name, state,
    #: arity)`` (a tuple when made here, a JSON list when read from a document).
    Node: TypeAlias = "Sequence[Any] | None"

__all__ = [
    "FORMAT_ID",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "dumps_nodes",
    "loads_nodes",
    "nodes_to_spec",
    "spec_to_nodes",
    "treespec_dumps",
    "treespec_loads",
]

#: The version of the treespec document this release writes.
FORMAT_VERSION: Final = 1
#: The versions this release reads.
READABLE_VERSIONS: Final = (1,)
#: The value of the ``"format"`` key of every document.
FORMAT_ID: Final = "treeclass.treespec"
_KEYS: Final[frozenset[str]] = frozenset(("format", "version", "leaves", "nodes"))

# defaultdict factories that have a fixed name (anything else cannot be serialized).
_FACTORY_NAMES: Final[dict[Any, str | None]] = {
    None: None,
    list: "list",
    dict: "dict",
    set: "set",
    frozenset: "frozenset",
    tuple: "tuple",
    int: "int",
    float: "float",
    str: "str",
    bytes: "bytes",
    bool: "bool",
}
_FACTORIES: Final[dict[str | None, Any]] = {v: k for k, v in _FACTORY_NAMES.items()}


# --- built-in node states -------------------------------------------------------------------


def _no_state(aux: Any) -> None:
    return None


def _keys_state(label: str, keys: tuple[Any, ...]) -> list[Any]:
    return [k if k.__class__ is str else encode_for(label, f"key {k!r}", k) for k in keys]


def _dict_state(aux: tuple[Any, ...]) -> list[Any]:
    return _keys_state("a dict", aux)


def _odict_state(aux: tuple[Any, ...]) -> list[Any]:
    return _keys_state("an OrderedDict", aux)


def _ddict_state(aux: tuple[Any, tuple[Any, ...]]) -> dict[str, Any]:
    factory, keys = aux
    try:
        name = _FACTORY_NAMES[factory]
    except (KeyError, TypeError):
        raise _unserializable_factory(factory) from None
    return {"factory": name, "keys": _keys_state("a defaultdict", keys)}


def _unserializable_factory(factory: Any) -> Exception:
    from ._errors import UnserializableStaticError

    names = ", ".join(n for n in _FACTORY_NAMES.values() if n)
    return UnserializableStaticError(
        f"a defaultdict with default_factory={brief(factory, 80)} cannot be serialized; only "
        f"None and the built-in types {names} can be named in a treespec. Convert it to a "
        "dict first."
    )


def _load_none(name: str, state: Any) -> None:
    if state is not None:
        raise TreespecLoadError(f"a {name!r} node has no state (null), got {brief(state, 60)}.")


def _load_keys(name: str, state: Any, *, sort_check: bool) -> tuple[Any, ...]:
    if state.__class__ is not list:
        raise TreespecLoadError(
            f"the state of a {name!r} node must be the list of its keys, got {brief(state, 60)}."
        )
    keys = tuple(
        k if k.__class__ is str else decode_for(f"a {name!r} node", f"key {i}", k)
        for i, k in enumerate(state)
    )
    try:
        distinct = len(set(keys)) == len(keys)
    except TypeError:
        raise TreespecLoadError(f"a {name!r} node has an unhashable key.") from None
    if not distinct:
        raise TreespecLoadError(f"a {name!r} node has the same key twice: {brief(state, 80)}.")
    if sort_check:
        try:
            in_order = sorted(keys)
        except TypeError:
            pass  # keys that cannot be sorted keep their order, as in tree_flatten
        else:
            if list(keys) != in_order:
                raise TreespecLoadError(
                    f"the keys of a {name!r} node must be in sorted order (as tree_flatten "
                    f"writes them), got {brief(state, 80)}."
                )
    return keys


def _setstate_tuple(state: Any) -> None:
    _load_none("tuple", state)


def _setstate_list(state: Any) -> None:
    _load_none("list", state)


def _setstate_none(state: Any) -> None:
    _load_none("None", state)


def _setstate_dict(state: Any) -> tuple[Any, ...]:
    return _load_keys("dict", state, sort_check=True)


def _setstate_odict(state: Any) -> tuple[Any, ...]:
    return _load_keys("collections.OrderedDict", state, sort_check=False)


def _setstate_ddict(state: Any) -> tuple[Any, tuple[Any, ...]]:
    name = "collections.defaultdict"
    if state.__class__ is not dict or set(state) != {"factory", "keys"}:
        raise TreespecLoadError(
            f'the state of a {name!r} node must be {{"factory": ..., "keys": [...]}}, got '
            f"{brief(state, 60)}."
        )
    factory = state["factory"]
    if (factory is not None and factory.__class__ is not str) or factory not in _FACTORIES:
        raise TreespecLoadError(
            f"the default_factory {brief(factory, 40)} of a {name!r} node is not one of "
            f"{sorted(n for n in _FACTORIES if n)!r} or null."
        )
    return _FACTORIES[factory], _load_keys(name, state["keys"], sort_check=True)


def _arity_any(aux: Any) -> int | None:
    return None


def _arity_zero(aux: Any) -> int:
    return 0


def _arity_keys(aux: tuple[Any, ...]) -> int:
    return len(aux)


def _arity_ddict(aux: tuple[Any, tuple[Any, ...]]) -> int:
    return len(aux[1])


# name -> (getstate, setstate, arity_of(aux))
_BUILTIN_CODECS: Final[dict[str, tuple[Any, Any, Any]]] = {
    "tuple": (_no_state, _setstate_tuple, _arity_any),
    "list": (_no_state, _setstate_list, _arity_any),
    "None": (_no_state, _setstate_none, _arity_zero),
    "dict": (_dict_state, _setstate_dict, _arity_keys),
    "collections.OrderedDict": (_odict_state, _setstate_odict, _arity_keys),
    "collections.defaultdict": (_ddict_state, _setstate_ddict, _arity_ddict),
}


# --- spec <-> node list -----------------------------------------------------------------------


def _dumper(nt: NodeType) -> tuple[str, Callable[[Any], Any]]:
    """``(name, getstate)`` for one node type of a spec being dumped."""
    builtin = BUILTIN_NAMES.get(nt.type)
    if builtin is not None and BUILTIN_NODE_TYPES.get(builtin) is nt:
        return builtin, _BUILTIN_CODECS[builtin][0]
    from ._registry import node_for_class

    node = node_for_class(nt.type)
    cls = nt.type
    if node is None:  # a namedtuple that was never given a name
        raise UnnamedClassError(
            f"namedtuple {cls.__module__}.{cls.__qualname__} has no registered name, so a "
            "treespec holding it cannot be serialized; give it one with "
            f'treeclass.register_namedtuple({cls.__qualname__}, name="pkg.{cls.__qualname__}").'
        )
    return node.require_name(), node.getstate


def spec_to_nodes(spec: TreeSpec) -> list[Node]:
    """The framework-neutral node list of ``spec``, in pre-order.

    ``None`` stands for a leaf, ``(name, state, arity)`` for a node.

    Raises:
        UnnamedClassError: a node's class (or namedtuple) has no registered name.
        UnserializableStaticError: a static value has no JSON form.
    """
    cache: dict[NodeType, tuple[str, Callable[[Any], Any]]] = {}
    out: list[Node] = []
    append = out.append
    for e in spec._entries:
        if e is None:
            append(None)
            continue
        nt, aux, k, leafy = e
        h = cache.get(nt)
        if h is None:
            h = cache[nt] = _dumper(nt)
        append((h[0], h[1](aux), k))
        if leafy and k:
            out.extend([None] * k)
    return out


def _loader(name: str) -> tuple[NodeType, Callable[[Any], Any], Callable[[Any], int | None]]:
    """``(node_type, setstate, arity_of)`` for a name read from a document."""
    codec = _BUILTIN_CODECS.get(name)
    if codec is not None:
        return BUILTIN_NODE_TYPES[name], codec[1], codec[2]
    from ._registry import node_for_name

    node = node_for_name(name)
    if node is None:
        raise UnregisteredNameError(
            f"the treespec names {brief(name, 300)}, which is not registered in this process; "
            "import the module that defines the class (and registers it with this name) before "
            "loading. Loading never imports anything by itself."
        )
    if node.kind == "namedtuple":
        n_fields = len(node.info.data_fields)

        def arity_of(aux: Any) -> int:
            return n_fields

    else:
        n_data = len(node.info.data_fields)

        def arity_of(aux: Any) -> int:
            return n_data - len(aux[0])

    return node.node_type, node.setstate, arity_of


def nodes_to_spec(nodes: Sequence[Node]) -> TreeSpec:
    """Build the embedded registry's :class:`~treeclass.TreeSpec` from a node list.

    Names are resolved among the built-in and registered names only; states go through each
    class's generated setstate; the list must hold exactly one complete tree.

    Raises:
        TreespecLoadError: the list is not one tree, an arity or a state is wrong.
        UnregisteredNameError: a name is not registered in this process.
    """
    cache: dict[str, tuple[NodeType, Callable[[Any], Any], Callable[[Any], int | None]]] = {}
    entries: list[Any] = []
    append = entries.append
    n = len(nodes)
    need = 1
    leaves = 0
    i = 0
    while i < n:
        item = nodes[i]
        if not need:
            raise TreespecLoadError(
                f"node {i} is past the end of the tree (the tree ends at node {i - 1}); "
                "the document was edited or joined with another one."
            )
        if item is None:
            append(None)
            leaves += 1
            need -= 1
            i += 1
            continue
        name, state, k = item
        h = cache.get(name)
        if h is None:
            h = cache[name] = _loader(name)
        nt, setstate, arity_of = h
        try:
            aux = setstate(state)
        except TreespecLoadError as e:
            raise type(e)(f"node {i} ({brief(name, 100)}): {e}") from None
        expect = arity_of(aux)
        if expect is not None and expect != k:
            raise TreespecLoadError(
                f"node {i} ({brief(name, 100)}) has {k} children but its state gives it {expect}."
            )
        need += k - 1
        # Canonical form (as tree_flatten makes it): a node whose children are all leaves
        # holds them itself; they get no entries of their own.
        leafy = nodes[i + 1 : i + 1 + k].count(None) == k
        append((nt, aux, k, leafy))
        if leafy:
            leaves += k
            need -= k
            i += 1 + k
        else:
            i += 1
    if need:
        raise TreespecLoadError(
            f"the node list ends {_short(need)} subtree(s) short of a complete tree; the document "
            "was truncated or edited."
        )
    return TreeSpec._make(tuple(entries), leaves)


# --- document <-> node list -------------------------------------------------------------------


def dumps_nodes(nodes: Sequence[Node]) -> str:
    """The canonical document text of a node list (whatever registry it was made from)."""
    return dumps_canonical(
        {
            "format": FORMAT_ID,
            "leaves": nodes.count(None),
            "nodes": nodes,
            "version": FORMAT_VERSION,
        }
    )


def _short(n: int) -> str:
    text = str(n)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def _bad(message: str) -> TreespecLoadError:
    return TreespecLoadError(f"not a loadable treeclass treespec: {message}")


def loads_nodes(text: str | bytes | bytearray) -> list[Node]:
    """Parse and check a document; return its node list (names are not looked up here).

    The result is the document's own ``nodes`` list: ``None`` for a leaf, a JSON list
    ``[name, state, arity]`` for a node, checked to hold exactly one complete tree.

    Raises:
        TreespecLoadError: the text is not such a document (any problem at all).
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise TreespecLoadError(
            f"treespec_loads() takes the document as str or bytes, got {type(text).__name__}."
        )
    try:
        doc = loads_json(text)
    except (ValueError, RecursionError) as e:
        reason = "it nests too deeply" if isinstance(e, RecursionError) else str(e)
        raise _bad(f"the text is not valid JSON ({reason:.200}).") from None
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
        raise _bad(f"the document's keys must be {sorted(_KEYS)!r}, got {sorted(doc)!r:.200}.")
    nodes = doc["nodes"]
    leaves = doc["leaves"]
    if nodes.__class__ is not list or not nodes:
        raise _bad('"nodes" must be a non-empty list.')
    if leaves.__class__ is not int:
        raise _bad(f'"leaves" must be an integer, got {brief(leaves, 40)}.')
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
        name, _state, k = item
        if name.__class__ is not str:
            raise _bad(f"node {i} has a name that is not a string: {brief(name, 60)}.")
        if k.__class__ is not int or k < 0:
            raise _bad(f"node {i} has an arity that is not a count: {brief(k, 40)}.")
        i += 1
        if k and nodes[i : i + k].count(None) == k:  # all children are leaves: skip them
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
    return nodes


# --- public API -------------------------------------------------------------------------------


def treespec_dumps(spec: object) -> str:
    """Serialize ``spec`` to canonical, compact JSON text (named nodes, no module paths).

    Nodes are named by their registered names (built-in containers by fixed names), and
    static values by their JSON forms (see ``docs/format.md``); the same spec always gives the
    same text. The document is flat, so trees of any depth round-trip.

    ``spec`` may also be a JAX ``PyTreeDef``, a torch ``TreeSpec`` (``torch.utils._pytree``)
    or an optree ``PyTreeSpec`` (``torch.utils._cxx_pytree``'s too) made of built-in
    containers and treeclass-registered classes: the same structure gives the same document
    in every framework. A torch ``None`` is a leaf there, and so in the document; a torch
    dict must have its keys in sorted order (see ``docs/parity.md``).

    Args:
        spec: a :class:`~treeclass.TreeSpec` from :func:`~treeclass.tree_flatten` and friends,
            or a JAX, torch or optree structure.

    Returns:
        The JSON document, an ASCII ``str``.

    Raises:
        UnnamedClassError: a class, or a namedtuple, in the tree has no registered name.
        UnserializableStaticError: a static value has no JSON form (the message names the
            class, the field and the fix).
        StructureMismatchError: a torch dict's keys are not in sorted order.
        TypeError: ``spec`` is not a structure object treeclass knows.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure({"a": (1, 2), "b": None})
        >>> tc.treespec_dumps(spec)
        '{"format":"treeclass.treespec","leaves":2,"nodes":[["dict",["a","b"],2],["tuple",null,2],null,null,["None",null,0]],"version":1}'
        >>> import jax  # doctest: +SKIP
        >>> treedef = jax.tree_util.tree_structure({"a": (1, 2), "b": None})  # doctest: +SKIP
        >>> tc.treespec_dumps(treedef) == tc.treespec_dumps(spec)  # doctest: +SKIP
        True

    .. versionadded:: 0.1.0
    """
    if isinstance(spec, TreeSpec):
        return dumps_nodes(spec_to_nodes(spec))
    from ._convert import nodes_from_framework

    nodes = nodes_from_framework(spec)
    if nodes is None:
        raise TreeclassTypeError(
            f"treespec_dumps() takes a treeclass TreeSpec, got {type(spec).__name__}; get one "
            "from tree_flatten() or tree_structure() (a JAX PyTreeDef, a torch TreeSpec or an "
            "optree PyTreeSpec is accepted too)."
        )
    return dumps_nodes(nodes)


if TYPE_CHECKING:
    from typing import Literal, overload
else:

    def overload(f: Any) -> Any:
        return f


@overload
def treespec_loads(text: str | bytes, *, to: None = None) -> TreeSpec: ...
@overload
def treespec_loads(text: str | bytes, *, to: Literal["jax", "torch", "optree"]) -> Any: ...  # noqa: F811
def treespec_loads(  # noqa: F811
    text: str | bytes, *, to: Literal["jax", "torch", "optree"] | None = None
) -> Any:
    """Load a :class:`~treeclass.TreeSpec` from :func:`treespec_dumps` text, safely.

    Loading never imports a module or calls anything that was not registered: every node
    name must be registered in this process (import the modules that define the classes
    first). A document written before a class gained a field still loads if the new field
    is static with a default, or a data field whose default is ``None``.

    With ``to="jax"``, ``"torch"`` or ``"optree"`` the result is that framework's structure
    instead (a ``jax.tree_util.PyTreeDef``, a ``torch.utils._pytree.TreeSpec``, an optree
    ``PyTreeSpec`` of the global namespace): a structure flattened in one framework and
    saved unflattens the same leaves in another. That framework is imported then, and only
    then.

    Args:
        text: the JSON document, as ``str`` or UTF-8 ``bytes``.
        to: ``None`` (a treeclass ``TreeSpec``), ``"jax"``, ``"torch"`` or ``"optree"``.

    Returns:
        The spec; it equals the spec it was dumped from.

    Raises:
        UnregisteredNameError: a node or static type name is not registered here.
        TreespecLoadError: anything else wrong with the input (not JSON, a newer format
            version, wrong shapes or types, a truncated or edited document, a state that no
            longer fits its class); an unknown ``to``; ``to="torch"`` for a tree with a
            ``None`` node (a leaf in torch). Both are ``ValueError`` subclasses.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure([1, (2, 3)])
        >>> tc.treespec_loads(tc.treespec_dumps(spec)) == spec
        True
        >>> tc.treespec_loads(tc.treespec_dumps(spec), to="jax")  # doctest: +SKIP
        PyTreeDef([*, (*, *)])

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.0 ``to=`` (JAX, torch and optree structures).
    """
    spec = nodes_to_spec(loads_nodes(text))
    if to is None:
        return spec
    from ._convert import spec_to_framework

    return spec_to_framework(spec, to)


# Public (and pickled) under the package name, where users find them.
treespec_dumps.__module__ = "treeclass"
treespec_loads.__module__ = "treeclass"
