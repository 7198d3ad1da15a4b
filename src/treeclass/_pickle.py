r"""Pickling instances of named classes by their stable treeclass name (``copyreg``).

pickle stores an instance by its class's module path, so it cannot be unpickled where the
class lives in another module (``torch.export.save`` / ``load``, ``multiprocessing`` with
spawn, ``torch.distributed`` object collectives). :func:`install` puts a reducer for the class
in :data:`copyreg.dispatch_table` (the class itself is untouched), which pickle, ``copy`` and
``multiprocessing`` consult first. An instance reduces to ``rebuild_by_name(name, module,
qualname, fields, statics)``: ``fields`` is every field's value by name, static fields
included; ``statics`` the static fields' names (left out when there are none). Unpickling looks
the class up by ``name`` (:func:`treeclass.class_for_name`), falls back to ``module`` +
``qualname`` as pickle would, and raises :class:`~treeclass.UnregisteredNameError` naming both
when that fails. One global per instance, so ``torch.load(weights_only=True)`` can allow it (the
torch adapter allows :func:`rebuild_registered`, which never imports, under its name).

Rebuilding is unflatten's (no ``__init__`` unless ``unflatten_calls_init=True``; a class's own
``__setattr__`` honoured; attrs' hash cache reset), by the class's generated rebuild once it is
accepted by name: one registry lookup per instance, the class's static check, and fields of
another version of the class through its evolution. An instance of a *superseded* class (its
class statement ran again) is never pickled as the new class: pickling raises
:class:`~treeclass.UnnamedClassError`, while ``copy.deepcopy`` (which only calls the rebuilder)
works. An instance that refers to itself through its fields cannot be pickled by name
(``RecursionError``), and items a mapping-based instance (``ModelOutput``) holds under keys
that are not fields are not kept. This module's path is part of the pickle format.

Example:
    >>> import pickle
    >>> import treeclass as tc
    >>> @tc.pytree_dataclass(name="docs.pickle.Point", frozen=True)
    ... class Point:
    ...     x: float
    ...     unit: str = tc.field(static=True, default="m")
    >>> data = pickle.dumps(Point(1.0))
    >>> b"docs.pickle.Point" in data
    True
    >>> pickle.loads(data)
    Point(x=1.0, unit='m')
"""

from __future__ import annotations

import copyreg
import functools
from _thread import RLock
from collections.abc import Callable
from typing import Any, Final
from weakref import WeakKeyDictionary

from ._core.codegen import compile_function
from ._core.fields import is_namedtuple_class
from ._core.registry import (
    Change,
    activate_backend,
    class_for_name,
    node_for_name,
    registered_node,
)
from ._errors import (
    TreespecLoadError,
    UnregisteredNameError,
    UnserializableStaticError,
    brief,
    qualname,
    superseded_class,
    unregistered_name,
)

__all__ = [
    "BACKEND",
    "PickleBackend",
    "install",
    "is_installed",
    "rebuild_by_name",
    "rebuild_registered",
    "uninstall",
]

_LOCK = RLock()


class _Plan:
    """How to take one class's instances apart into fields and put them back together."""

    __slots__ = ("fields", "rebuild")

    def __init__(self, fields: tuple[str, ...], rebuild: Callable[[dict[str, Any]], Any]):
        self.fields = fields
        self.rebuild = rebuild


