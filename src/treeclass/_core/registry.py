"""The one registry: node types by type and by name, atomic registration, and backends.

Every node type lives here: the built-in containers, namedtuples (on first sight) and the
registered classes. Registering a class is atomic: every active backend (a framework adapter,
see ``docs/contributing.md``) is asked whether it can take the class *before* anything changes
anywhere; then the embedded registry and each backend register it, and a failure part-way
undoes what was done.
"""

from __future__ import annotations

import warnings
from _thread import RLock
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from .._errors import NameConflictError, RegistrationError, qualname, report_failures
from .codegen import release
from .fields import is_namedtuple_class
from .names import BUILTIN_NAMES, Origin, check_name
from .nodes import BUILTIN_NODE_TYPES, LEAF_TYPES, NodeType, namedtuple_node

__all__ = [
    "Backend",
    "Change",
    "Held",
    "activate_backend",
    "active_backends",
    "class_for_name",
    "held_elsewhere",
    "is_registered",
    "name_of",
    "node_for_name",
    "node_type_for",
    "nothing",
    "register",
    "registered_node",
    "registered_nodes",
    "retry_missing",
    "set_before_register",
]


class Change:
    """What registering one class changes in every framework, as the registry decided it.

    The registry works out every outcome -- which names and aliases point at the class, which
    names earlier definitions lose -- and hands it to each backend, which only adds the class
    to its framework and moves those names.

    Attributes:
        node: the class's node type.
        names: the serialized name first, then the aliases (earlier names loaded as the
            class, never written); ``()`` for an unnamed class, or one whose definition ran
            again since (the name belongs to the newer class).
        drops: ``(name, class)`` pairs: names and aliases a framework maps to an earlier
            definition of the class (treeclass's own), which that class loses, in order.
        override: replace another library's registration of the class (``override=True``).
    """

    __slots__ = ("drops", "names", "node", "override")

    def __init__(
        self,
        node: NodeType,
        names: tuple[str, ...],
        drops: tuple[tuple[str, type], ...] = (),
        override: bool = False,
    ) -> None:
        self.node = node
        self.names = names
        self.drops = drops
        self.override = override

    @property
    def name(self) -> str | None:
        """The name the class is written under, or ``None``."""
        return self.names[0] if self.names else None

    @property
    def aliases(self) -> tuple[str, ...]:
        """The earlier names the class also loads under."""
        return self.names[1:]


#: Undoes what :meth:`Backend.add` did.
Undo = Callable[[], None]
#: A fact a backend reports (:meth:`Backend.check`): ``(name, holder, where)``, the framework
#: maps ``name`` to the class ``holder``; or ``(None, cls, where)``, the framework holds a
#: registration of the class itself that treeclass did not make. ``where`` says where and what
#: (``"PyTorch's pytree with serialized_type_name='x'"``).
Held = tuple[str | None, type, str]


class Backend(Protocol):
    """What a framework adapter provides to mirror the registry (see docs/contributing.md)."""

    #: The framework's name, as in :data:`treeclass._backends.activation.FRAMEWORKS`.
    name: str
    #: Whether the undo :meth:`add` returns restores the framework (JAX's cannot); also
    #: whether ``override=True`` can replace another library's registration there.
    can_unregister: bool

    def check(self, change: Change) -> Iterable[Held] | None:
        """Report what the framework holds of the change's class and names (:data:`Held`).

        The registry decides what may be taken over (:func:`_refusal`). Raises
        :class:`~treeclass.RegistrationError` only for what no option allows. Changes nothing.
        """

    def add(self, change: Change) -> Undo:
        """Add the class and move the names as ``change`` says, all or nothing; return the undo."""
        ...


