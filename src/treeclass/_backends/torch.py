"""PyTorch adapter: treeclass nodes in ``torch.utils._pytree`` and its C++ twin.

Every class is registered with torch's Python pytree under its treeclass name as
``serialized_type_name``, with exact dumpable contexts and ``GetAttrKey`` paths; torch mirrors
it into its C++ pytree. The registry decides names and refusals; this adapter reports what
torch holds, adds the class, moves names and undoes all of it on request. An unnamed class (or
the earlier definition of a re-run one) gets torch's ``NO_SERIALIZED_TYPE_NAME_FOUND``
(``docs/torch.md``). torch's ``None`` is a leaf, so with ``return_none_fields=False`` a class's
``None`` fields are named in its context instead: that "None form" lives here alone
(:func:`_none_form`). Private torch state is reached only by the accessors below, listed in
``docs/contributing.md``.
"""

from __future__ import annotations

import collections
import importlib
import operator
import re
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple, cast

import torch.utils._pytree as pytree

from .._core.codegen import (
    INDENT,
    Family,
    first_call,
    flatten_lines,
    join_blocks,
    set_tracing_check,
    tuple_display,
    unflatten_blocks,
    unpack_lines,
)
from .._core.fields import ClassInfo, is_namedtuple_class
from .._core.json import SCALAR_TYPES, dumps_canonical
from .._core.nodes import NodeType
from .._core.registry import Change, Held, Undo, registered_node
from .._core.state import Layout, fixed_children_error
from .._core.tree import TreeSpec
from .._errors import (
    RegistrationError,
    TreespecLoadError,
    brief,
    install_hint,
)
from .._pickle import rebuild_registered
from .._treespec.convert import LEAF, leaf_count_error, nodes_of, skeleton
from .._treespec.format import Node, state_from_bytes
from .activation import complete

__all__ = [
    "BACKEND",
    "CHECKED_TORCH_VERSION",
    "MIN_TORCH_VERSION",
    "TorchBackend",
    "allow_pickled_instances",
    "nodes_from_spec",
    "spec_from_spec",
]

#: The torch release whose private pytree state this module was checked against.
CHECKED_TORCH_VERSION: Final = "2.13.0"

_NAMESPACE: Final = "torch"  # optree namespace of torch.utils._cxx_pytree
_NAMEDTUPLE: Final = collections.namedtuple  # torch's node type for every namedtuple


# --- private torch state: one accessor per fact (docs/contributing.md) ---------------------


#: The oldest torch release treeclass supports (the floor of the ``torch`` extra): the oldest
#: whose whole torch suite passes (CI's ``torch_floor`` job runs it there). Checked on 2.7.0,
#: 2.8.0, 2.9.0, 2.10.0, 2.11.0 and 2.12.0: Dynamo refuses to trace the generated unflatten of
#: every kind of class (``object.__new__``, and a class's first call, which Dynamo runs as a
#: constant, takes arguments that are not constants); 2.7 also lacks
#: ``torch.float4_e2m1fn_x2``, ``torch.export.pt2_archive`` and ``treespec_leaf``.
MIN_TORCH_VERSION: Final = "2.13"

_PRIVATE_STATE: Final = (
    "_NODE_REGISTRY_LOCK",
    "SUPPORTED_NODES",
    "SUPPORTED_SERIALIZED_TYPES",
    "SERIALIZED_TYPE_TO_PYTHON_TYPE",
    "NO_SERIALIZED_TYPE_NAME_FOUND",
    "CONSTANT_NODES",
    "_cxx_pytree_pending_imports",
    "_register_namedtuple",
    "_SerializeNodeDef",
    "NodeDef",
)


def _release(version: str) -> tuple[int, ...] | None:
    """The release numbers of a torch version (``"2.13.0+cpu"`` -> ``(2, 13, 0)``), or ``None``."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        return None
    return tuple(int(part) for part in match.groups(default="0"))


def _check_torch_version() -> None:
    """Raise :class:`RegistrationError` on a torch below the floor or lacking a name read here."""
    import sys

    version = str(getattr(sys.modules.get("torch"), "__version__", "of unknown version"))
    release = _release(version)
    floor = _release(MIN_TORCH_VERSION)
    if release is not None and floor is not None and release < floor:
        raise RegistrationError(
            f"treeclass's torch backend needs torch>={MIN_TORCH_VERSION}, but torch {version} is "
            f"installed, whose torch.compile and torch.export cannot trace treeclass classes; "
            f"upgrade torch, e.g. with {install_hint('torch')}."
        )
    missing = [name for name in _PRIVATE_STATE if not hasattr(pytree, name)]
    if missing:
        raise RegistrationError(
            f"treeclass's torch backend needs torch>={MIN_TORCH_VERSION}, but torch {version} is "
            f"installed, whose torch.utils._pytree lacks {', '.join(missing)}; upgrade torch, "
            f"e.g. with {install_hint('torch')}."
        )


_check_torch_version()


def _registry_lock() -> Any:
    """The lock around torch's Python registry."""
    return pytree._NODE_REGISTRY_LOCK


