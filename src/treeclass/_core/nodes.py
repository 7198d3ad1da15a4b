"""Node types: how one type of node is taken apart, put back together, named and serialized.

A :class:`NodeType` is the single description of a node type that every part of treeclass
uses: the embedded registry's walkers, the treespec format, the framework adapters. The
built-in containers (``tuple``, ``list``, ``dict``, ``OrderedDict``, ``defaultdict``, ``None``)
are instances like any other; namedtuple classes get one when first seen; registered classes
get one made from their generated code (:func:`class_node`).
"""

from __future__ import annotations

import functools
from _thread import allocate_lock
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from .._errors import (
    TreeclassTypeError,
    TreespecLoadError,
    UnnamedClassError,
    UnserializableStaticError,
    brief,
    qualname,
    superseded_class,
)
from .codegen import Family, Generated, flatten_into_entries, generate
from .fields import ClassInfo, describe
from .keys import GetAttrKey, KeyEntry, field_keys, mapping_keys, sequence_keys
from .names import DEFAULT_DICT, DICT, LIST, NONE, ORDERED_DICT, TUPLE, Origin
from .state import Layout, StateCodec, decode_for, encode_for, make_state_codec
from .statics import BadStatic, check_hash_spread

__all__ = [
    "BUILTIN_NODE_TYPES",
    "LEAF_TYPES",
    "NodeKind",
    "NodeType",
    "any_dropping_node",
    "class_node",
    "dropping_node",
    "namedtuple_node",
    "set_mixed_loop",
]

NodeKind = Literal["builtin", "namedtuple", "dataclass", "attrs"]

#: Types seen to be leaves by the embedded registry's walkers (filled as trees are flattened,
#: emptied of a type when it becomes a node), so that the common case -- a node whose
#: children are all leaves -- is checked with a set lookup per child.
LEAF_TYPES: set[type] = set()


#: The embedded registry's loop over a node's children, ``_mixed`` in the generated fast paths:
#: :func:`treeclass._core.tree._walk`, set by that module (which imports this one) when the
#: package is imported, before any tree can be flattened or class registered.
_mixed_loop: Callable[..., None]


def _loop_into(nt: NodeType) -> Callable[[Any, list[Any], list[Any], int], None]:
    """The fast path of a node type without a generated one: its flatten, then the loop."""

    def flatten_into(obj: Any, leaves: list[Any], entries: list[Any], depth: int) -> None:
        children, aux = nt.flatten(obj)
        _mixed_loop(nt, children, aux, leaves, entries, depth)

    return flatten_into


#: The attributes of a class's node type made with its state codec, on first use.
_CODEC_ATTRIBUTES: Final = frozenset({"codec", "getstate", "load_state"})
_CODEC_LOCK: Final = allocate_lock()