def _refusal(change: Change, backend: Backend, held: Iterable[Held]) -> RegistrationError | None:
    """The one decision (and wording) on what a framework already holds; ``None``: go ahead.

    A name may be moved from the class itself or from an earlier definition losing it
    (``change.drops``); any other holder is another library's, and the class is refused. A
    registration of the class made by another library is replaced only with ``override=True``,
    in a framework that can undo (``can_unregister``).
    """
    node = change.node
    for name, holder, where in held:
        if name is None:
            if change.override and backend.can_unregister:
                continue
            fix = (
                "register it with override=True (register_dataclass() or pytree_dataclass()) "
                "to replace that registration with treeclass's, or leave it to the other library"
                if backend.can_unregister
                else "remove the other registration, or register a subclass with treeclass "
                f"instead ({backend.name} cannot replace a registration, so override=True does "
                "not apply)"
            )
            return held_elsewhere(node.qualname, where, fix)
        if holder is not node.type and (name, holder) not in change.drops:
            what = "its name" if name == change.name else "an alias"
            return _taken(name, f"{qualname(holder)} in {where} (outside treeclass)", node, what)
    return None


def held_elsewhere(cls: str, where: str, fix: str) -> RegistrationError:
    """The one wording of a class another library registered where treeclass would."""
    return RegistrationError(
        f"{cls} is already registered with {where}, by another library, so treeclass cannot "
        f"register it there; nothing was registered. To fix it, {fix}."
    )


def _check(backend: Backend, change: Change) -> None:
    """Ask ``backend`` about ``change``; raise the registry's refusal, if any."""
    error = _refusal(change, backend, backend.check(change) or ())
    if error is not None:
        raise error


def _add_standing(backend: Backend, node: NodeType) -> None:
    """Add an already-registered class to ``backend`` (activated, or retried, later)."""
    names = () if node.superseded or node.name is None else (node.name, *node.aliases)
    change = Change(node, names)
    _check(backend, change)
    backend.add(change)


def _drops(node: NodeType, previous: NodeType | None) -> tuple[tuple[str, type], ...]:
    """The names and aliases earlier definitions lose to ``node`` (before :func:`_take_names`)."""
    out: dict[tuple[str, type], None] = {}
    for n in (node.name, *node.aliases) if node.name is not None else ():
        holder = _BY_NAME.get(n)
        if holder is not None and holder is not node:
            out[n, holder.type] = None
    if previous is not None:
        for alias in previous.aliases:
            out[alias, previous.type] = None
    return tuple(out)


_LOCK = RLock()
#: Every node type: built-in containers, namedtuples seen so far, registered classes.
_BY_TYPE: dict[type, NodeType] = dict(BUILTIN_NODE_TYPES)
#: Built-in and registered names.
_BY_NAME: dict[str, NodeType] = {nt.name: nt for nt in BUILTIN_NODE_TYPES.values() if nt.name}
#: Classes registered through the API, in registration order.
_REGISTERED: dict[type, NodeType] = {}
_BACKENDS: list[Backend] = []
_INTERNAL: set[str] = set()
#: ``(backend name, class)`` -> why activating that backend could not register the class.
_MISSING: dict[tuple[str, type], Exception] = {}


def nothing() -> None:
    """The undo of a change that changed nothing."""


def _no_hook(qualname: str) -> None:
    del qualname


#: Called with the class's qualified name at the start of every registration, before
#: :data:`_LOCK` is taken: ``_backends.activation`` sets it to activate frameworks that
#: should be active (an activation takes :data:`_LOCK`, so the lock order is a framework's
#: lock, then the registry's). It raises :class:`RegistrationError` to refuse the
#: registration.
_before_register: Callable[[str], None] = _no_hook


def set_before_register(hook: Callable[[str], None]) -> None:
    """Make :func:`register` call ``hook(qualname)`` first, outside the registry's lock."""
    global _before_register
    _before_register = hook


#: The fastest lookup of a node type by exact type (walkers use it directly).
get_node_type = _BY_TYPE.get
#: The node type registered (or built in) under a name or alias, or ``None``; never imports
#: (:func:`class_for_name` says which names stand for a registered class).
node_for_name = _BY_NAME.get