def _class_for_serialized_name(name: str) -> type | None:
    """The class torch loads ``name`` as, or ``None``."""
    return pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)


def class_for_serialized_name(name: str) -> type | None:
    """The class registered under the serialized name ``name``, or ``None``.

    Never for torch's "no name" marker, which every class registered without a name shares.
    """
    if name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
        return None
    return _class_for_serialized_name(name)


def serialization_of(cls: type) -> Any:
    """Torch's serialization entry of ``cls`` (a ``_SerializeNodeDef``), or ``None``."""
    return pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)


def _load_name_as(name: str, cls: type | None) -> None:
    """Make torch load ``name`` as ``cls`` (``None``: as nothing); torch has no public alias.

    Loading (namedtuples included) looks names up in ``SERIALIZED_TYPE_TO_PYTHON_TYPE``;
    writing uses the class's own entry, so an alias is never written.
    """
    with _registry_lock():
        if cls is None:
            pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(name, None)
        else:
            pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls


def _unname(cls: type, name: str) -> None:
    """Stop torch writing ``cls`` as ``name``: it gets torch's own "no name" marker.

    Its node stays (objects of an earlier definition still flatten). A namedtuple, whose name
    torch writes without asking for a context, becomes torch's generic namedtuple node again.
    """
    with _registry_lock():
        serialize = serialization_of(cls)
        if serialize is None or serialize.serialized_type_name != name:
            return
        if is_namedtuple_class(cls):
            _remove(cls)
            return
        refuse = _refuse(cls)
        pytree.SUPPORTED_SERIALIZED_TYPES[cls] = serialize._replace(
            serialized_type_name=pytree.NO_SERIALIZED_TYPE_NAME_FOUND,
            to_dumpable_context=refuse,
            from_dumpable_context=refuse,
        )


def _cxx_node(cls: type) -> Any:
    """The optree entry of ``cls`` in the ``"torch"`` namespace (not the global fallback)."""
    optree: Any = complete("optree")  # torch's C++ pytree is built on it
    if optree is None:
        return None  # not imported (yet): nothing can be registered there
    entry = optree.register_pytree_node.get(cls, namespace=_NAMESPACE)
    if entry is None or getattr(entry, "namespace", None) != _NAMESPACE:
        return None
    return entry


def _opaque_check() -> Callable[[type], bool]:
    """Whether torch treats a class as an opaque leaf type (``torch._library.opaque_object``)."""
    try:
        from torch._library.opaque_object import is_opaque_type
    except ImportError:  # pragma: no cover - older or newer torch
        return lambda cls: False
    return is_opaque_type


_is_opaque: Final = _opaque_check()


class _Held(NamedTuple):
    """Everything torch's two registries hold about one class, to put it back later."""

    cls: type
    node: Any  # pytree.NodeDef | None
    serialize: Any  # pytree._SerializeNodeDef | None
    constant: bool
    cxx: Any  # optree PyTreeNodeRegistryEntry | None
    pending: tuple[Any, ...]  # ((cls, flatten_fn, unflatten_fn), kwargs) for _cxx_pytree

    @property
    def empty(self) -> bool:
        return (
            self.node is None and self.serialize is None and self.cxx is None and not self.pending
        )


def _held(cls: type) -> _Held:
    """What torch's registries (private, and the C++ one through optree) hold for ``cls``."""
    with _registry_lock():
        return _Held(
            cls,
            pytree.SUPPORTED_NODES.get(cls),
            pytree.SUPPORTED_SERIALIZED_TYPES.get(cls),
            cls in pytree.CONSTANT_NODES,
            _cxx_node(cls),
            _pending(cls),
        )


