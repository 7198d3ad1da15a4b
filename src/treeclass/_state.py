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

``setstate`` handles the state the class writes today in one step; any other state (a field
added or removed since, ``None``-valued fields, a malformed value) takes a checked path that
loads what can be loaded and raises an error naming the field otherwise.

A class that declares how it evolved (renamed fields' ``aliases``, ``removed_fields``, a
``migrate`` hook: its :class:`~treeclass._fields.Evolution`) gets a codec that first runs the
hook, then maps earlier field names to today's and drops removed fields, and then loads the
result the same way. Classes without one get the codec above, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ._errors import (
    TreespecLoadError,
    UnregisteredNameError,
    UnserializableStaticError,
    brief,
)
from ._fields import ClassInfo, Evolution
from ._statics import SUPPORTED, BadStatic, Unencodable, decode_static, encode_static, type_label

__all__ = ["Layout", "LoadPlan", "StateCodec", "decode_for", "encode_for", "make_state_codec"]

GetState = Callable[[Any], Any]
# Static values that decode as themselves (not float: it may be a nan a migrate hook made).
_SCALARS: Final = frozenset((str, int, bool, type(None)))
SetState = Callable[[Any], Any]


# --- messages -----------------------------------------------------------------------------------


def _unserializable(
    label: str, where: str, value: Any, e: Unencodable | RecursionError
) -> Exception:
    if isinstance(e, RecursionError):
        problem, inner = "it nests too deeply (or contains itself)", value
        fix, why = f"store a value made of {SUPPORTED}", ", which has no JSON form"
    else:
        problem, inner, fix = e.problem, e.value, e.fix
        why = "" if e.has_form else ", which has no JSON form"
    inside = "" if inner is value else f" (inside its {type_label(value.__class__)} value)"
    return UnserializableStaticError(
        f"{where} of {label} cannot be serialized: {problem}{inside}{why}; {fix}."
    )


def _load_error(label: str, where: str, e: BadStatic | RecursionError) -> TreespecLoadError:
    if isinstance(e, RecursionError):
        return TreespecLoadError(f"cannot load {where} of {label}: the value nests too deeply.")
    cls = UnregisteredNameError if e.unregistered else TreespecLoadError
    return cls(f"cannot load {where} of {label}: {e.problem}.")


def encode_for(label: str, where: str, value: Any) -> Any:
    """:func:`~treeclass._statics.encode_static`, raising an error naming ``where``.

    Raises:
        UnserializableStaticError: the value has no JSON form.
    """
    try:
        return encode_static(value)
    except (Unencodable, RecursionError) as e:
        raise _unserializable(label, where, value, e) from None