def node_type_for(cls: type) -> NodeType | None:
    """The node type of ``cls``, or ``None`` if ``cls`` is a leaf type: the walkers' decision.

    A namedtuple class seen for the first time becomes a node type here; any other type not
    registered is remembered as a leaf type (:data:`LEAF_TYPES`). No lock (walkers run inside
    ``torch.compile``, which cannot trace one): a new leaf type is recorded, then the registry
    is read again, while a registration (:func:`_commit`) adds the class to the registry
    before it takes it out of ``LEAF_TYPES``; whichever runs second sees the other's write, so
    a class registered meanwhile is never left recorded as a leaf.
    """
    nt = _BY_TYPE.get(cls)
    if nt is None and cls not in LEAF_TYPES:
        if is_namedtuple_class(cls):
            # setdefault: a register_namedtuple that got there first keeps its node type.
            return _BY_TYPE.setdefault(cls, namedtuple_node(cls))
        LEAF_TYPES.add(cls)
        nt = _BY_TYPE.get(cls)
        if nt is not None:  # registered since the first look
            LEAF_TYPES.discard(cls)
    return nt


def registered_node(cls: type) -> NodeType | None:
    """The node type of a class registered through the API, or ``None``."""
    return _REGISTERED.get(cls)


def registered_nodes() -> Iterator[NodeType]:
    """Every registered class's node type, in registration order."""
    return iter(list(_REGISTERED.values()))


def _options(node: NodeType, name: str | None, aliases: tuple[str, ...]) -> tuple[object, ...]:
    """What was asked at registration, to tell an idempotent re-registration apart."""
    rebuild = None if node.info is None else node.info.rebuild
    evolution = None if node.info is None else node.info.evolution
    return (
        name,
        aliases,
        node.return_none_fields,
        node.static_fields,
        rebuild,
        evolution,
        node.pickle_by_name,
    )


def _check_aliases(cls: type, name: str | None, aliases: tuple[str, ...]) -> None:
    for alias in aliases:
        check_name(alias, cls, what="aliases=")
    if not aliases:
        return
    if name is None:
        raise RegistrationError(
            f"aliases= of {cls.__qualname__} are earlier names it loads under, so it needs a "
            f'name= to be written under too; add name="mypkg.{cls.__qualname__}".'
        )
    if name in aliases or len(set(aliases)) != len(aliases):
        raise RegistrationError(
            f"aliases= of {cls.__qualname__} must be distinct earlier names other than its "
            f"name={name!r}, got {list(aliases)!r}."
        )


def _taken(name: str, holder: str, node: NodeType, what: str) -> NameConflictError:
    """The one wording of a name (or alias) another class holds, here or in a framework."""
    return NameConflictError(
        f"the name {name!r} is taken by {holder}, so {node.qualname} cannot "
        f"have it as {what}; give one of them another name (a class takes a name or alias "
        "over only when its own class statement runs again, in the module that registered it)."
    )


def _holder(name: str, holder: NodeType) -> str:
    return holder.qualname + ("" if holder.name == name else f" (as an alias of {holder.name!r})")


def register(
    node: NodeType,
    origin: Origin,
    *,
    name: str | None,
    aliases: tuple[str, ...] = (),
    override: bool = False,
) -> NodeType:
    """Register ``node`` under ``name`` everywhere, atomically; return the node type in force.

    ``node`` is a new class node (:func:`~treeclass._core.nodes.class_node`), or the node type a
    namedtuple class already has (from :func:`node_type_for`): a namedtuple keeps its node
    type, so that structures made before it was named stay equal to those made after.
    ``aliases`` are earlier names the class also loads under (never written); they are
    checked against every name and alias, as ``name`` is.

    Raises:
        NameConflictError: the name or an alias belongs to another class (and this is not a
            re-run of its registration), or the class is already registered with other
            options.
        RegistrationError: a bad name or alias, or a backend refused the class; nothing was
            changed anywhere. Also: a framework backend whose activation failed failed again,
            or (the same registration again) a backend the class is missing from refused it
            again.
    """
    try:
        return _register(node, origin, name, aliases, override)
    except BaseException:
        _discard(node)
        raise


