"""PyTorch adapter: treeclass nodes in ``torch.utils._pytree`` and its C++ twin.

Imported (by :mod:`treeclass._hooks`) only once ``torch`` has been imported. Every registered
class is then registered with torch's Python pytree under its treeclass name as
``serialized_type_name``, with an exact ``to_dumpable_context`` / ``from_dumpable_context`` pair
(tuples stay tuples, so a program loaded by ``torch.export.load`` accepts live inputs) and a
``flatten_with_keys_fn`` giving key paths such as ``.logits``. torch mirrors the registration
into its C++ pytree (``torch.utils._cxx_pytree``, optree's ``"torch"`` namespace) itself, at once
or, when that module has not been imported yet, from its pending list.

Beyond what ``torch.utils._pytree.register_pytree_node`` does, this adapter:

- checks everything before changing anything (a refused class leaves both torch registries as
  they were), and undoes its own registration when another framework refuses the class;
- refuses a ``serialized_type_name`` that torch already maps to another class (torch itself lets
  the last registration win silently);
- replaces a registration another library made for the same class (HuggingFace transformers
  registers every ``ModelOutput`` subclass under its module path) only with ``override=True``,
  in both registries, pending ones included;
- on a re-run of the same class definition (notebook, ``importlib.reload``) moves the name to
  the new class; the old class stays a node but can no longer be serialized under the name;
- gives unnamed classes a placeholder name, so that serializing them raises a clear
  :class:`~treeclass.UnnamedClassError` instead of torch's generic message.

torch offers no public way to inspect or undo a registration, so those steps reach into
private state. Each such access is one small function below, marked with the torch version it
was checked against, and covered by ``tests/test_torch_backend.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from .. import _registry
from .._auxdata import aux_from_bytes, aux_to_bytes
from .._codegen import make_flatten, make_flatten_with_keys, make_unflatten, set_tracing_check
from .._errors import NameConflictError, RegistrationError, TreespecLoadError, UnnamedClassError
from .._registry import NodeDef

__all__ = ["BACKEND", "TorchBackend", "activate"]

_ready = False


def activate() -> None:
    """Start mirroring the treeclass registry into torch (called by the import hook).

    Defined before torch is imported: when this module is the first to import torch, the import
    hook calls it while the module is still executing; it then does nothing, and the module
    activates itself once it is complete.
    """
    if _ready:
        _registry.activate_backend(BACKEND)


import torch.utils._pytree as pytree  # noqa: E402  (after activate(): see its docstring)

#: The torch release whose private pytree state this module was checked against.
CHECKED_TORCH_VERSION: Final = "2.13.0"

_NAMESPACE: Final = "torch"  # optree namespace of torch.utils._cxx_pytree
_UNNAMED_PREFIX: Final = "<treeclass unnamed "
_SUPERSEDED_PREFIX: Final = "<treeclass superseded "


# --------------------------------------------------------------------------------------------
# Private torch state. Checked against torch 2.13.0 (torch/utils/_pytree.py,
# torch/utils/_cxx_pytree.py): the Python registry is three module-level dicts guarded by
# ``_NODE_REGISTRY_LOCK`` plus ``CONSTANT_NODES``; the C++ one is optree's ``"torch"``
# namespace, filled from ``_cxx_pytree_pending_imports`` when ``torch.utils._cxx_pytree`` is
# first imported.
# --------------------------------------------------------------------------------------------


def _registry_lock() -> Any:
    """The lock around torch's Python registry (private; torch 2.13.0)."""
    return pytree._NODE_REGISTRY_LOCK


def _python_node(cls: type) -> Any:
    """The ``NodeDef`` of ``cls`` in torch's Python registry, or ``None`` (torch 2.13.0)."""
    return pytree.SUPPORTED_NODES.get(cls)


def _serialize_def(cls: type) -> Any:
    """The ``_SerializeNodeDef`` torch keeps for ``cls``, or ``None`` (torch 2.13.0)."""
    return pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)


def _class_for_serialized_name(name: str) -> type | None:
    """The class torch maps ``name`` to when loading, or ``None`` (private; torch 2.13.0)."""
    return pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)


def _is_constant(cls: type) -> bool:
    """Whether ``cls`` was registered with ``register_constant`` (private; torch 2.13.0)."""
    return cls in pytree.CONSTANT_NODES


def _pending_cxx(cls: type) -> list[Any]:
    """Registrations of ``cls`` torch holds until ``_cxx_pytree`` is imported (torch 2.13.0).

    Each is ``((cls, flatten_fn, unflatten_fn), kwargs)``.
    """
    return [p for p in pytree._cxx_pytree_pending_imports if p[0][0] is cls]