#: ``[list, entries indexed, class -> positions of its entries]``: an index of torch's pending
#: C++ registrations (a list that grows by one per class registered before ``_cxx_pytree`` is
#: imported), so that registering many classes neither scans it once per class nor once per
#: lookup of a class in it.
_PENDING_INDEX: list[Any] = [None, 0, {}]


def _pending(cls: type) -> tuple[Any, ...]:
    """The pending C++ registrations of ``cls`` (under :func:`_registry_lock`)."""
    pending = pytree._cxx_pytree_pending_imports
    seen, indexed = _PENDING_INDEX[0], _PENDING_INDEX[1]
    positions = cast("dict[type, list[int]]", _PENDING_INDEX[2])
    size = len(pending)
    if seen is not pending or indexed > size:
        indexed, positions = 0, {}
    if indexed < size:
        for i in range(indexed, size):
            positions.setdefault(pending[i][0][0], []).append(i)
        _PENDING_INDEX[:] = [pending, size, positions]
    at = positions.get(cls)
    if at is None:
        return ()
    # Each position is checked: the list is torch's (entries taken out in place reset the
    # index when this module does it, and torch only ever clears it).
    found = tuple([pending[i] for i in at if i < size and pending[i][0][0] is cls])
    if len(found) != len(at):  # pragma: no cover - changed in place by someone else
        _PENDING_INDEX[:] = [None, 0, {}]
        return tuple([p for p in pending if p[0][0] is cls])
    return found


def _remove(cls: type) -> None:
    """Remove ``cls`` from both torch registries, pending C++ ones included."""
    with _registry_lock():
        pytree.SUPPORTED_NODES.pop(cls, None)
        serialize = pytree.SUPPORTED_SERIALIZED_TYPES.pop(cls, None)
        if serialize is not None:
            name = serialize.serialized_type_name
            if pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name) is cls:
                del pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
        pytree.CONSTANT_NODES.discard(cls)
        pending = pytree._cxx_pytree_pending_imports
        pending[:] = [p for p in pending if p[0][0] is not cls]
        _PENDING_INDEX[:] = [None, 0, {}]
        if _cxx_node(cls) is not None:
            optree: Any = complete("optree")
            optree.unregister_pytree_node(cls, namespace=_NAMESPACE)


def _put(held: _Held) -> None:
    """Make torch's registries hold exactly ``held`` for its class again (names aside)."""
    cls = held.cls
    _remove(cls)
    with _registry_lock():
        if held.node is not None:
            pytree.SUPPORTED_NODES[cls] = held.node
        if held.serialize is not None:
            pytree.SUPPORTED_SERIALIZED_TYPES[cls] = held.serialize
        if held.constant:
            pytree.CONSTANT_NODES.add(cls)
        pytree._cxx_pytree_pending_imports.extend(held.pending)
        if held.cxx is not None:
            entry = held.cxx
            optree: Any = complete("optree")
            optree.register_pytree_node(
                cls,
                entry.flatten_func,
                entry.unflatten_func,
                path_entry_type=entry.path_entry_type,
                namespace=_NAMESPACE,
            )


def _forget_loaded_specs() -> None:
    """Empty the ``lru_cache`` of ``treespec_loads`` (public ``functools`` API).

    Otherwise it keeps returning specs holding a class whose name moved to another one.
    """
    pytree.treespec_loads.cache_clear()


#: The check that sends generated unflatten functions down their traceable path
#: (:func:`treeclass._core.codegen.set_tracing_check`): Dynamo (torch 2.13.0) refuses a slot's
#: ``__set__`` called directly and a pre-bound ``object.__setattr__``. The public
#: ``torch.compiler.is_dynamo_compiling`` is ``False`` when called and folded to ``True`` by
#: Dynamo (~12 ns a call; ``is_compiling()`` ~50 ns). ``torch.compiler`` is not in stubs/.
_TRACING: Final[Callable[[], bool] | None] = getattr(
    importlib.import_module("torch.compiler"), "is_dynamo_compiling", None
)


def _mark_constant(fn: Callable[..., Any]) -> None:
    """Mark ``fn`` as ``torch.compiler.assume_constant_result`` does: Dynamo runs it, not traces.

    The public function imports ``torch._dynamo`` (over a second); it only sets this attribute
    (torch 2.13.0). :func:`treeclass._core.codegen.first_call` compiles a class's generated
    functions on their first call, which may be a call Dynamo inlines.
    """
    setattr(fn, "_dynamo_marked_constant", True)  # noqa: B010