def _register(
    node: NodeType, origin: Origin, name: str | None, aliases: tuple[str, ...], override: bool
) -> NodeType:
    """:func:`register`, which forgets ``node``'s source if it raises."""
    cls = node.type
    if name is not None:
        check_name(name, cls)
    _check_aliases(cls, name, aliases)
    _before_register(node.qualname)  # before the lock: see _before_register
    with _LOCK:
        existing = _REGISTERED.get(cls)
        if existing is not None:
            if _options(existing, existing.name, existing.aliases) == _options(node, name, aliases):
                if existing is not node:
                    _discard(node)
                # The same registration again: retry the backends it is missing from.
                _retry_missing_in(existing)
                return existing
            raise NameConflictError(
                f"{node.qualname} is already registered with treeclass (name="
                f"{existing.name!r}, static={list(existing.static_fields)!r}, "
                f"return_none_fields={existing.return_none_fields}); a class is registered "
                "once, so register it with one set of options."
            )
        previous: NodeType | None = None
        if name is not None:
            holder = _BY_NAME.get(name)
            if holder is not None:
                if holder.origin is None or not origin.reruns(holder.origin):
                    raise _taken(name, _holder(name, holder), node, "its name")
                if holder.name == name:
                    previous = holder  # a re-run of the same definition: the newest class wins
        for alias in aliases:
            holder = _BY_NAME.get(alias)
            if holder is not None and (holder.origin is None or not origin.reruns(holder.origin)):
                raise _taken(alias, _holder(alias, holder), node, "an alias")
        unnamed = node.name
        node.name = name
        node.aliases = aliases
        names = () if name is None else (name, *aliases)
        change = Change(node, names, _drops(node, previous), override)
        try:
            for backend in _BACKENDS:
                _check(backend, change)
        except BaseException:
            node.name = unnamed
            node.aliases = ()
            raise
        _commit(change, origin, previous, unnamed)
        return node


def _take_names(node: NodeType, previous: NodeType | None) -> Callable[[], None]:
    """Point the node's name and aliases at it in :data:`_BY_NAME`; return how to undo it.

    A re-run of a class definition takes the earlier one's names; the aliases it does not
    declare are dropped (the earlier class's objects cannot be written, so nothing loads as it).
    """
    names: list[tuple[str, NodeType | None]] = []
    aliases: list[tuple[NodeType, tuple[str, ...]]] = []
    for n in (node.name, *node.aliases) if node.name is not None else ():
        holder = _BY_NAME.get(n)
        names.append((n, holder))
        _BY_NAME[n] = node
        if holder is not None and holder is not node and n in holder.aliases:
            aliases.append((holder, holder.aliases))
            holder.aliases = tuple(a for a in holder.aliases if a != n)
    if previous is not None and previous.aliases:
        for alias in previous.aliases:
            if _BY_NAME.get(alias) is previous:
                names.append((alias, previous))
                del _BY_NAME[alias]
        aliases.append((previous, previous.aliases))
        previous.aliases = ()

    def undo() -> None:
        for n, holder in reversed(names):
            if holder is None:
                _BY_NAME.pop(n, None)
            else:
                _BY_NAME[n] = holder
        for holder, held in reversed(aliases):
            holder.aliases = held

    return undo


def _commit(change: Change, origin: Origin, previous: NodeType | None, unnamed: str | None) -> None:
    """Register the class in the embedded registry, then in every backend; undo on failure."""
    node = change.node
    cls = node.type
    node.origin = origin
    _REGISTERED[cls] = node
    undo_names = _take_names(node, previous) if node.name is not None else nothing
    if previous is not None:
        previous.superseded = True  # its objects are refused by every serializer now
    _BY_TYPE[cls] = node
    LEAF_TYPES.discard(cls)  # after _BY_TYPE: see node_type_for
    done: list[tuple[Backend, Undo]] = []
    try:
        # Backends that can undo a registration first, JAX (which cannot) last.
        for backend in sorted(_BACKENDS, key=lambda b: not b.can_unregister):
            done.append((backend, backend.add(change)))
    except BaseException:
        for backend, undo in reversed(done):
            try:
                undo()
            except Exception as e:  # pragma: no cover - best effort
                warnings.warn(
                    f"treeclass could not undo the {backend.name} registration of "
                    f"{node.qualname}: {e}",
                    RuntimeWarning,
                    stacklevel=3,
                )
        del _REGISTERED[cls]
        node.origin = None
        undo_names()
        if previous is not None:
            previous.superseded = False
        node.name = unnamed
        node.aliases = ()
        if node.kind != "namedtuple":  # a namedtuple stays a node, as every namedtuple is
            del _BY_TYPE[cls]
        raise