class NodeType:
    """Everything treeclass knows about one type of node.

    Attributes:
        type: the Python type.
        name: the serialized name (built-in names for containers), or ``None``.
        kind: ``"builtin"``, ``"namedtuple"``, ``"dataclass"`` or ``"attrs"``.
        info: the class's description (``None`` for built-in containers).
        return_none_fields: whether ``None``-valued data fields are children in torch's
            pytrees (elsewhere they always are).
        flatten: ``obj -> (children, aux)``.
        unflatten: ``(aux, children) -> obj``.
        child_keys: ``(aux, k) -> ((key,), ...)``: the treeclass key of each of the ``k``
            children of a node with auxdata ``aux``, each in a 1-tuple (what a key path is
            extended by; see :func:`treeclass._core.tree.tree_flatten_with_path`).
        field_keys: what :attr:`child_keys` gives whatever the auxdata, where that is so (a
            class's or namedtuple's fields), else ``None``.
        mixed_seen: see :func:`treeclass._core.tree._shape_fast_path`.
        flatten_into: the embedded registry's fast path, ``(obj, leaves, entries, depth) ->
            None``: flattens ``obj`` into the walker's lists, its node children recursing at
            most ``depth`` levels (``depth >= 0``). A registered class's is generated; any
            other node type's is :attr:`flatten` and the walker's loop.
        getstate: ``aux -> JSON-safe state``.
        load_state: its inverse, ``state -> (aux, plan)`` (see
            :attr:`~treeclass._core.state.StateCodec.load`).
        arity_of: the number of children ``aux`` implies (``None``: any number).
        codec: the class's state codec (``None`` for containers).
        generated: the class's generated source (registered classes), to bind per registry.
        origin: where the class was registered (``None`` until it is).
        superseded: a re-run of the class statement took the name over.
        aliases: earlier serialized names that load as this class (never written).
        dropped, filled: a :func:`dropping_node`'s :attr:`Layout.dropped` and
            :attr:`Layout.filled` (``()`` for any other node type).
    """

    __slots__ = (
        "_make_codec",
        "aliases",
        "arity_of",
        "child_keys",
        "codec",
        "dropped",
        "field_keys",
        "filled",
        "flatten",
        "flatten_into",
        "generated",
        "getstate",
        "info",
        "kind",
        "load_state",
        "mixed_seen",
        "name",
        "origin",
        "pickle_by_name",
        "return_none_fields",
        "show",
        "superseded",
        "type",
        "unflatten",
        "unpickle",
    )

    def __init__(
        self,
        type_: type,
        name: str | None,
        kind: NodeKind,
        *,
        flatten: Callable[[Any], tuple[Sequence[Any], Any]],
        unflatten: Callable[[Any, Sequence[Any]], Any],
        child_keys: Callable[[Any, int], Sequence[tuple[KeyEntry]]],
        getstate: Callable[[Any], Any] | None,
        load_state: Callable[[Any], tuple[Any, tuple[bool, ...] | Layout | None]] | None,
        arity_of: Callable[[Any], int | None],
        show: Callable[[Any, list[str]], str],
        info: ClassInfo | None = None,
        codec: StateCodec | None = None,
        return_none_fields: bool = False,
        generated: Generated | None = None,
        make_codec: Callable[[], StateCodec] | None = None,
    ) -> None:
        self.type = type_
        self.name = name
        self.kind: NodeKind = kind
        self.info = info
        self.return_none_fields = return_none_fields
        self.flatten = flatten
        self.unflatten = unflatten
        self.child_keys = child_keys
        self.field_keys: tuple[tuple[KeyEntry], ...] | None = None
        self.flatten_into: Callable[[Any, list[Any], list[Any], int], None] = _loop_into(self)
        #: Makes the state codec on first use of ``codec``, ``getstate`` or ``load_state``,
        #: which stay unset until then (see ``__getattr__``); ``None``: they are set here.
        self._make_codec = make_codec
        if make_codec is None:
            assert getstate is not None and load_state is not None
            self.getstate: Callable[[Any], Any] = getstate
            self.load_state: Callable[[Any], tuple[Any, tuple[bool, ...] | Layout | None]] = (
                load_state
            )
            self.codec: StateCodec | None = codec
        self.arity_of = arity_of
        #: ``(aux, parts) -> str``: the readable form of one node whose children read
        #: ``parts``, ``Point(x=*, tag='a')``.
        self.show = show
        self.generated = generated
        self.origin: Origin | None = None
        self.superseded = False
        #: Whether instances pickle by the serialized name (see treeclass._pickle).
        self.pickle_by_name = True
        #: What a pickle naming this node's name calls (``fields -> instance``): set by
        #: treeclass._pickle once it accepted the class by name, cleared when that changes.
        self.unpickle: Callable[[Any], Any] | None = None
        self.aliases: tuple[str, ...] = ()
        self.dropped: tuple[str, ...] = ()
        self.filled: tuple[str, ...] = ()
        #: How many mixed nodes (children not all leaves) of the type the embedded registry's
        #: walker saw; at ``_SHAPE_AFTER``, it shapes :attr:`flatten_into` to them.
        self.mixed_seen = 0

    if not TYPE_CHECKING:  # (the attributes it makes are declared in __init__)

        def __getattr__(self, name: str) -> Any:
            """Make the state codec on first use (called only while an attribute is unset).

            Most classes are never serialized, so registering one does not make its codec;
            afterwards the three attributes are plain slots, read at no extra cost.
            """
            if name in _CODEC_ATTRIBUTES:
                make = self._make_codec
                if make is not None:
                    with _CODEC_LOCK:
                        try:  # another thread may have made it meanwhile
                            return object.__getattribute__(self, name)
                        except AttributeError:
                            pass
                        codec = make()
                        self.getstate = codec.getstate
                        self.load_state = codec.load
                        self.codec = codec
                    return object.__getattribute__(self, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def qualname(self) -> str:
        """``module.QualName`` of the type, for messages."""
        return qualname(self.type)

    @property
    def data_fields(self) -> tuple[str, ...]:
        """The names of the children's fields (``()`` for built-in containers)."""
        return () if self.info is None else self.info.data_fields

    @property
    def static_fields(self) -> tuple[str, ...]:
        """The names of the static fields (``()`` unless a registered class has some)."""
        return () if self.info is None else self.info.static_fields

    def require_name(self) -> str:
        """The serialized name; raise :class:`UnnamedClassError` saying how to give one.

        Raises:
            UnnamedClassError: the class has no name, or its definition was re-run since
                (the name belongs to the new class).
        """
        if self.superseded:
            raise superseded_class(self.qualname, self.name, "serializing")
        if self.name is None:
            short = self.type.__qualname__
            if self.kind == "namedtuple":
                raise UnnamedClassError(
                    f"namedtuple {self.qualname} has no registered name, so a structure holding "
                    "it cannot be serialized; give it one with treeclass.register_namedtuple("
                    f'{short}, name="pkg.{short}").'
                )
            raise UnnamedClassError(
                f"{self.qualname} was registered without a name, so it cannot be serialized; "
                f'register it with name="pkg.{short}" (a stable name that does not change when '
                "the module moves)."
            )
        return self.name

    def bind(
        self,
        tag: str,
        key: Callable[[str], Any],
        family: Family | None = None,
        *,
        functions: Collection[str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The generated functions, bound for a framework: see :meth:`Generated.bind`."""
        assert self.generated is not None  # (only registered classes' are bound)
        return self.generated.bind(tag, key=key, family=family, functions=functions, **extra)

    def __repr__(self) -> str:
        return f"<treeclass node type {self.type.__qualname__} name={self.name!r}>"

    def __reduce__(self) -> Any:
        # Specs pickle by name (see treeclass._treespec.format); a NodeType is never pickled alone.
        raise TreeclassTypeError(
            f"a treeclass NodeType ({self.type.__qualname__}) cannot be pickled by itself; "
            "pickle the TreeSpec that holds it."
        )


# --- built-in containers --------------------------------------------------------------------------


def _tuple_flatten(t: tuple[Any, ...]) -> tuple[tuple[Any, ...], None]:
    return t, None


def _seq_keys(aux: None, k: int) -> Sequence[tuple[KeyEntry]]:
    return sequence_keys(k)


def _sorted_keys(d: dict[Any, Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def _dict_flatten(d: dict[Any, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    keys = _sorted_keys(d)
    return list(map(d.__getitem__, keys)), keys


def _odict_flatten(d: OrderedDict[Any, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    return list(d.values()), tuple(d)


def _ddict_flatten(d: defaultdict[Any, Any]) -> tuple[list[Any], tuple[Any, tuple[Any, ...]]]:
    keys = _sorted_keys(d)
    return list(map(d.__getitem__, keys)), (d.default_factory, keys)


def _dict_keys(aux: tuple[Any, ...], k: int) -> Sequence[tuple[KeyEntry]]:
    return mapping_keys(aux)


def _ddict_keys(aux: tuple[Any, tuple[Any, ...]], k: int) -> Sequence[tuple[KeyEntry]]:
    return mapping_keys(aux[1])


def _no_keys(aux: None, k: int) -> tuple[()]:
    return ()


def _none_flatten(_: None) -> tuple[tuple[()], None]:
    return (), None


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


def _no_state(aux: Any) -> None:
    return None


def _keys_state(label: str, keys: Iterable[Any]) -> list[Any]:
    return [k if k.__class__ is str else encode_for(label, f"key {brief(k, 60)}", k) for k in keys]


def _ddict_state(aux: tuple[Any, tuple[Any, ...]]) -> dict[str, Any]:
    factory, keys = aux
    try:
        name = _FACTORY_NAMES[factory]
    except (KeyError, TypeError):
        names = ", ".join(n for n in _FACTORY_NAMES.values() if n)
        raise UnserializableStaticError(
            f"a defaultdict with default_factory={brief(factory, 80)} cannot be serialized; only "
            f"None and the built-in types {names} can be named in a treespec. Convert it to a "
            "dict first."
        ) from None
    return {"factory": name, "keys": _keys_state("a defaultdict", keys)}


def _null_state(name: str) -> Callable[[Any], None]:
    def setstate(state: Any) -> None:
        if state is not None:
            raise TreespecLoadError(f"a {name!r} node has no state (null), got {brief(state, 60)}.")

    return setstate


def _load_keys(name: str, state: Any, *, sorted_order: bool) -> tuple[Any, ...]:
    if state.__class__ is not list:
        raise TreespecLoadError(
            f"the state of a {name!r} node must be the list of its keys, got {brief(state, 60)}."
        )
    keys = tuple(
        k if k.__class__ is str else decode_for(f"a {name!r} node", f"key {i}", k)
        for i, k in enumerate(state)
    )
    try:
        check_hash_spread(keys, f"the keys of a {name!r} node")
    except BadStatic as e:
        if "unhashable" in e.problem:
            raise TreespecLoadError(f"a {name!r} node has an unhashable key.") from None
        raise TreespecLoadError(f"{e.problem}.") from None
    if len(set(keys)) != len(keys):
        raise TreespecLoadError(f"a {name!r} node has the same key twice: {brief(state, 80)}.")
    if sorted_order:
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


def _ddict_setstate(state: Any) -> tuple[Any, tuple[Any, ...]]:
    name = DEFAULT_DICT
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
    return _FACTORIES[factory], _load_keys(name, state["keys"], sorted_order=True)


def _plain(setstate: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, None]]:
    """``load_state`` of a node type whose state never leaves children out."""

    def load_state(state: Any) -> tuple[Any, None]:
        return setstate(state), None

    return load_state


def _any_arity(aux: Any) -> None:
    return None


def _show_tuple(aux: Any, parts: list[str]) -> str:
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _show_list(aux: Any, parts: list[str]) -> str:
    return "[" + ", ".join(parts) + "]"


def _items(keys: Iterable[Any], parts: list[str]) -> str:
    return ", ".join(f"{brief(k, 200)}: {p}" for k, p in zip(keys, parts))


def _show_dict(aux: Any, parts: list[str]) -> str:
    return "{" + _items(aux, parts) + "}"


def _show_odict(aux: Any, parts: list[str]) -> str:
    return f"OrderedDict({{{_items(aux, parts)}}})"


def _show_ddict(aux: Any, parts: list[str]) -> str:
    return f"defaultdict({aux[0]!r}, {{{_items(aux[1], parts)}}})"


def _builtins() -> dict[type, NodeType]:
    partial = functools.partial
    return {
        tuple: NodeType(
            tuple,
            TUPLE,
            "builtin",
            flatten=_tuple_flatten,
            unflatten=lambda aux, children: tuple(children),
            child_keys=_seq_keys,
            getstate=_no_state,
            load_state=_plain(_null_state(TUPLE)),
            arity_of=_any_arity,
            show=_show_tuple,
        ),
        list: NodeType(
            list,
            LIST,
            "builtin",
            flatten=lambda t: (t, None),
            unflatten=lambda aux, children: list(children),
            child_keys=_seq_keys,
            getstate=_no_state,
            load_state=_plain(_null_state(LIST)),
            arity_of=_any_arity,
            show=_show_list,
        ),
        dict: NodeType(
            dict,
            DICT,
            "builtin",
            flatten=_dict_flatten,
            unflatten=lambda aux, children: dict(zip(aux, children)),
            child_keys=_dict_keys,
            getstate=partial(_keys_state, "a dict"),
            load_state=_plain(partial(_load_keys, DICT, sorted_order=True)),
            arity_of=len,
            show=_show_dict,
        ),
        OrderedDict: NodeType(
            OrderedDict,
            ORDERED_DICT,
            "builtin",
            flatten=_odict_flatten,
            unflatten=lambda aux, children: OrderedDict(zip(aux, children)),
            child_keys=_dict_keys,
            getstate=partial(_keys_state, "an OrderedDict"),
            load_state=_plain(partial(_load_keys, ORDERED_DICT, sorted_order=False)),
            arity_of=len,
            show=_show_odict,
        ),
        defaultdict: NodeType(
            defaultdict,
            DEFAULT_DICT,
            "builtin",
            flatten=_ddict_flatten,
            unflatten=lambda aux, children: defaultdict(aux[0], zip(aux[1], children)),
            child_keys=_ddict_keys,
            getstate=_ddict_state,
            load_state=_plain(_ddict_setstate),
            arity_of=lambda aux: len(aux[1]),
            show=_show_ddict,
        ),
        type(None): NodeType(
            type(None),
            NONE,
            "builtin",
            flatten=_none_flatten,
            unflatten=lambda aux, children: None,
            child_keys=_no_keys,
            getstate=_no_state,
            load_state=_plain(_null_state(NONE)),
            arity_of=lambda aux: 0,
            show=lambda aux, parts: "None",
        ),
    }


#: The built-in container node types, by type.
BUILTIN_NODE_TYPES: Final[dict[type, NodeType]] = _builtins()


# --- namedtuples and registered classes -----------------------------------------------------------


def _show_fields(label: str, fields: Sequence[str], parts: list[str]) -> str:
    return f"{label}(" + ", ".join(f"{f}={p}" for f, p in zip(fields, parts)) + ")"


def namedtuple_node(cls: type) -> NodeType:
    """The node type of a namedtuple class (every namedtuple is a node, named or not)."""
    info = describe(cls)
    new: Callable[[type, Iterable[Any]], Any] = getattr(tuple, "__new__")  # noqa: B009
    fields = info.data_fields
    keys = field_keys(fields)
    n_fields = len(fields)
    label = cls.__name__

    def unflatten(aux: None, children: Iterable[Any]) -> Any:
        return new(cls, children)

    def child_keys(aux: None, k: int) -> tuple[tuple[KeyEntry], ...]:
        return keys

    unflatten.__qualname__ = f"{cls.__qualname__}.<treeclass unflatten>"
    codec = make_state_codec(info)
    node = NodeType(
        cls,
        None,
        "namedtuple",
        flatten=_tuple_flatten,
        unflatten=unflatten,
        child_keys=child_keys,
        getstate=codec.getstate,
        load_state=codec.load,
        arity_of=lambda aux: n_fields,
        show=lambda aux, parts: _show_fields(label, fields, parts),
        info=info,
        codec=codec,
    )
    node.field_keys = keys
    return node


#: The generated functions the embedded registry binds.
_EMBEDDED: Final = ("flatten", "unflatten", "flatten_into")


def class_node(info: ClassInfo, name: str | None, return_none_fields: bool) -> NodeType:
    """The node type of a dataclass or attrs class, with its generated functions.

    Its source is compiled once (see :mod:`treeclass._core.codegen`); the embedded registry's
    functions are bound here, the frameworks' by their adapters with :meth:`NodeType.bind`.
    """
    generated = generate(info)
    n_data = len(info.data_fields)
    label = info.cls.__name__
    fields = info.fields
    keys = field_keys(info.data_fields)

    def child_keys(aux: Any, k: int) -> tuple[tuple[KeyEntry], ...]:
        return keys

    def show(aux: Any, parts: list[str]) -> str:
        children = iter(parts)
        statics = iter(aux)
        shown = [
            f"{f.name}={brief(next(statics), 200) if f.static else next(children, '?')}"
            for f in fields
        ]
        return f"{label}(" + ", ".join(shown) + ")"

    node = NodeType(
        info.cls,
        name,
        info.kind,
        flatten=_placeholder,
        unflatten=_placeholder,
        child_keys=child_keys,
        getstate=None,  # the state codec is made on first use (making it checks nothing)
        load_state=None,
        arity_of=_fixed_arity(n_data),
        show=show,
        info=info,
        return_none_fields=return_none_fields,
        generated=generated,
        make_codec=functools.partial(make_state_codec, info, name),
    )
    functions = generated.bind(
        "",
        key=GetAttrKey,
        functions=_EMBEDDED,
        in_class_globals=True,
        _nt=node,
        _entries=flatten_into_entries(node, n_data),
        _leaf_types=LEAF_TYPES,
        _mixed=_mixed_loop,
    )
    node.flatten = functions["flatten"]
    node.unflatten = functions["unflatten"]
    node.flatten_into = functions["flatten_into"]
    node.field_keys = keys
    return node


def _fixed_arity(n: int) -> Callable[[Any], int]:
    """``aux -> n``: one function per ``n``, shared by every class with ``n`` data fields."""
    known = _ARITIES.get(n)
    if known is None:

        def arity(aux: Any) -> int:
            return n

        known = _ARITIES.setdefault(n, arity)
    return known


_ARITIES: dict[int, Callable[[Any], int]] = {}


def _placeholder(*args: Any) -> Any:  # pragma: no cover - replaced before use
    raise TypeError("not bound yet")


def set_mixed_loop(loop: Callable[..., None]) -> None:
    """Set the walker's loop that the generated fast paths of classes registered later call."""
    global _mixed_loop
    _mixed_loop = loop


#: Node types made by :func:`dropping_node`, by class node, children's names and filled fields.
_DROPPING: dict[tuple[NodeType, tuple[str, ...], tuple[int, ...]], NodeType] = {}


def any_dropping_node() -> bool:
    """Whether :func:`dropping_node` ever made a node type (else no spec holds one)."""
    return bool(_DROPPING)


def dropping_node(base: NodeType, layout: Layout) -> NodeType:
    """The node type of ``base``'s nodes loaded as ``layout`` says (see :class:`Layout`).

    Written back as the document had it. Only loaded specs hold it (flattening an object
    gives ``base``); one per class and layout, so specs loaded from one document are equal.
    """
    key = (base, layout.names, layout.fills)
    nt = _DROPPING.get(key)
    if nt is not None:
        return nt
    assert base.info is not None  # only classes have removed fields
    targets = layout.targets
    names = list(layout.names)
    n_data = len(base.info.data_fields)
    n_children = len(targets)
    data_fields = base.info.data_fields
    fills = tuple((t, base.info.field(data_fields[t])) for t in layout.fills)
    base_unflatten = base.unflatten
    base_getstate = base.getstate
    base_show = base.show

    def unflatten(aux: Any, children: Sequence[Any]) -> Any:
        fields: list[Any] = [None] * n_data
        for child, t in zip(children, targets):
            if t >= 0:
                fields[t] = child
        for t, f in fills:
            fields[t] = f.make_default()
        return base_unflatten(aux, fields)

    def getstate(aux: Any) -> Any:
        base.require_name()  # a superseded class is refused, as for its own nodes
        state = base_getstate(aux)
        state["data"] = list(names)
        return state

    def show(aux: Any, parts: list[str]) -> str:
        fields = ["?"] * n_data
        gone: list[str] = []
        for part, t, n in zip(parts, targets, names):
            if t >= 0:
                fields[t] = part
            else:
                gone.append(f"{n}={part}")
        for t, _ in fills:
            fields[t] = "<default>"
        text = base_show(aux, fields)
        return f"{text[:-1]}, <removed: {', '.join(gone)}>)" if gone else text

    nt = NodeType(
        base.type,
        base.name,
        base.kind,
        flatten=base.flatten,
        unflatten=unflatten,
        child_keys=base.child_keys,
        getstate=getstate,
        load_state=base.load_state,
        arity_of=lambda aux: n_children,
        show=show,
        info=base.info,
        codec=base.codec,
        return_none_fields=base.return_none_fields,
    )
    nt.origin = base.origin
    nt.dropped = layout.dropped
    nt.filled = layout.filled
    return _DROPPING.setdefault(key, nt)