def _optree() -> Any:
    """The optree module if it has been imported (torch's C++ pytree is built on it), else None.

    Reached through :data:`sys.modules` so that the adapter neither imports optree nor needs
    its type information.
    """
    return sys.modules.get("optree")


def _cxx_node(cls: type) -> Any:
    """The optree registry entry of ``cls`` in the ``"torch"`` namespace, or ``None``.

    Entries of optree's global namespace (which torch's lookups fall back to) are not torch's
    and are left alone.
    """
    optree = _optree()
    if optree is None:
        return None  # nothing can have been registered with it
    entry = optree.register_pytree_node.get(cls, namespace=_NAMESPACE)
    if entry is None or getattr(entry, "namespace", None) != _NAMESPACE:
        return None
    return entry


def _is_opaque(cls: type) -> bool:
    """Whether torch treats ``cls`` as an opaque leaf type (private; torch 2.13.0)."""
    try:
        from torch._library.opaque_object import is_opaque_type
    except ImportError:  # pragma: no cover - older or newer torch
        return False
    return bool(is_opaque_type(cls))


class _Snapshot(NamedTuple):
    """Everything torch's two registries hold about one class, to put it back later."""

    cls: type
    node: Any  # pytree.NodeDef | None
    serialize: Any  # pytree._SerializeNodeDef | None
    owns_name: bool  # whether SERIALIZED_TYPE_TO_PYTHON_TYPE maps serialize's name to cls
    constant: bool
    cxx: Any  # optree PyTreeNodeRegistryEntry | None
    pending: tuple[Any, ...]

    @property
    def empty(self) -> bool:
        return (
            self.node is None and self.serialize is None and self.cxx is None and not self.pending
        )


def _snapshot(cls: type) -> _Snapshot:
    """Read what torch knows about ``cls`` (private; torch 2.13.0)."""
    with _registry_lock():
        serialize = _serialize_def(cls)
        owns = serialize is not None and (
            _class_for_serialized_name(serialize.serialized_type_name) is cls
        )
        return _Snapshot(
            cls,
            _python_node(cls),
            serialize,
            owns,
            _is_constant(cls),
            _cxx_node(cls),
            tuple(_pending_cxx(cls)),
        )


def _remove(cls: type) -> None:
    """Remove ``cls`` from both torch registries, pending C++ ones included (torch 2.13.0)."""
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
        if _cxx_node(cls) is not None:
            _optree().unregister_pytree_node(cls, namespace=_NAMESPACE)


def _restore(snap: _Snapshot) -> None:
    """Make torch's registries hold exactly ``snap`` for its class again (torch 2.13.0)."""
    cls = snap.cls
    _remove(cls)
    with _registry_lock():
        if snap.node is not None:
            pytree.SUPPORTED_NODES[cls] = snap.node
        if snap.serialize is not None:
            pytree.SUPPORTED_SERIALIZED_TYPES[cls] = snap.serialize
            if snap.owns_name:
                pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[snap.serialize.serialized_type_name] = cls
        if snap.constant:
            pytree.CONSTANT_NODES.add(cls)
        pytree._cxx_pytree_pending_imports.extend(snap.pending)
        if snap.cxx is not None:
            entry = snap.cxx
            _optree().register_pytree_node(
                cls,
                entry.flatten_func,
                entry.unflatten_func,
                path_entry_type=entry.path_entry_type,
                namespace=_NAMESPACE,
            )


def _set_serialization(
    cls: type,
    serialized_type_name: str,
    to_dumpable: Callable[[Any], Any],
    from_dumpable: Callable[[Any], Any],
) -> None:
    """Replace only how torch serializes ``cls``, keeping its node (private; torch 2.13.0)."""
    with _registry_lock():
        old = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
        if (
            old is not None
            and pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(old.serialized_type_name) is cls
        ):
            del pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[old.serialized_type_name]
        pytree.SUPPORTED_SERIALIZED_TYPES[cls] = pytree._SerializeNodeDef(
            cls, serialized_type_name, to_dumpable, from_dumpable
        )
        pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def _forget_loaded_specs() -> None:
    """Empty the ``lru_cache`` of ``treespec_loads`` (torch 2.13.0).

    Otherwise it keeps returning specs holding a class whose name moved to another one.
    """
    pytree.treespec_loads.cache_clear()