def _discard(node: NodeType) -> None:
    """Forget the generated source of a node type that is not registered."""
    if node.generated is not None and node.origin is None:
        release(node.generated)


def activate_backend(
    backend: Backend, *, framework: bool = True
) -> list[tuple[NodeType, Exception]]:
    """Start mirroring the registry into ``backend`` and register every class so far.

    ``framework=False``: a mirror of treeclass's own (pickling by name), not listed by
    :func:`active_backends`. Returns the classes refused, with the error (kept for a retry),
    for the caller to report with :func:`warn_missing` once its state is settled (a warning
    may be an error, ``-W error``).
    """
    failed: list[tuple[NodeType, Exception]] = []
    with _LOCK:
        if any(b.name == backend.name for b in _BACKENDS):
            return failed
        _BACKENDS.append(backend)
        if not framework:
            _INTERNAL.add(backend.name)
        for node in list(_REGISTERED.values()):
            try:
                _add_standing(backend, node)
            except Exception as e:
                _MISSING[backend.name, node.type] = e
                failed.append((node, e))
    return failed


def warn_missing(backend_name: str, failed: list[tuple[NodeType, Exception]]) -> None:
    """Report each class a backend refused at its activation, saying how to retry.

    Logged at ``ERROR`` on the ``treeclass`` logger, then warned (:func:`report_failures`).
    """
    report_failures(
        [
            f"treeclass could not register {node.qualname} with {backend_name} "
            f"({type(e).__name__}: {e}), so it is not a {backend_name} pytree node; "
            "register it again with the same options, or call "
            "treeclass.activate_backends(), to retry."
            for node, e in failed
        ],
        stacklevel=3,
    )


def _retry_missing_in(node: NodeType) -> None:
    """Register ``node`` with every active backend that failed to take it (under the lock).

    Raises:
        RegistrationError: a backend refused it again (it stays missing there).
    """
    for backend in _BACKENDS:
        key = (backend.name, node.type)
        if key not in _MISSING:
            continue
        try:
            _add_standing(backend, node)
        except Exception as e:
            _MISSING[key] = e
            raise RegistrationError(
                f"treeclass could not register {node.qualname} with {backend.name} again "
                f"({type(e).__name__}: {e}), so it is still not a {backend.name} pytree node; "
                "fix the cause and register it again with the same options, or call "
                "treeclass.activate_backends()."
            ) from e
        del _MISSING[key]


def retry_missing() -> None:
    """Retry every class an active backend failed to take when it was activated.

    Raises:
        RegistrationError: the first class a backend refused again.
    """
    with _LOCK:
        for cls in dict.fromkeys(cls for _, cls in _MISSING):
            _retry_missing_in(_REGISTERED[cls])


def active_backends() -> tuple[str, ...]:
    """The names of the frameworks treeclass is mirroring its registry into.

    Example:
        >>> import treeclass as tc
        >>> isinstance(tc.active_backends(), tuple)
        True
    """
    with _LOCK:  # a backend being activated is listed once every class so far is registered
        return tuple(b.name for b in _BACKENDS if b.name not in _INTERNAL)


def name_of(cls: type) -> str | None:
    """The serialized name ``cls`` was registered under, or ``None``.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.NameOf")
        ... class NameOf:
        ...     x: int
        >>> tc.name_of(NameOf)
        'docs.NameOf'
    """
    node = _REGISTERED.get(cls)
    return None if node is None else node.name


def class_for_name(name: str) -> type | None:
    """The class registered under ``name``, or ``None``. Never imports anything.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.ClassFor")
        ... class ClassFor:
        ...     x: int
        >>> tc.class_for_name("docs.ClassFor") is ClassFor
        True
    """
    if name in BUILTIN_NAMES:
        return None
    node = _BY_NAME.get(name)
    return None if node is None else node.type


def is_registered(cls: type) -> bool:
    """Whether ``cls`` is registered with treeclass.

    Example:
        >>> import treeclass as tc
        >>> tc.is_registered(dict)
        False
    """
    return cls in _REGISTERED