_mark_constant(first_call)


def _register_namedtuple(cls: type, name: str) -> None:
    """Name a namedtuple in torch's Python registry (private: torch has no public way)."""
    pytree._register_namedtuple(cls, serialized_type_name=name)


# --- the adapter --------------------------------------------------------------------------


def _describe_existing(held: _Held) -> str:
    if held.serialize is not None:
        name = held.serialize.serialized_type_name
        if name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
            return "without a serialized_type_name"
        return (
            f"with serialized_type_name={name!r} (as transformers registers every ModelOutput "
            "subclass)"
        )
    if held.cxx is not None or held.pending:
        return "in its C++ pytree (torch.utils._cxx_pytree) only"
    return "as a pytree node"  # pragma: no cover - a NodeDef always has a _SerializeNodeDef


def _refuse(cls: type) -> Callable[[Any], Any]:
    """A context codec refusing a class without a name (treeclass's error, at load too)."""

    def refuse(_context: Any) -> Any:
        node = registered_node(cls)
        if node is not None:
            node.require_name()
        raise TreespecLoadError(  # pragma: no cover - require_name raised
            f"{cls.__module__}.{cls.__qualname__} has no serialized name in torch."
        )

    return refuse


# --- torch's None form: a class's None fields named in its context, ``(nones, *statics)``;
# its state has them under "none", its neutral node None children, as every other registry.


def _none_form(node: NodeType) -> bool:
    """Whether torch keeps ``node``'s class in the ``None`` form (``(nones, *statics)``)."""
    return (
        node.kind in ("dataclass", "attrs")
        and not node.return_none_fields
        and bool(node.data_fields)
    )


def child_count(cls: type, context: Any) -> int | None:
    """How many children torch gives a treeclass dataclass / attrs node (else ``None``)."""
    node = registered_node(cls)
    if node is None or node.kind not in ("dataclass", "attrs"):
        return None
    return len(node.data_fields) - (len(context[0]) if _none_form(node) else 0)


_I: Final = INDENT


def _plain(i: int, v: str) -> str:
    return v


def _keyed(i: int, v: str) -> str:
    return f"(_k{i}, {v})"


def _flatten_skipping(
    info: ClassInfo, head: str, child: Callable[[int, str], str], *, as_list: bool = False
) -> list[str]:
    """A flatten-like function leaving ``None`` values out: ``(children, (nones, *statics))``."""
    data = info.data_fields
    statics = [f"obj.{s}" for s in info.static_fields]
    local = [f"v{i}" for i in range(len(data))]
    lines = [head]
    lines += [f"{_I}{v} = obj.{name}" for v, name in zip(local, data)]
    lines.append(f"{_I}if {' or '.join(f'{v} is None' for v in local)}:")
    lines.append(f"{_I * 2}children = []")
    lines.append(f"{_I * 2}nones = []")
    for i, (v, name) in enumerate(zip(local, data)):
        lines.append(f"{_I * 2}if {v} is None:")
        lines.append(f"{_I * 3}nones.append({name!r})")
        lines.append(f"{_I * 2}else:")
        lines.append(f"{_I * 3}children.append({child(i, v)})")
    kids = "children" if as_list else "tuple(children)"
    lines.append(f"{_I * 2}return {kids}, {tuple_display(['tuple(nones)', *statics])}")
    items = [child(i, v) for i, v in enumerate(local)]
    children = f"[{', '.join(items)}]" if as_list else tuple_display(items)
    lines.append(f"{_I}return {children}, {tuple_display(['()', *statics])}")
    return lines


def _unpack_none_form(info: ClassInfo, local: list[str]) -> list[str]:
    """Read the data fields from the children, ``None`` for those named in ``aux[0]``."""
    lines = [f"{_I}if aux[0]:", f"{_I * 2}nones = aux[0]", f"{_I * 2}it = iter(children)"]
    lines += [
        f"{_I * 2}{v} = None if {name!r} in nones else next(it)"
        for v, name in zip(local, info.data_fields)
    ]
    lines.append(f"{_I}else:")
    return lines + unpack_lines(local, _I)


# torch's ``flatten`` gives a list (as its own ``register_dataclass``: ``dynamic_shapes`` are
# matched against it, container types exactly).
_HEAD: Final = "def unflatten(children, aux):"