def _dynamo_tracing_check() -> Callable[[], bool] | None:
    """The check that sends generated unflatten functions down their traceable path.

    ``torch.compiler.is_dynamo_compiling`` returns ``False`` when called, and Dynamo folds it
    to ``True`` (``tracing_state_functions`` in ``torch/_dynamo/variables/torch.py``, torch
    2.13.0). It costs ~12 ns per call outside tracing; ``is_compiling()`` costs ~50 ns.
    """
    import importlib

    compiler = importlib.import_module("torch.compiler")  # (not in stubs/: one function)
    check: Callable[[], bool] | None = getattr(compiler, "is_dynamo_compiling", None)
    return check


def _register_namedtuple(cls: type, name: str) -> None:
    """Register a namedtuple by name, privately (torch 2.13.0); Python registry only.

    optree (torch's C++ pytree) treats every namedtuple as a node already.
    """
    pytree._register_namedtuple(cls, serialized_type_name=name)


# --------------------------------------------------------------------------------------------
# The adapter.
# --------------------------------------------------------------------------------------------


def _describe_existing(snap: _Snapshot) -> str:
    if snap.serialize is not None:
        name = snap.serialize.serialized_type_name
        if name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
            return "without a serialized_type_name"
        return f"with serialized_type_name={name!r}"
    if snap.cxx is not None or snap.pending:
        return "in its C++ pytree (torch.utils._cxx_pytree) only"
    return "as a pytree node"  # pragma: no cover - a NodeDef always has a _SerializeNodeDef


def _placeholder(prefix: str, cls: type) -> str:
    return f"{prefix}{cls.__module__}.{cls.__qualname__} at {id(cls):#x}>"


def _raise_unnamed(node: NodeDef) -> Callable[[Any], Any]:
    def refuse(_context: Any) -> Any:
        node.require_name()
        raise UnnamedClassError(node.qualname)  # pragma: no cover - require_name raised

    return refuse


def _raise_superseded(previous: NodeDef) -> Callable[[Any], Any]:
    message = (
        f"{previous.qualname} was defined again (its class statement ran a second time, as in "
        f"a notebook or after importlib.reload), and the name {previous.name!r} now belongs to "
        "the new class; this object is an instance of the old class, so rebuild it from the "
        "new class before serializing it."
    )

    def refuse(_context: Any) -> Any:
        raise UnnamedClassError(message)

    return refuse


def _to_dumpable(node: NodeDef) -> Callable[[Any], str]:
    def to_dumpable_context(context: Any) -> str:
        return aux_to_bytes(node, context).decode("utf-8")

    return to_dumpable_context


def _from_dumpable(node: NodeDef) -> Callable[[Any], Any]:
    def from_dumpable_context(dumpable: Any) -> Any:
        if not isinstance(dumpable, str):
            raise TreespecLoadError(
                f"the context of {node.name!r} ({node.qualname}) in this treespec is a "
                f"{type(dumpable).__name__}, not the JSON string treeclass writes; the "
                "document was not written by treeclass or has been edited."
            )
        return aux_from_bytes(node, dumpable.encode("utf-8"))

    return from_dumpable_context


def _superseded_holder(node: NodeDef, previous: NodeDef | None) -> NodeDef | None:
    """The earlier definition of ``node``'s class that torch still maps its name to.

    ``previous`` as the registry passes it; when the backend is activated after both
    definitions ran (a notebook cell run twice before ``import torch``), the registry passes
    ``None``, and the earlier definition is found from torch's map instead.
    """
    if previous is not None or node.name is None:
        return previous
    holder = _class_for_serialized_name(node.name)
    if holder is None or holder is node.cls:
        return None
    held = _registry.node_for_class(holder)
    if (
        held is not None
        and held.name == node.name
        and held.same_definition(node)
        and _registry.node_for_name(node.name) is node
    ):
        return held
    return None


