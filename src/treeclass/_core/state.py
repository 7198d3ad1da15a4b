"""A registered class's auxdata as JSON-safe state, and back: exact, and tolerant of change.

State of a dataclass / attrs node (field names, not positions, so older documents keep
loading)::

    {"data": [names of the fields that are children, in order],
     "none": [names of the data fields that were None and are not children],
     "static": {static field name: encoded value}}

Every data field is a child, so ``getstate`` writes ``"none"`` empty; it is read from documents
written by earlier versions and from torch's contexts (torch's ``None`` form, built on this
codec in ``treeclass._backends.torch``).

State of a namedtuple node: ``{"fields": [field names]}``.

The state the class writes today loads in one step; any other (a field added or removed
since, ``None``-valued fields, a malformed value) takes a checked path that names the field.
A class's :class:`~treeclass._core.fields.Evolution` (``aliases``, ``removed_fields``, a
``migrate`` hook) runs first: hook, then earlier names mapped to today's, removed fields dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from .._errors import (
    TreespecLoadError,
    UnregisteredNameError,
    UnserializableStaticError,
    brief,
)
from .fields import ClassInfo, Evolution
from .json import EXACT_SCALARS
from .statics import (
    BadStatic,
    StaticCheck,
    Unencodable,
    decode_static,
    encode_static,
    static_check,
    type_label,
)

__all__ = [
    "Layout",
    "StateCodec",
    "decode_for",
    "encode_for",
    "fixed_children_error",
    "make_state_codec",
]


#: The way out every refusal of a state that no longer fits its class names.
_RESAVE: Final = "load with the class as it was, or re-save."


# --- messages -----------------------------------------------------------------------------------


def _unserializable(
    label: str, where: str, value: Any, e: Unencodable | RecursionError
) -> Exception:
    if isinstance(e, RecursionError):
        e = Unencodable(value, "it nests too deeply (or contains itself)")
    why = "" if e.has_form else ", which has no JSON form"
    inside = "" if e.value is value else f" (inside its {type_label(value.__class__)} value)"
    return UnserializableStaticError(
        f"{where} of {label} cannot be serialized: {e.problem}{inside}{why}; {e.fix}."
    )


def _load_error(label: str, where: str, e: BadStatic | RecursionError) -> TreespecLoadError:
    if isinstance(e, RecursionError):
        e = BadStatic("the value nests too deeply")
    cls = UnregisteredNameError if e.unregistered else TreespecLoadError
    return cls(f"cannot load {where} of {label}: {e.problem}.")


def encode_for(label: str, where: str, value: Any) -> Any:
    """:func:`~treeclass._core.statics.encode_static`, raising an error naming ``where``.

    Raises:
        UnserializableStaticError: the value has no JSON form.
    """
    try:
        return encode_static(value)
    except (Unencodable, RecursionError) as e:
        raise _unserializable(label, where, value, e) from None


def decode_for(label: str, where: str, data: Any) -> Any:
    """:func:`~treeclass._core.statics.decode_static`, raising an error naming ``where``.

    Raises:
        TreespecLoadError: the data is not an encoded static value.
        UnregisteredNameError: it names a static type that is not registered here.
    """
    try:
        return decode_static(data)
    except (BadStatic, RecursionError) as e:
        raise _load_error(label, where, e) from None


# --- the codec ----------------------------------------------------------------------------------


class Layout:
    """The children of a loaded node that are not one per data field of the class today.

    The document's children in its order (removed fields' included, so the leaves line up),
    with ``None`` children for absent fields whose default is ``None``; unflatten
    (:func:`treeclass._core.nodes.dropping_node`) drops the removed ones and gives each field
    in ``fills`` its default. Only a treeclass ``TreeSpec`` holds such a node.

    Attributes:
        plan: per child, ``True`` if the document holds it, ``False`` for an added ``None``.
        targets: per child, its data field's index, or ``-1`` (a removed field's).
        names: per child, its field name (how the node is written again).
        fills: the indices of absent data fields whose default is not ``None`` (no child).
        dropped: the names of the removed fields among the children.
        filled: the names of the fields in ``fills``.
    """

    __slots__ = ("dropped", "filled", "fills", "names", "plan", "targets")

    def __init__(
        self,
        plan: tuple[bool, ...],
        targets: tuple[int, ...],
        names: tuple[str, ...],
        fills: tuple[int, ...],
        data: tuple[str, ...],
    ) -> None:
        self.plan = plan
        self.targets = targets
        self.names = names
        self.fills = fills
        self.dropped = tuple(n for n, t in zip(names, targets) if t < 0)
        self.filled = tuple(data[t] for t in fills)


class StateCodec(NamedTuple):
    """A class's auxdata (the tuple of static values; every data field is a child) <-> state.

    Attributes:
        getstate: core auxdata -> state (``"none"`` is always empty).
        load: state -> ``(core auxdata, plan)``: which data fields the document has as
            children (``None`` when all of them), the others to be filled with ``None``; a
            :class:`Layout` when it also holds removed fields' children or lacks a data field
            whose default is not ``None``.
        child_names: for a class with an :class:`~treeclass._core.fields.Evolution`, state ->
            the names its children have today (after the migration hook and renames; removed
            fields keep theirs), or ``None`` for a state too malformed to say; ``None`` for
            other classes, whose children are named as the state says.
        check_statics: ``(values, saved, writing)``: the class's check of its static values
            (see :func:`treeclass._core.statics.static_check`), which every writer and reader runs.
        from_fields: the ``{field: value}`` of an instance pickled by any version of the
            class -> today's ``{field: value}`` (the same evolution as ``load``).
        static_check: ``() ->`` the :class:`~treeclass._core.statics.StaticCheck` that
            ``check_statics`` runs (``None``: nothing to check), for generated code that
            skips the call where the check provably passes.
    """

    getstate: Callable[[Any], Any]
    load: Callable[[Any], tuple[Any, tuple[bool, ...] | Layout | None]]
    child_names: Callable[[Any], list[str] | None] | None = None
    check_statics: Callable[[tuple[Any, ...], frozenset[str] | None, bool], None] | None = None
    from_fields: Callable[..., dict[str, Any]] | None = None
    static_check: Callable[[], StaticCheck | None] | None = None


def make_state_codec(info: ClassInfo, name: str | None = None) -> StateCodec:
    """The :class:`StateCodec` of a class: exact both ways, with the same types.

    ``name`` (the class's registered name) is only used in the messages of a class with an
    :class:`~treeclass._core.fields.Evolution`.
    """
    if info.kind == "namedtuple":
        return _namedtuple_codec(info)
    label = info.qualname
    statics = info.static_fields
    # Tuples (never mutated): the closures below keep them.
    data = info.data_fields
    data_list = list(data)
    index = {f: i for i, f in enumerate(data)}
    static_order = tuple(sorted(enumerate(statics), key=lambda p: p[1]))
    n_static = len(statics)

    # What the class could have produced (annotations, hashability, attrs validators):
    # worked out on first use, since annotations may name things defined after the class.
    checker: list[StaticCheck | None] = []

    def resolved_check() -> StaticCheck | None:
        """The class's static check, worked out once (on first use)."""
        if not checker:
            checker.append(static_check(info))
        return checker[0]

    def check_statics(
        values: tuple[Any, ...], saved: frozenset[str] | None = None, writing: bool = False
    ) -> None:
        """Refuse static values the class cannot hold (``saved``: the ones to check)."""
        check = checker[0] if checker else resolved_check()
        if check is not None:
            check.check(values, saved, writing)

    def encode(values: tuple[Any, ...]) -> dict[str, Any]:
        check_statics(values, None, True)  # what no loader would read back is never written
        try:
            return {s: encode_static(values[i]) for i, s in static_order}
        except (Unencodable, RecursionError):  # the first field (in class order) that fails
            for s, value in zip(statics, values):
                encode_for(label, f"static field {s!r}", value)
            raise  # pragma: no cover - one of them failed

    def getstate(aux: Any) -> Any:
        return {"data": list(data), "none": [], "static": encode(aux)}

    def fast(state: Any) -> tuple[Any, ...] | None:
        """The checked static values of a state exactly as the class writes it today."""
        if (
            state.__class__ is dict
            and len(state) == 3
            and state.get("data") == data_list
            and state.get("none") == []
        ):
            static = state.get("static")
            if static.__class__ is dict and len(static) == n_static:
                try:
                    values = tuple(
                        [
                            v if v.__class__ in EXACT_SCALARS else decode_static(v)
                            for v in map(static.__getitem__, statics)
                        ]
                    )
                except (KeyError, BadStatic, RecursionError):
                    return None  # the checked path names the culprit
                check_statics(values)
                return values
        return None

    def slow(
        state: Any, children: list[str] | None = None
    ) -> tuple[Any, tuple[bool, ...] | Layout | None]:
        """Any state a version of the class wrote (``children``: evolved, by today's names)."""
        absent, fills, values = _checked(info, state)
        check_statics(values, frozenset(state["static"]))
        if fills or children is not None:
            layout_of = state["data"] if children is None else children
            return values, _layout(layout_of, absent, data, index, fills)
        return values, (tuple(f not in absent for f in data) if absent else None)

    def load(state: Any) -> tuple[Any, tuple[bool, ...] | Layout | None]:
        values = fast(state)
        return (values, None) if values is not None else slow(state)

    evolution = info.evolution
    evolve = None if evolution is None else _evolver(info, evolution, name)

    def from_fields(
        fields: dict[str, Any], statics: tuple[str, ...] | None = None
    ) -> dict[str, Any]:
        return _from_fields(info, evolve, fields, check_statics, statics)

    if evolve is None or evolution is None:
        return StateCodec(getstate, load, None, check_statics, from_fields, resolved_check)

    # The class says how it evolved: earlier states go through ``evolve`` first.
    migrates = evolution.migrate is not None

    def evolved_load(state: Any) -> tuple[Any, tuple[bool, ...] | Layout | None]:
        values = None if migrates else fast(state)
        if values is not None:
            return values, None
        today, children = evolve(state)
        if children is None or len(children) == len(today["data"]):
            return load(today)
        return slow(today, children)

    def child_names(state: Any) -> list[str] | None:
        return evolve(state)[1]

    return StateCodec(
        getstate, evolved_load, child_names, check_statics, from_fields, resolved_check
    )


def _from_fields(
    info: ClassInfo,
    evolve: Callable[[Any], tuple[Any, list[str] | None]] | None,
    fields: dict[str, Any],
    check_statics: Callable[[tuple[Any, ...], frozenset[str] | None, bool], None],
    written_statics: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Today's ``{field: value}`` of an instance pickled as ``fields`` by a version of the class.

    The pickled fields are sorted into a state (static values encoded only for a ``migrate=``
    hook, which takes the JSON state) and go through the saved state's evolution
    (:func:`_evolver`, :func:`_checked`). ``written_statics``: the writer's static field
    names, recorded by the reducer; without them a field today's class does not know is
    taken as static if it has a JSON form.
    """
    label = info.qualname
    if fields.__class__ is not dict:
        raise TreespecLoadError(
            f"the pickled fields of {label} must be a dict of field names, got {brief(fields, 80)}."
        )
    evolution = info.evolution
    renames = {} if evolution is None else evolution.renames
    removed: frozenset[str] = frozenset() if evolution is None else evolution.removed
    migrates = evolution is not None and evolution.migrate is not None
    data_fields, static_fields = info.data_fields, info.static_fields
    data_names: list[str] = []
    static: dict[str, Any] = {}
    for n, value in fields.items():
        if n.__class__ is not str:
            raise TreespecLoadError(
                f"the pickled fields of {label} name a field {brief(n, 60)}, which is not a string."
            )
        today = renames.get(n, n)
        if today in data_fields or (n in removed and not migrates):
            data_names.append(n)
        elif today in static_fields:
            static[n] = value
        elif written_statics is not None:  # as the writer's class had it
            if n in written_statics:
                static[n] = value
            else:
                data_names.append(n)
        elif migrates:  # a field the hook knows about: JSON-safe values are static ones
            try:
                encode_static(value)
            except (Unencodable, RecursionError):
                data_names.append(n)
            else:
                static[n] = value
        else:
            static[n] = value  # not a field: _checked names it
    if migrates:
        static = {k: encode_for(label, f"static field {k!r}", v) for k, v in static.items()}
    state = {"data": data_names, "none": [], "static": static}
    children: list[str] | None = data_names
    if evolve is not None:
        state, children = evolve(state)
    data_values = [fields[n] for n in data_names]
    if state.__class__ is dict and _str_list(state.get("data")):
        # A pickle holds its fields by name: their order is not the class's business.
        order = {f: i for i, f in enumerate(data_fields)}
        state["data"] = sorted(state["data"], key=lambda f: order.get(f, -1))
    if children is None or len(children) != len(data_values):
        raise TreespecLoadError(
            f"the migrate hook of {label} returned a state whose data fields "
            f"{brief(state.get('data') if state.__class__ is dict else state, 120)} do not "
            f"match the pickled object's {data_names!r} one for one; a hook may rename data "
            "fields but not add or remove them (use removed_fields= and defaults for that)."
        )
    _, _, values = _checked(info, state, raw=not migrates)
    check_statics(values, frozenset(state["static"]), False)
    by_name = dict(zip(children, data_values))
    out: dict[str, Any] = {}
    statics = iter(values)
    for f in info.fields:
        if f.static:
            out[f.name] = next(statics)
        elif f.name in by_name:
            out[f.name] = by_name[f.name]
        else:
            out[f.name] = f.make_default() if f.has_default else None
    return out


def fixed_children_error(
    label: str, dropped: Sequence[str], filled: Sequence[str], what: str
) -> TreespecLoadError:
    """The error of a loader whose structure has one child per data field of the class today.

    A JAX, torch or optree structure and a compiled program's inputs cannot hold a saved node
    whose children are not one per data field: ``dropped``, the removed fields the saved
    state holds as children, and ``filled``, the data fields it lacks whose default is not
    ``None``. ``what`` says what was saved (``"the serialized function"``, ...).
    """
    parts: list[str] = []
    if dropped:
        parts.append(f"with the removed field(s) {list(dropped)!r} as children")
    if filled:
        parts.append(
            f"without its data field(s) {list(filled)!r}, added to the class since with a "
            "default other than None"
        )
    does = " and ".join(
        (["drop the removed field(s)' leaves"] if dropped else [])
        + (["give the field its default"] if filled else [])
    )
    return TreespecLoadError(
        f"{what} holds {label} {' and '.join(parts)}: a JAX, torch or optree structure has one "
        "child per data field (and a compiled program a fixed set of inputs), so it cannot "
        "take the change. treeclass.treespec_loads (with to=None), treeclass.load and "
        f"treeclass.orbax.restore {does}; otherwise save (export) it again with the class as it "
        "is now, or load it with the class as it was."
    )


def _layout(
    children: list[str],
    absent: set[str],
    data: tuple[str, ...],
    index: dict[str, int],
    fills: set[str] | frozenset[str] = frozenset(),
) -> Layout:
    """The :class:`Layout` of a document whose children are not one per data field today.

    ``children``: the document's, by today's names (removed fields' included); ``absent``:
    fields that become ``None`` children, each just before the next held field in class
    order (so the node is written in class order again); ``fills``: fields given defaults.
    """
    pending = [index[f] for f in data if f in absent]
    plan: list[bool] = []
    targets: list[int] = []
    names: list[str] = []
    p = 0
    for n in children:
        t = index.get(n, -1)
        if t >= 0:
            while p < len(pending) and pending[p] < t:
                plan.append(False)
                targets.append(pending[p])
                names.append(data[pending[p]])
                p += 1
        plan.append(True)
        targets.append(t)
        names.append(n)
    for t in pending[p:]:
        plan.append(False)
        targets.append(t)
        names.append(data[t])
    fill = tuple(sorted(index[f] for f in fills))
    return Layout(tuple(plan), tuple(targets), tuple(names), fill, data)


def _evolver(
    info: ClassInfo, evolution: Evolution, name: str | None
) -> Callable[[Any], tuple[Any, list[str] | None]]:
    """Make ``evolve(state) -> (state today, children)`` for a class that evolved.

    ``state today``: after the migrate hook, earlier names mapped to today's, removed fields
    left out. ``children``: the document's children by today's names, removed ones included
    (``None`` for a malformed state, which the checked path then reports).
    """
    label = info.qualname
    called = label if name is None else f"{label} (registered as {name!r})"
    renames = evolution.renames
    removed = evolution.removed
    migrate = evolution.migrate

    def rename(key: str, names: list[str]) -> list[str]:
        if not renames:
            return names
        out = [renames.get(n, n) for n in names]
        if out != names and len(set(out)) != len(out):
            both = sorted({n for n in names if n in renames and renames[n] in names})
            raise TreespecLoadError(
                f'"{key}" in the saved auxdata of {label} names both field(s) '
                f"{[renames[n] for n in both]!r} and their earlier name(s) {both!r}; a saved "
                "state holds each field once."
            )
        return out

    def evolve(state: Any) -> tuple[Any, list[str] | None]:
        if migrate is not None:
            try:
                state = migrate(state)
            except Exception as e:
                raise TreespecLoadError(
                    f"the migrate hook of {called} raised {type(e).__name__}: "
                    f"{str(e)[:200]} on the saved state {brief(state, 200)}; fix the hook "
                    "so that it returns the state to load (or raises for states it cannot "
                    "convert)."
                ) from e
        if state.__class__ is not dict or set(state) != {"data", "none", "static"}:
            return state, None
        saved_data, saved_none, saved_static = state["data"], state["none"], state["static"]
        if not (_str_list(saved_data) and _str_list(saved_none)) or (
            saved_static.__class__ is not dict
        ):
            return state, None
        children = rename("data", saved_data)
        none = rename("none", saved_none)
        static_names = rename("static", list(saved_static))
        static = dict(zip(static_names, saved_static.values()))
        kept = children
        if removed:
            kept = [n for n in children if n not in removed]
            none = [n for n in none if n not in removed]
            static = {k: v for k, v in static.items() if k not in removed}
        return {"data": kept, "none": none, "static": static}, children

    return evolve


def _str_list(value: Any) -> bool:
    return value.__class__ is list and all(v.__class__ is str for v in value)


def _namedtuple_codec(info: ClassInfo) -> StateCodec:
    fields = list(info.data_fields)
    label = info.qualname

    def getstate(aux: Any) -> Any:
        return {"fields": list(fields)}

    def load(state: Any) -> tuple[None, None]:
        if state == {"fields": fields}:
            return None, None
        if not (state.__class__ is dict and len(state) == 1 and _str_list(state.get("fields"))):
            raise TreespecLoadError(
                f'the auxdata of namedtuple {label} must be {{"fields": [field names]}}, got '
                f"{brief(state, 80)}."
            )
        saved: list[str] = state["fields"]
        gone = [f for f in saved if f not in fields]
        new = [f for f in fields if f not in saved]
        if gone or new:
            parts = [
                f"field(s) {gone!r} no longer exist" if gone else "",
                f"field(s) {new!r} are new" if new else "",
            ]
            raise TreespecLoadError(
                f"namedtuple {label} was saved with fields {brief(saved, 200)} but now has "
                f"{fields!r} ({'; '.join(p for p in parts if p)}); a namedtuple's fields cannot "
                f"be renamed, added or removed between saving and loading, so {_RESAVE}"
            )
        raise TreespecLoadError(
            f"namedtuple {label} was saved with fields {saved!r} in another order than its "
            f"fields {fields!r}; {_RESAVE}"
        )

    return StateCodec(getstate, load)


def _no_default(label: str, kind: str, name: str, raw: bool) -> TreespecLoadError:
    return TreespecLoadError(
        f"{label} has a {kind} field {name!r} that the saved {'object' if raw else 'auxdata'} "
        f"does not have, and it has no default to fill it in; give the field a default, {_RESAVE}"
    )


def _checked(
    info: ClassInfo, state: Any, *, raw: bool = False
) -> tuple[set[str], set[str], tuple[Any, ...]]:
    """Load any state a version of the class may have written, or raise clearly.

    Returns the absent data fields that become ``None`` children, those that take another
    default, and the static values (``raw``: a pickle's values, not their JSON form).
    """
    label = info.qualname
    if state.__class__ is not dict or set(state) != {"data", "none", "static"}:
        got = sorted(state) if state.__class__ is dict else state.__class__.__name__
        raise TreespecLoadError(
            f'the auxdata of {label} must be an object with keys "data", "none" and "static", '
            f"got {brief(got, 80)}."
        )
    data, none, static = state["data"], state["none"], state["static"]
    for key, value in (("data", data), ("none", none)):
        if not _str_list(value) or len(set(value)) != len(value):
            raise TreespecLoadError(
                f'"{key}" in the auxdata of {label} must be a list of distinct field names, '
                f"got {brief(value, 80)}."
            )
    if static.__class__ is not dict:
        raise TreespecLoadError(
            f'"static" in the auxdata of {label} must be an object, got {brief(static, 80)}.'
        )
    data_fields = info.data_fields
    static_fields = info.static_fields
    for name in (*data, *none, *static):
        if name not in data_fields and name not in static_fields:
            raise TreespecLoadError(
                f"the saved auxdata of {label} names the field {brief(name, 100)}, which the "
                f"class no longer has (its fields are {[f.name for f in info.fields]!r}); if "
                "it was renamed, give the field aliases=(<old name>,) (treeclass.field), if it "
                f"was removed, list it in removed_fields= of the class; or {_RESAVE}"
            )
    for name in (*data, *none):
        if name in static_fields:
            raise TreespecLoadError(
                f"field {name!r} of {label} was a data field when this was saved but is static "
                f"now; {_RESAVE}"
            )
    for name in static:
        if name in data_fields:
            raise TreespecLoadError(
                f"field {name!r} of {label} was static when this was saved but is a data field "
                f"now; {_RESAVE}"
            )
    clash = set(data) & set(none)
    if clash:
        raise TreespecLoadError(
            f"the auxdata of {label} lists field(s) {sorted(clash)!r} both as children and as None."
        )
    if data != [f for f in data_fields if f in data]:
        raise TreespecLoadError(
            f"the data fields of {label} were saved in the order {data!r}, which differs from "
            f"the class's order {list(data_fields)!r}; {_RESAVE}"
        )
    nones = set(none)
    fills: set[str] = set()
    for name in data_fields:
        if name in nones or name in data:
            continue
        f = info.field(name)
        if f.default is None:
            nones.add(name)
        elif not f.has_default:
            raise _no_default(label, "data", name, raw)
        else:
            fills.add(name)
    values: list[Any] = []
    for name in static_fields:
        if name in static:
            v = static[name]
            values.append(v if raw else decode_for(label, f"static field {name!r}", v))
            continue
        f = info.field(name)
        if not f.has_default:
            raise _no_default(label, "static", name, raw)
        values.append(f.make_default())
    return nones, fills, tuple(values)