def _list_form_source(info: ClassInfo) -> str:
    """The functions torch gets for a class whose data fields are all children."""
    return join_blocks(
        [
            flatten_lines(info, "def flatten(obj):", _plain, "", as_list=True),
            flatten_lines(info, "def flatten_with_keys(obj):", _keyed, ""),
            *unflatten_blocks(info, _HEAD),
        ]
    )


def _none_form_source(info: ClassInfo) -> str:
    """The functions torch gets for a class in the None form (``aux``: ``(nones, *statics)``)."""
    return join_blocks(
        [
            _flatten_skipping(info, "def flatten(obj):", _plain, as_list=True),
            _flatten_skipping(info, "def flatten_with_keys(obj):", _keyed),
            *unflatten_blocks(info, _HEAD, first_static=1, unpack=_unpack_none_form),
        ]
    )


_FUNCTIONS: Final = ("flatten", "flatten_with_keys", "unflatten")
#: The generated functions torch gets: in the None form, or with every data field a child.
_NONE_FORM: Final = Family("torch", _FUNCTIONS, _none_form_source)
_LIST_FORM: Final = Family("torch", _FUNCTIONS, _list_form_source)


def _family(node: NodeType) -> Family:
    """The generated functions' family torch binds for ``node``'s class."""
    return _NONE_FORM if _none_form(node) else _LIST_FORM


def _context_codec(node: NodeType) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """``(context -> state, state -> context)`` of a class: its state codec, in the None form."""
    assert node.codec is not None  # every registered class has one
    getstate = node.codec.getstate
    load = node.codec.load
    data = node.data_fields
    none_form = _none_form(node)

    def to_state(context: Any) -> Any:
        if not none_form:
            return getstate(context)
        state = getstate(context[1:])
        nones = context[0]
        if nones:
            state["data"] = [n for n in data if n not in nones]
            state["none"] = list(nones)
        return state

    def from_state(state: Any) -> Any:
        values, plan = load(state)
        if plan is None:
            return ((), *values) if none_form else values
        if isinstance(plan, Layout):
            what = "a torch structure"
            raise fixed_children_error(node.qualname, plan.dropped, plan.filled, what)
        if not none_form:
            absent = sorted(f for f, held in zip(data, plan) if not held)
            raise TreespecLoadError(
                f"the saved auxdata of {node.qualname} has None-valued field(s) {absent!r} "
                "outside the children, but the class is now registered with "
                "return_none_fields=True (None fields are children in torch); load it with "
                "treeclass.treespec_loads, or with the class as it was, or re-save."
            )
        return (tuple(f for f, held in zip(data, plan) if not held), *values)

    return to_state, from_state