def decode_for(label: str, where: str, data: Any) -> Any:
    """:func:`~treeclass._statics.decode_static`, raising an error naming ``where``.

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
    """The children of a node whose saved state holds removed data fields as children.

    The loaded node keeps the document's children in the document's order (the children of
    removed fields included, so that the leaves still line up), with ``None`` children added
    for data fields the document does not hold; its unflatten puts each child into its field
    and drops the removed ones (see :func:`treeclass._nodes.dropping_node`).

    Attributes:
        plan: for each child of the loaded node, whether it comes from the document (``True``)
            or is a ``None`` child added for a field the document does not hold (``False``).
        targets: for each child, the index of its data field, or ``-1`` (a removed field's:
            dropped on unflatten).
        names: each child's field name, removed ones included (how the node is written
            again).
    """

    __slots__ = ("names", "plan", "targets")

    def __init__(
        self, plan: tuple[bool, ...], targets: tuple[int, ...], names: tuple[str, ...]
    ) -> None:
        self.plan = plan
        self.targets = targets
        self.names = names

    def __repr__(self) -> str:
        return f"Layout(plan={self.plan!r}, targets={self.targets!r}, names={self.names!r})"


#: What a state's load says about the node's children besides its auxdata: ``None`` (the
#: document holds every data field as a child, in order), for each data field in order
#: whether the document holds it as a child (the others come back as ``None`` children:
#: written by a version of the class without them), or a :class:`Layout` (the document also
#: holds removed fields' children).
LoadPlan = "tuple[bool, ...] | Layout | None"


class StateCodec:
    """A class's auxdata (the tuple of static values; every data field is a child) <-> state.

    Attributes:
        getstate: core auxdata -> state (``"none"`` is always empty).
        load: state -> ``(core auxdata, plan)``: which data fields the document has as
            children (``None`` when all of them), the others to be filled with ``None``; a
            :class:`Layout` when it also holds removed fields' children.
        child_names: for a class with an :class:`~treeclass._fields.Evolution`, state ->
            the names its children have today (after the migration hook and renames; removed
            fields keep theirs), or ``None`` for a state too malformed to say; ``None`` for
            other classes, whose children are named as the state says.
    """

    __slots__ = ("child_names", "getstate", "load")

    def __init__(
        self,
        getstate: GetState,
        load: Callable[[Any], tuple[Any, tuple[bool, ...] | Layout | None]],
        child_names: Callable[[Any], list[str] | None] | None = None,
    ) -> None:
        self.getstate = getstate
        self.load = load
        self.child_names = child_names


def make_state_codec(info: ClassInfo, name: str | None = None) -> StateCodec:
    """The :class:`StateCodec` of a class: exact both ways, with the same types.

    ``name`` (the class's registered name) is only used in the messages of a class with an
    :class:`~treeclass._fields.Evolution`.
    """
    if info.kind == "namedtuple":
        nt_getstate, nt_setstate = _namedtuple_codec(info)

        def nt_load(state: Any) -> tuple[Any, None]:
            return nt_setstate(state), None

        return StateCodec(nt_getstate, nt_load)
    label = info.qualname
    statics = info.static_fields
    # Tuples (never mutated): the closures below keep them.
    data = info.data_fields
    data_list = list(data)
    static_order = tuple(sorted(enumerate(statics), key=lambda p: p[1]))
    n_static = len(statics)

    def explain(values: tuple[Any, ...]) -> Exception:
        for s, value in zip(statics, values):
            try:
                encode_static(value)
            except (Unencodable, RecursionError) as e:
                return _unserializable(label, f"static field {s!r}", value, e)
        return UnserializableStaticError(f"the static fields of {label} cannot be serialized.")

    def encode(values: tuple[Any, ...]) -> dict[str, Any]:
        try:
            return {s: encode_static(values[i]) for i, s in static_order}
        except (Unencodable, RecursionError):
            raise explain(values) from None

    def getstate(aux: Any) -> Any:
        return {"data": list(data), "none": [], "static": encode(aux)}

    def fast(state: Any) -> tuple[Any, ...] | None:
        """The static values of a state exactly as the class writes it today, else None."""
        if (
            state.__class__ is dict
            and len(state) == 3
            and state.get("data") == data_list
            and state.get("none") == []
        ):
            static = state.get("static")
            if static.__class__ is dict and len(static) == n_static:
                try:
                    return tuple(
                        [
                            v if v.__class__ in _SCALARS else decode_static(v)
                            for v in map(static.__getitem__, statics)
                        ]
                    )
                except (KeyError, BadStatic, RecursionError):
                    pass  # the checked path names the culprit
        return None

    # What the class could have produced (annotations, hashability, attrs validators):
    # worked out on first load, since annotations may name things defined after the class.
    checker: list[Callable[[tuple[Any, ...], frozenset[str] | None], None] | None] = []

    def checked(values: tuple[Any, ...], saved: frozenset[str] | None = None) -> tuple[Any, ...]:
        """``values`` after checking those the document gave (``saved``: all of them)."""
        if checker:
            check = checker[0]
        else:
            from ._kinds import static_check

            check = static_check(info)
            checker.append(check)
        if check is not None:
            check(values, saved)
        return values

    def load(state: Any) -> tuple[Any, tuple[bool, ...] | None]:
        values = fast(state)
        if values is not None:
            return checked(values), None
        absent, values = _checked(info, state)
        values = checked(values, frozenset(state["static"]))
        return values, (tuple(f not in absent for f in data) if absent else None)

    evolution = info.evolution
    if evolution is None:
        return StateCodec(getstate, load)

    # The class says how it evolved: earlier states go through ``evolve`` first.
    evolve = _evolver(info, evolution, name)
    migrates = evolution.migrate is not None
    index = {f: i for i, f in enumerate(data)}

    def evolved_load(state: Any) -> tuple[Any, tuple[bool, ...] | Layout | None]:
        if not migrates:
            values = fast(state)
            if values is not None:
                return values, None
        today, children = evolve(state)
        if children is None or len(children) == len(today["data"]):
            return load(today)
        absent, values = _checked(info, today)
        return values, _layout(children, absent, data, index)

    def child_names(state: Any) -> list[str] | None:
        return evolve(state)[1]

    return StateCodec(getstate, evolved_load, child_names)


def _layout(
    children: list[str], absent: set[str], data: tuple[str, ...], index: dict[str, int]
) -> Layout:
    """The :class:`Layout` of a document whose children include removed fields'.

    ``children`` are the document's children by today's names (in class order, as checked),
    ``absent`` the data fields it does not hold, each added as a ``None`` child just before
    the first held field that follows it in the class (so a node written from the layout
    lists its kept fields in class order again).
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
    return Layout(tuple(plan), tuple(targets), tuple(names))


def _evolver(
    info: ClassInfo, evolution: Evolution, name: str | None
) -> Callable[[Any], tuple[Any, list[str] | None]]:
    """Make ``evolve(state) -> (state today, children)`` for a class that evolved.

    ``state today`` is the saved state after the class's migration hook, with earlier field
    names mapped to today's and removed fields left out; ``children`` names the document's
    children by today's names, removed fields included (``None`` when the state is too
    malformed to tell: ``state today`` is then what the hook returned, for the checked path
    to report).
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


def _namedtuple_codec(info: ClassInfo) -> tuple[GetState, SetState]:
    fields = list(info.data_fields)
    label = info.qualname

    def getstate(aux: Any) -> Any:
        return {"fields": list(fields)}

    def setstate(state: Any) -> Any:
        if state == {"fields": fields}:
            return None
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
                "be renamed, added or removed between saving and loading, so load with the class "
                "as it was, or re-save."
            )
        raise TreespecLoadError(
            f"namedtuple {label} was saved with fields {saved!r} in another order than its "
            f"fields {fields!r}; load with the class as it was, or re-save."
        )

    return getstate, setstate


def _checked(info: ClassInfo, state: Any) -> tuple[set[str], tuple[Any, ...]]:
    """Load any state a version of the class may have written, or raise clearly.

    Returns the data fields the document does not hold as children (saved as ``None``, or new
    fields whose default is ``None``) and the static values.
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
                "was removed, list it in removed_fields= of the class; or load with the class "
                "as it was, or re-save."
            )
    for name in (*data, *none):
        if name in static_fields:
            raise TreespecLoadError(
                f"field {name!r} of {label} was a data field when this was saved but is static "
                "now; load with the class as it was, or re-save."
            )
    for name in static:
        if name in data_fields:
            raise TreespecLoadError(
                f"field {name!r} of {label} was static when this was saved but is a data field "
                "now; load with the class as it was, or re-save."
            )
    clash = set(data) & set(none)
    if clash:
        raise TreespecLoadError(
            f"the auxdata of {label} lists field(s) {sorted(clash)!r} both as children and as None."
        )
    if data != [f for f in data_fields if f in data]:
        raise TreespecLoadError(
            f"the data fields of {label} were saved in the order {data!r}, which differs from "
            f"the class's order {list(data_fields)!r}; load with the class as it was, or "
            "re-save."
        )
    nones = set(none)
    for name in data_fields:
        if name in nones or name in data:
            continue
        if info.field(name).default is not None:
            raise TreespecLoadError(
                f"{label} has a data field {name!r} that the saved auxdata does not have, and "
                "it cannot be filled in (its default is not None); only a new data field whose "
                "default is None loads (as None). Load with the class as it was, or re-save."
            )
        nones.add(name)
    values: list[Any] = []
    for name in static_fields:
        if name in static:
            values.append(decode_for(label, f"static field {name!r}", static[name]))
            continue
        f = info.field(name)
        if not f.has_default:
            raise TreespecLoadError(
                f"{label} has a static field {name!r} that the saved auxdata does not have, and "
                "it has no default to fill it in; give the field a default, load with the class "
                "as it was, or re-save."
            )
        values.append(f.make_default())
    return nones, tuple(values)