def _plan(cls: type) -> _Plan:
    """The fields of ``cls`` and a function rebuilding an instance from them, as unflatten does.

    A class that is not registered with treeclass (one found by module path that lost its
    registration) is rebuilt field by field with ``object.__setattr__`` on an instance made
    without ``__init__``.
    """
    if is_namedtuple_class(cls):
        names: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 (not on type)
        new_tuple: Callable[[type, Any], Any] = getattr(tuple, "__new__")  # noqa: B009
        return _Plan(names, lambda state: new_tuple(cls, [state[n] for n in names]))
    node = registered_node(cls)
    if node is None or node.info is None:
        import dataclasses

        if "__dataclass_fields__" in dir(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
        else:
            attributes: tuple[Any, ...] = getattr(cls, "__attrs_attrs__", ())
            names = tuple([str(a.name) for a in attributes])

        made: type[object] = cls

        def set_fields(state: dict[str, Any]) -> object:
            obj = object.__new__(made)
            for k, v in state.items():
                object.__setattr__(obj, k, v)
            return obj

        return _Plan(names, set_fields)
    unflatten = node.unflatten
    data, statics = node.data_fields, node.static_fields

    def rebuild(state: dict[str, Any]) -> Any:
        return unflatten(tuple([state[s] for s in statics]), [state[d] for d in data])

    return _Plan(tuple(f.name for f in node.info.fields), rebuild)


def _fast_rebuild(cls: type, plan: _Plan, slow: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Generate ``rebuild(state)`` for a dict of exactly the class's fields, else ``slow``.

    The static values get the class's static check, skipped when each value's exact type
    passes it outright; the instance is built with the lines of the class's ``unflatten``.
    """
    node = registered_node(cls)
    if node is None or node.info is None or node.codec is None:
        return slow
    fields = plan.fields
    ind = "    "
    lines = ["def rebuild(state):", f"{ind}try:"]
    lines.append(f"{ind * 2}if len(state) != {len(fields)}:")
    lines.append(f"{ind * 3}return _slow(state)")
    value_of = {f: f"v{i}" for i, f in enumerate(fields)}
    lines += [f"{ind * 2}{value_of[f]} = state[{f!r}]" for f in fields]
    lines.append(f"{ind}except (KeyError, TypeError):")
    lines.append(f"{ind * 2}return _slow(state)")
    namespace: dict[str, Any] = {"_slow": slow}
    if node.kind == "namedtuple":
        items = "".join(f"{value_of[f]}, " for f in fields)
        lines.append(f"{ind}return _tnew(_cls, ({items}))")
        namespace.update(_tnew=getattr(tuple, "__new__"), _cls=cls)  # noqa: B009
        return compile_function(cls, "unpickle", "\n".join(lines) + "\n", namespace, "rebuild")
    evolution = node.info.evolution
    if evolution is not None and evolution.migrate is not None:
        return slow  # the hook runs on every pickled object, as on every saved state
    assert node.generated is not None  # (every registered class but a namedtuple's)
    check = None if node.codec.static_check is None else node.codec.static_check()
    if check is not None:  # what every reader checks (treeclass._core.statics.static_check)
        statics = [value_of[f] for f in node.static_fields]
        call = f"_check(({''.join(f'{v}, ' for v in statics)}), None, False)"
        namespace["_check"] = check.check
        if any(types is None for _, types in check.passes):
            lines.append(f"{ind}{call}")
        else:  # the check provably passes values of these exact types: skip the call
            tests: list[str] = []
            for k, (i, types) in enumerate(check.passes):
                assert types is not None
                if len(types) == 1:
                    (namespace[f"_t{k}"],) = types
                    tests.append(f"{statics[i]}.__class__ is not _t{k}")
                else:
                    namespace[f"_t{k}"] = types
                    tests.append(f"{statics[i]}.__class__ not in _t{k}")
            lines.append(f"{ind}if {' or '.join(tests)}:")
            lines.append(f"{ind * 2}{call}")
    return node.generated.rebuild_function("unpickle", lines, value_of, namespace)


class _Rebuilder:
    """Rebuilds instances of one class from their fields; pickles as the class's name."""

    __slots__ = ("_plan", "_rebuild", "cls", "name", "node")

    def __init__(self, cls: type, name: str) -> None:
        self.cls = cls
        self.name = name
        #: The class's registration when this was made (its plan and rebuild follow it).
        self.node = registered_node(cls)
        self._plan: _Plan | None = None
        self._rebuild: Callable[[Any], Any] | None = None

    def plan(self) -> _Plan:
        plan = self._plan
        if plan is None:
            plan = self._plan = _plan(self.cls)
        return plan

    def fast(self) -> Callable[[Any], Any]:
        """``rebuild(fields)``: generated on first use (see :func:`_fast_rebuild`)."""
        rebuild = self._rebuild
        if rebuild is None:
            with _LOCK:
                rebuild = self._rebuild
                if rebuild is None:
                    rebuild = _fast_rebuild(self.cls, self.plan(), self._checked)
                    self._rebuild = rebuild
        return rebuild

    def __call__(self, state: dict[str, Any]) -> Any:
        return self.fast()(state)

    def _checked(self, state: dict[str, Any], statics: tuple[str, ...] | None = None) -> Any:
        plan = self.plan()
        node = registered_node(self.cls)
        codec = None if node is None else node.codec
        if codec is not None and codec.from_fields is not None:
            # The class's evolution and static checks: the same as every other loader's.
            return plan.rebuild(codec.from_fields(state, statics))
        if not isinstance(state, dict) or tuple(state) != plan.fields:
            self._check_fields(state, plan)
        return plan.rebuild(state)

    def _check_fields(self, state: object, plan: _Plan) -> None:
        """Accept the same fields in another order (the class's were reordered); else raise."""
        got: object = type(state).__name__
        if isinstance(state, dict):
            keys: list[object] = list(state)  # pyright: ignore[reportUnknownArgumentType]
            if set(keys) == set(plan.fields):
                return
            got = sorted(map(str, keys))
        raise TreespecLoadError(
            f"the pickled object registered as {self.name!r} has the fields {got!r}, but "
            f"{qualname(self.cls)} has {sorted(plan.fields)!r}; the class changed since the "
            "object was pickled, so rebuild the object with the current class instead of "
            "unpickling it."
        )

    def superseded(self) -> bool:
        """Whether a re-run of the class statement took the name (checked at each pickle)."""
        holder = class_for_name(self.name)
        return holder is not None and holder is not self.cls

    def __reduce__(self) -> Any:
        """Refuse: only the reducer of a superseded class hands this object to pickle."""
        raise superseded_class(qualname(self.cls), self.name, "pickling")


class _CopyOnly:
    """What an object whose static values no reader takes reduces to.

    ``copy`` calls it and gets a copy (unchecked: the values come from a live object); pickle
    gets the refusal.
    """

    __slots__ = ("_error", "_rebuild")

    def __init__(self, rebuild: Callable[[dict[str, Any]], Any], error: Exception) -> None:
        self._rebuild = rebuild
        self._error = error

    def __call__(self, state: dict[str, Any]) -> Any:
        return self._rebuild(state)

    def __reduce__(self) -> Any:
        raise self._error


_REBUILDER_ATTR: Final = "__treeclass_rebuilder__"


def _make_reducer(rebuilder: _Rebuilder) -> Callable[[Any], Any]:
    """Generate the ``copyreg`` reducer of one class (see the module's docstring).

    The fields are read by literal name into a dict literal. An object of a superseded class
    reduces to its rebuilder, which refuses to be pickled (``copy.deepcopy`` just calls it).
    The reducer carries its rebuilder as an attribute: how :func:`uninstall` recognises it.
    """
    cls = rebuilder.cls
    fields = rebuilder.plan().fields
    if is_namedtuple_class(cls):  # by position
        items = ", ".join(f"{f!r}: obj[{i}]" for i, f in enumerate(fields))
    else:
        items = ", ".join(f"{f!r}: obj.{f}" for f in fields)
    node = registered_node(cls)
    # A registered class knows when it is superseded; one installed by hand is asked by name.
    superseded = "_node.superseded" if node is not None else "_rebuilder.superseded()"
    check = ""
    # (a later version of the class tells static from data by the names, not by value)
    written = "" if node is None or not node.static_fields else ", _statics"
    if node is not None and node.codec is not None and node.static_fields:
        # Static values no reader takes are never pickled, but copy.copy / deepcopy, which
        # call the reduced callable without pickling it, still copy the object.
        statics = "".join(f"obj.{f}, " for f in node.static_fields)
        check = (
            f"    try:\n        _check(({statics}), None, True)\n"
            f"    except _Refused as e:\n        return _CopyOnly(_plain, e), ({{{items}}},)\n"
        )
    source = (
        "def reduce(obj):\n"
        f"    if {superseded}:\n"
        f"        return _rebuilder, ({{{items}}},)\n"
        f"{check}"
        f"    return _by_name, (_name, _module, _qualname, {{{items}}}{written})\n"
    )
    namespace = {
        "_check": None if node is None or node.codec is None else node.codec.check_statics,
        "_rebuilder": rebuilder,
        "_node": node,
        "_by_name": rebuild_by_name,
        "_statics": () if node is None else node.static_fields,
        "_Refused": UnserializableStaticError,
        "_CopyOnly": _CopyOnly,
        "_plain": rebuilder.plan().rebuild,
        "_name": rebuilder.name,
        "_module": cls.__module__,
        "_qualname": cls.__qualname__,
    }
    reduce = compile_function(cls, "pickle", source, namespace, "reduce")
    setattr(reduce, _REBUILDER_ATTR, rebuilder)
    return reduce


def _ours(reducer: object) -> _Rebuilder | None:
    """The rebuilder of a reducer :func:`install` made, or ``None`` for any other object."""
    rebuilder = getattr(reducer, _REBUILDER_ATTR, None)
    return rebuilder if isinstance(rebuilder, _Rebuilder) else None


def install(cls: type, name: str) -> bool:
    """Make pickle, ``copy`` and ``multiprocessing`` reduce instances of ``cls`` by ``name``.

    Idempotent. A reducer that someone else put in :data:`copyreg.dispatch_table` for
    ``cls`` is kept (it was an explicit choice); the function then returns ``False``.

    Args:
        cls: a class registered with treeclass under ``name``.
        name: its stable serialized name.

    Returns:
        Whether instances of ``cls`` now pickle by ``name``.
    """
    with _LOCK:
        existing = copyreg.dispatch_table.get(cls)
        mine = _ours(existing)
        if mine is not None:
            if mine.name == name and mine.node is registered_node(cls):
                return True
        elif existing is not None:
            return False
        _forget(cls)
        copyreg.pickle(cls, _deferred_reducer(_rebuilder_of(cls, name)))
        return True


def _deferred_reducer(rebuilder: _Rebuilder) -> Callable[[Any], Any]:
    """The reducer :func:`install` puts in the table, which generates the real one.

    At its first call; the real one (:func:`_make_reducer`) takes its place in the table unless
    the table changed meanwhile.
    """
    made: list[Callable[[Any], Any]] = []

    def reduce(obj: Any) -> Any:
        if not made:
            with _LOCK:
                if not made:
                    made.append(_make_reducer(rebuilder))
                    if copyreg.dispatch_table.get(rebuilder.cls) is reduce:
                        copyreg.dispatch_table[rebuilder.cls] = made[0]
        return made[0](obj)

    setattr(reduce, _REBUILDER_ATTR, rebuilder)
    return reduce


def uninstall(cls: type) -> None:
    """Undo :func:`install`: ``cls``'s instances pickle by module path again (the opt-out).

    A reducer installed by someone else is left alone.
    """
    with _LOCK:
        if _ours(copyreg.dispatch_table.get(cls)) is not None:
            del copyreg.dispatch_table[cls]
            _forget(cls)


def is_installed(cls: type) -> bool:
    """Whether instances of ``cls`` pickle by their treeclass name."""
    return _ours(copyreg.dispatch_table.get(cls)) is not None


def _find_by_path(module: str, qualname: str) -> type:
    """The class at ``module`` + ``qualname``, imported the way pickle would (may raise)."""
    import importlib

    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        if part == "<locals>":
            raise AttributeError(f"{qualname} is local to a function")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise TypeError(f"{module}.{qualname} is a {type(obj).__name__}, not a class")
    return obj


# One rebuilder per class (the one its installed reducer holds, or the one for a class found
# by module path or whose reducer is not installed), so that each class generates its rebuild
# once and loading stays linear in the number of instances (weak: such classes may go away).
_REBUILDERS: WeakKeyDictionary[type, _Rebuilder] = WeakKeyDictionary()


def _rebuilder_of(cls: type, name: str, *, named: bool = True) -> _Rebuilder:
    """The rebuilder of ``cls`` as it is registered now (or not registered).

    A new one replaces one made before the class was registered, or (``named``) one made
    under another name.
    """
    with _LOCK:
        rebuilder = _REBUILDERS.get(cls)
        if (
            rebuilder is None
            or rebuilder.node is not registered_node(cls)
            or (named and rebuilder.name != name)
        ):
            rebuilder = _REBUILDERS[cls] = _Rebuilder(cls, name)
        return rebuilder


def _forget(cls: type) -> None:
    """Send pickles naming ``cls`` through :func:`_rebuilder` again (its reducer changed)."""
    node = registered_node(cls)
    if node is not None:
        node.unpickle = None


def _rebuilder(cls: type, name: str) -> _Rebuilder:
    """The one rebuilder of ``cls``; refuses a class registered with ``pickle_by_name=False``.

    Raises:
        TreespecLoadError: ``cls`` is registered with ``pickle_by_name=False``, so no
            pickle of it is rebuilt by name (only a crafted one names it).
    """
    mine = _ours(copyreg.dispatch_table.get(cls))
    if mine is not None:
        return mine
    node = registered_node(cls)
    if node is not None and not node.pickle_by_name:
        raise TreespecLoadError(
            f"this pickle asks to rebuild {qualname(cls)} by the name "
            f"{name!r}, but the class is registered with pickle_by_name=False: its instances "
            "are pickled by module path, never by name, so only a crafted file names it this "
            "way; refusing to build it. Re-save the object with the class as it is now."
        )
    return _rebuilder_of(cls, name, named=False)


def _by_name(
    name: str,
    module: str,
    qualname: str,
    fields: Any,
    by_path: bool,
    statics: tuple[str, ...] | None = None,
) -> Any:
    """:func:`rebuild_by_name` (``by_path``) or :func:`rebuild_registered`.

    A class found by ``name`` that :func:`_rebuilder` accepts and that is registered with
    ``pickle_by_name=True`` (which holds for as long as the class is registered) gets its
    generated rebuild set as the node's ``unpickle``, called straight from then on: one lookup
    of ``name``. :func:`install` and :func:`uninstall` clear it.
    """
    try:
        node = node_for_name(name)
    except TypeError:  # an unhashable name, which treeclass never writes: refused below
        node = None
    if node is not None and (statics is None or node.info is None or node.info.evolution is None):
        rebuild = node.unpickle
        if rebuild is not None:
            return rebuild(fields)
    if name.__class__ is not str:
        raise UnregisteredNameError(
            f"this pickle asks to rebuild a class by the name {brief(name, 100)}, which is not "
            "a serialized name (a str); treeclass never writes one, so the pickle was crafted "
            "or damaged: refusing to build anything."
        )
    cls = class_for_name(name)
    if cls is None:
        if not by_path:
            raise unregistered_name(name, "this pickle", f" (pickled from {module}.{qualname})")
        try:
            cls = _find_by_path(module, qualname)
        except Exception as e:
            raise unregistered_name(
                name,
                "this pickle",
                f" (pickled from {module}.{qualname}, which cannot be imported: "
                f"{type(e).__name__}: {e})",
                by_path=True,
            ) from e
        return _rebuilder(cls, name)._checked(fields, statics)
    known = registered_node(cls)
    if statics is not None and known is not None and known.info and known.info.evolution:
        return _rebuilder(cls, name)._checked(fields, statics)
    with _LOCK:  # the check and the setting together: install and uninstall take the lock
        rebuild = _rebuilder(cls, name).fast()
        node = node_for_name(name)
        if node is not None and node.type is cls and node.pickle_by_name:
            node.unpickle = rebuild
    return rebuild(fields)


def rebuild_by_name(
    name: str,
    module: str,
    qualname: str,
    fields: dict[str, Any],
    statics: tuple[str, ...] | None = None,
) -> Any:
    """What a pickled instance calls when unpickled (pickles refer to this function).

    Looks the class up by its treeclass ``name`` (or alias); when no class has the name, falls
    back to ``module`` + ``qualname``, as pickle itself would have done. The instance is
    rebuilt as unflatten does, without ``__init__``.

    Raises:
        UnregisteredNameError: no class is registered under ``name`` and none can be imported
            from ``module`` + ``qualname``; the message names both.
        TreespecLoadError: the pickled fields are not ones this class (or an earlier version
            of it, by its ``aliases=`` / ``removed_fields=`` / ``migrate=``) has.
    """
    return _by_name(name, module, qualname, fields, True, statics)


def rebuild_registered(
    name: str,
    module: str,
    qualname: str,
    fields: dict[str, Any],
    statics: tuple[str, ...] | None = None,
) -> Any:
    """:func:`rebuild_by_name` that never imports: a class must be registered under ``name``.

    What safe loaders put in the place of :func:`rebuild_by_name` (the torch adapter allows it
    for ``torch.load(weights_only=True)`` under that function's name).

    Raises:
        UnregisteredNameError: no class is registered under ``name``.
    """
    return _by_name(name, module, qualname, fields, False, statics)


class PickleBackend:
    """Installs the pickle reducer of every named class as it is registered (always active).

    A class registered with ``pickle_by_name=False`` keeps pickle's own behaviour (by module
    path); so does a class without a name.
    """

    name: str = "pickle"
    can_unregister: bool = True

    def check(self, change: Change) -> None:
        """Nothing to check: a reducer someone else installed is kept (see :func:`install`)."""

    def add(self, change: Change) -> Callable[[], None]:
        """Install the class's reducer (an earlier definition keeps its own, which now refuses)."""
        node = change.node
        if change.name is not None and node.pickle_by_name:
            install(node.type, change.name)
        return functools.partial(uninstall, node.type)


#: The backend the registry holds: active from the import of this module (by ``treeclass``).
BACKEND: Final = PickleBackend()
activate_backend(BACKEND, framework=False)