class _NoneField:
    """A ``None`` field torch left out of a node's children (read as a ``None`` node)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<treeclass None field>"


_NONE_FIELD: Final = _NoneField()


def _neutral(cls: Any, context: Any, children: Any, flat: bool) -> tuple[Any, Any, Any, bool]:
    """A torch node as the neutral node list has it: ``(type, aux, children, flat)``.

    In the None form: the statics as aux, :data:`_NONE_FIELD` for the fields left out.
    """
    node = registered_node(cls) if isinstance(cls, type) else None
    if node is None or not _none_form(node):
        return (cls, context, children, flat)
    nones = context[0]
    if not nones:
        return (cls, context[1:], children, flat)
    it = iter(children)
    return (
        cls,
        context[1:],
        [_NONE_FIELD if f in nones else next(it) for f in node.data_fields],
        False,
    )


class _Dumpable:
    """Torch's ``to_dumpable_context`` / ``from_dumpable_context`` of a named class.

    The context codec is made on first use (two threads may both make one: either works).
    """

    __slots__ = ("codec", "node")

    def __init__(self, node: NodeType) -> None:
        self.node = node
        self.codec: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None

    def _codec(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        codec = self.codec
        if codec is None:
            codec = self.codec = _context_codec(self.node)
        return codec

    def to_dumpable_context(self, context: Any) -> str:
        return dumps_canonical(self._codec()[0](context))

    def from_dumpable_context(self, dumpable: Any) -> Any:
        node = self.node
        if not isinstance(dumpable, str):
            raise TreespecLoadError(
                f"the context of {node.name!r} ({node.qualname}) in this treespec is a "
                f"{type(dumpable).__name__}, not the JSON string treeclass writes; the "
                "document was not written by treeclass or has been edited."
            )
        return self._codec()[1](state_from_bytes(node, dumpable))


class TorchBackend:
    """Mirrors the treeclass registry into ``torch.utils._pytree`` (and its C++ twin)."""

    name = "torch"
    can_unregister = True

    def check(self, change: Change) -> list[Held]:
        """Report the classes torch maps the change's names to, and its registration of the class.

        Raises:
            RegistrationError: torch treats the class as an opaque leaf.
        """
        cls = change.node.type
        if _is_opaque(cls):
            raise RegistrationError(
                f"{change.node.qualname} is registered with torch as an opaque object type, "
                "which torch requires to stay a pytree leaf; it cannot also be a treeclass node."
            )
        held: list[Held] = []
        for name in change.names:
            holder = _class_for_serialized_name(name)
            if holder is not None:
                held.append((name, holder, "PyTorch's pytree"))
        existing = _held(cls)
        if not existing.empty:
            held.append((None, cls, f"PyTorch's pytree {_describe_existing(existing)}"))
        return held

    def add(self, change: Change) -> Undo:
        """Add the class to torch and move the names ``change`` says; the undo puts back all.

        A foreign registration of the class is replaced (``override``); on failure torch is
        left as it was.
        """
        node = change.node
        cls = node.type
        with _registry_lock():
            held = [_held(c) for c in dict.fromkeys((cls, *(c for _, c in change.drops)))]
            names = {n: _class_for_serialized_name(n) for n in change.names}
            names.update((n, _class_for_serialized_name(n)) for n, _ in change.drops)
            for h in held:
                if h.serialize is not None:
                    n = h.serialize.serialized_type_name
                    names.setdefault(n, _class_for_serialized_name(n))

        def undo() -> None:
            with _registry_lock():
                for h in held:
                    _put(h)
                for n, c in names.items():
                    _load_name_as(n, c)
            _forget_loaded_specs()

        try:
            if not held[0].empty:
                _remove(cls)
            for name, holder in change.drops:
                _unname(holder, name)
                if _class_for_serialized_name(name) is holder:
                    _load_name_as(name, None)
            _register(node, change.name)
            for alias in change.aliases:
                _load_name_as(alias, cls)
        except BaseException:
            undo()
            raise
        if change.drops or not held[0].empty:
            _forget_loaded_specs()
        return undo

    def __repr__(self) -> str:
        return "<treeclass torch backend>"


def _register(node: NodeType, name: str | None) -> None:
    """Register ``node``'s class with torch under ``name`` (unnamed: torch's own marker)."""
    cls = node.type
    if node.kind == "namedtuple":
        if name is not None:
            _register_namedtuple(cls, name)
        return
    if name is None:
        to_dumpable: Callable[[Any], Any] = _refuse(cls)
        from_dumpable: Callable[[Any], Any] = to_dumpable
    else:
        dumpable = _Dumpable(node)
        to_dumpable = dumpable.to_dumpable_context
        from_dumpable = dumpable.from_dumpable_context
    tracing = _TRACING
    # The embedded registry's unflatten (which optree shares) is traced too when users call
    # treeclass.tree_map or optree.tree_map inside compiled code.
    set_tracing_check(node.unflatten, tracing)
    functions = node.bind("torch", pytree.GetAttrKey, family=_family(node), _tracing=tracing)
    pytree.register_pytree_node(
        cls,
        functions["flatten"],
        functions["unflatten"],
        serialized_type_name=name,
        to_dumpable_context=to_dumpable,
        from_dumpable_context=from_dumpable,
        flatten_with_keys_fn=functions["flatten_with_keys"],
    )


#: The weights-only allow-list entry of by-name pickles: the global
#: ``treeclass._pickle.rebuild_by_name`` stands for ``rebuild_registered``, which builds only a
#: class registered here and never imports (``add_safe_globals`` takes ``(function, name)``).
_WEIGHTS_ONLY_ENTRY: Final = (rebuild_registered, "treeclass._pickle.rebuild_by_name")
_ALLOW_LOCK: Final = threading.Lock()


def _remove_safe_global(entry: tuple[Callable[..., Any], str]) -> None:
    """Take ``entry`` off torch's weights-only allow-list (private, as ``safe_globals`` does)."""
    unpickler = importlib.import_module("torch._weights_only_unpickler")
    unpickler._remove_safe_globals([entry])