class TorchBackend:
    """Mirrors the treeclass registry into ``torch.utils._pytree`` (and its C++ twin)."""

    name = "torch"
    can_unregister = True

    def __init__(self) -> None:
        # cls -> what torch held for it before treeclass registered it (a foreign
        # registration replaced with override=True), and the previous definition's
        # serialization whose name was moved to it; both are put back by unregister().
        self._undo: dict[type, tuple[_Snapshot | None, _Snapshot | None]] = {}

    def check(self, node: NodeDef, previous: NodeDef | None, override: bool) -> None:
        """Raise a :class:`RegistrationError` if torch cannot take ``node``; change nothing.

        Raises:
            NameConflictError: torch already maps the name to another class.
            RegistrationError: torch already has a registration for the class (and
                ``override`` is false), or treats the class as an opaque leaf.
        """
        cls = node.cls
        previous = _superseded_holder(node, previous)
        if node.name is not None:
            holder = _class_for_serialized_name(node.name)
            if (
                holder is not None
                and holder is not cls
                and not (previous is not None and holder is previous.cls)
            ):
                raise NameConflictError(
                    f"PyTorch's pytree already maps serialized_type_name {node.name!r} to "
                    f"{holder.__module__}.{holder.__qualname__}, so {node.qualname} cannot be "
                    "registered under that name (torch would silently load one class as the "
                    "other); give it another name=."
                )
        snap = _snapshot(cls)
        if not snap.empty and not override:
            raise RegistrationError(
                f"{node.qualname} is already registered with PyTorch's pytree "
                f"{_describe_existing(snap)}, by another library (transformers registers every "
                "ModelOutput subclass that way); pass override=True to register_dataclass() or "
                "pytree_dataclass() to replace that registration with treeclass's, in "
                "torch.utils._pytree and torch.utils._cxx_pytree."
            )
        if _is_opaque(cls):
            raise RegistrationError(
                f"{node.qualname} is registered with torch as an opaque object type, which "
                "torch requires to stay a pytree leaf; it cannot also be a treeclass node."
            )

    def register(self, node: NodeDef, previous: NodeDef | None, override: bool) -> None:
        """Register ``node`` with torch; on failure torch is left as it was.

        ``check`` has passed. A foreign registration of the class is replaced (``override``);
        ``previous``, an earlier definition of the same class, loses the name to ``node``.
        """
        cls = node.cls
        previous = _superseded_holder(node, previous)
        foreign = _snapshot(cls)
        old_prev = _snapshot(previous.cls) if previous is not None else None
        try:
            if not foreign.empty:
                _remove(cls)
            if previous is not None and previous.kind == "namedtuple":
                # torch writes a namedtuple's name without asking its to_dumpable_context,
                # so the old class must lose its registration by name altogether.
                _remove(previous.cls)
            elif previous is not None and _serialize_def(previous.cls) is not None:
                _set_serialization(
                    previous.cls,
                    _placeholder(_SUPERSEDED_PREFIX, previous.cls),
                    _raise_superseded(previous),
                    _raise_superseded(previous),
                )
            self._register(node)
        except BaseException:
            _restore(foreign)
            if old_prev is not None:
                _restore(old_prev)
            raise
        if previous is not None or not foreign.empty:
            _forget_loaded_specs()
            self._undo[cls] = (None if foreign.empty else foreign, old_prev)

    def _register(self, node: NodeDef) -> None:
        cls = node.cls
        if node.kind == "namedtuple":
            if node.name is not None:
                _register_namedtuple(cls, node.name)
            return
        if node.name is None:
            serialized_type_name = _placeholder(_UNNAMED_PREFIX, cls)
            to_dumpable: Callable[[Any], Any] = _raise_unnamed(node)
            from_dumpable: Callable[[Any], Any] = _raise_unnamed(node)
        else:
            serialized_type_name = node.name
            to_dumpable = _to_dumpable(node)
            from_dumpable = _from_dumpable(node)
        tracing = _dynamo_tracing_check()
        # The embedded registry's unflatten (which optree shares) is traced too when users
        # call treeclass.tree_map or optree.tree_map inside compiled code.
        set_tracing_check(node.unflatten, tracing)
        pytree.register_pytree_node(
            cls,
            # Children as a list, as torch's own register_dataclass gives them: torch.export
            # matches dynamic_shapes against this container and compares types exactly.
            make_flatten(node.info, node.return_none_fields, as_list=True, tag="torch"),
            make_unflatten(
                node.info, node.return_none_fields, children_first=True, tracing=tracing
            ),
            serialized_type_name=serialized_type_name,
            to_dumpable_context=to_dumpable,
            from_dumpable_context=from_dumpable,
            flatten_with_keys_fn=make_flatten_with_keys(
                node.info, node.return_none_fields, pytree.GetAttrKey, tag="torch"
            ),
        )

    def unregister(self, node: NodeDef) -> None:
        """Undo :meth:`register`: put back what torch held before."""
        foreign, old_prev = self._undo.pop(node.cls, (None, None))
        _remove(node.cls)
        if foreign is not None:
            _restore(foreign)
        if old_prev is not None:
            _restore(old_prev)
        if foreign is not None or old_prev is not None:
            _forget_loaded_specs()


#: The one adapter instance, activated by :func:`activate`.
BACKEND: Final = TorchBackend()

_ready = True
activate()