def allow_pickled_instances(allow: bool) -> bool:
    """:func:`treeclass.torch.allow_weights_only`: returns whether the entry was on the list."""
    from torch import serialization

    with _ALLOW_LOCK:
        was = _WEIGHTS_ONLY_ENTRY in serialization.get_safe_globals()
        if allow and not was:
            serialization.add_safe_globals([_WEIGHTS_ONLY_ENTRY])
        elif not allow and was:
            _remove_safe_global(_WEIGHTS_ONLY_ENTRY)
        return bool(was)


#: The one adapter instance the registry mirrors into.
BACKEND: Final = TorchBackend()
allow_pickled_instances(True)  # on by default: docs/torch.md, "torch.load(weights_only=True)"


# --- structures ---------------------------------------------------------------------------


_NONE_NODE: Final = (type(None), None, (), True)


def _children(t: Any) -> list[Any]:
    """The child specs of a torch ``TreeSpec``."""
    # torch 2.13 deprecates ``children_specs`` for ``children()``; older releases lack it.
    return t.children() if callable(getattr(t, "children", None)) else t.children_specs  # type: ignore[no-any-return]


def _read(t: Any) -> tuple[Any, Any, Any, bool] | None:
    if t is _NONE_FIELD:
        return _NONE_NODE
    cls = t.type
    if cls is None:
        return None
    context = t.context
    if cls is _NAMEDTUPLE:  # torch's type for every namedtuple; the context is the class
        cls = context
    children = _children(t)
    k = len(children)
    return _neutral(cls, context, children, t.num_leaves == k and t.num_nodes == k + 1)


def read_cxx(item: Any) -> tuple[Any, Any, Any, bool] | None:
    """Read one node of torch's C++ pytree (an optree ``walk`` item; the None form there too)."""
    if item is None or item is _NONE_FIELD:
        return None if item is None else _NONE_NODE
    cls, data, children = item
    return _neutral(cls, data, children, children.count(None) == len(children))


def nodes_from_spec(spec: Any) -> list[Node]:
    """The treespec node list of a ``torch.utils._pytree.TreeSpec``.

    A torch ``None`` is a leaf, and so a leaf in the node list.

    Raises:
        UnnamedClassError: a node type is not registered with treeclass, or has no name.
        StructureMismatchError: a dict's keys are not in sorted order.
    """
    return nodes_of("torch", spec, _read)


def _is_node(t: type) -> bool:
    """Whether torch's pytree has ``t`` as a node (private ``SUPPORTED_NODES``)."""
    return t in pytree.SUPPORTED_NODES or is_namedtuple_class(t)


def _none_leaves(spec: TreeSpec) -> int:
    """How many ``None`` nodes of ``spec`` torch would see as leaves (all but None-form fields)."""
    count = 0
    stack: list[list[Any]] = []  # [parent node type, children left]
    for e in spec._entries:
        parent = stack[-1][0] if stack else None
        if e is not None and e[0].type is type(None):
            count += not (parent is not None and _none_form(parent))
        if stack:
            stack[-1][1] -= 1
        if e is not None and not e[3] and e[2]:
            stack.append([e[0], e[2]])
        while stack and not stack[-1][1]:
            stack.pop()
    return count


def spec_from_spec(spec: TreeSpec) -> Any:
    """The ``torch.utils._pytree.TreeSpec`` of a treeclass ``TreeSpec``.

    Raises:
        TreespecLoadError: the tree has a ``None`` node where torch would see a leaf (only the
            ``None`` fields of a class registered with ``return_none_fields=False`` stay out
            of torch's leaves), or torch does not see the same nodes.
    """
    if _none_leaves(spec):
        raise TreespecLoadError(
            f"the treespec has a None node ({brief(spec, 200)}) where torch's pytree would "
            "see a leaf (torch treats None as a leaf), so a torch TreeSpec would have more "
            "leaves than the document and the leaves flattened from the original tree "
            "would not fit it. Load it with to='jax', 'optree' or None; or keep None out "
            "of the tree before flattening (None fields of a treeclass class registered "
            "with return_none_fields=False, the default, are no leaves in torch)."
        )
    treespec = _with_shared_subtrees(spec)
    if treespec is None:
        treespec = pytree.tree_structure(skeleton(spec))
    if treespec.num_leaves != spec.num_leaves:
        raise leaf_count_error("torch", spec, treespec.num_leaves, _is_node)
    return treespec


def kept_context(value: Any) -> Any:
    """``value`` if nodes may share it, a copy if it is a list of string keys, else NOT_KEPT.

    Shared: a type, ``None``, or a tuple of JSON scalars and such tuples (what treeclass's
    classes and torch's namedtuples and sequences have); nothing mutable is shared.
    """
    if value is None or value.__class__ is type:
        return value
    if value.__class__ is list:
        return value.copy() if all(k.__class__ is str for k in value) else NOT_KEPT
    stack = [value]
    while stack:
        v = stack.pop()
        if v.__class__ is tuple:
            stack.extend(v)
        elif v.__class__ not in SCALAR_TYPES:
            return NOT_KEPT
    return value


NOT_KEPT: Final = object()


_NONE_TYPE: Final = type(None)


class _Subtree:
    """A leaf of a skeleton standing for a subtree whose torch spec is made already.

    The spec is shared where its context may be (:func:`kept_context`); otherwise each place
    gets its own context, as torch makes one per node.
    """

    __slots__ = ("one", "own", "shared", "spec")

    def __init__(self, one: TreeSpec) -> None:
        self.one = one
        spec: Any = pytree.tree_structure(skeleton(one))
        self.spec = spec
        context = spec.context
        kept = kept_context(context)  # the one rule of what nodes may share
        # Decided once: get() runs once per place (torch's .context is a property).
        self.shared = kept is context
        self.own = kept is NOT_KEPT

    def get(self) -> Any:
        """The spec for one place: the one made, a copy with its own list of keys, or a new one."""
        spec = self.spec
        if self.shared:
            return spec
        if self.own:
            return pytree.tree_structure(skeleton(self.one))
        return pytree.TreeSpec(spec.type, spec.context.copy(), list(_children(spec)))


def _with_shared_subtrees(spec: TreeSpec) -> Any:
    """The torch spec of ``spec``, made once per repeated subtree; ``None`` if none repeats.

    A subtree (a node whose children are all leaves) repeats when one entry of ``spec`` stands
    for several (the loader shares them). Its spec is made once, the rest of the tree is
    flattened by torch with a placeholder leaf in its place, then grafted (:func:`_graft`).
    A ``None`` node stays in the tree: a parent's torch context depends on it.
    """
    entries = spec._entries
    counts: dict[int, int] = {}
    for e in entries:
        if e is not None and e[3] and e[0].type is not _NONE_TYPE:
            counts[id(e)] = counts.get(id(e), 0) + 1
    if not counts or max(counts.values()) < 2:
        return None
    reduced: list[Any] = []
    leaves: list[Any] = []  # the reduced tree's leaves: LEAF, or a _Subtree
    made: dict[int, _Subtree] = {}
    for e in entries:
        if e is None:
            reduced.append(None)
            leaves.append(LEAF)
        elif counts.get(id(e), 0) > 1:
            sub = made.get(id(e))
            if sub is None:
                sub = made[id(e)] = _Subtree(TreeSpec._make((e,), e[2]))
            reduced.append(None)
            leaves.append(sub)
        else:
            reduced.append(e)
            if e[3]:
                leaves.extend([LEAF] * e[2])
    skeleton_tree = TreeSpec._make(tuple(reduced), len(leaves)).unflatten(leaves)
    found, treespec = pytree.tree_flatten(skeleton_tree)
    return _graft(treespec, found)


def _graft(treespec: Any, found: list[Any]) -> Any:
    """``treespec`` with the leaves that flattened from a ``_Subtree`` replaced by its spec.

    Iterative; a node whose children are all unchanged is kept, others are made again.
    """
    if treespec.type is None:
        leaf = found[0]
        return leaf.get() if leaf.__class__ is _Subtree else treespec
    at = 0
    stack: list[tuple[Any, list[Any], list[Any]]] = [(treespec, _children(treespec), [])]
    while True:
        node, children, grafted = stack[-1]
        if len(grafted) < len(children):
            child = children[len(grafted)]
            if child.type is None:
                leaf = found[at]
                at += 1
                grafted.append(leaf.get() if leaf.__class__ is _Subtree else child)
            else:
                stack.append((child, _children(child), []))
            continue
        stack.pop()
        if not all(map(operator.is_, grafted, children)):
            node = pytree.TreeSpec(node.type, node.context, grafted)
        if not stack:
            return node
        stack[-1][2].append(node)
