"""A registered class's auxdata as JSON-safe state, and back: exact, and tolerant of change.

State of a dataclass / attrs node (field names, not positions, so older documents keep
loading)::

    {"data": [names of the fields that are children, in order],
     "none": [names of the data fields that were None and are not children],
     "static": {static field name: encoded value}}

State of a namedtuple node: ``{"fields": [field names]}``.

``setstate`` handles the state the class writes today in one step; any other state (a field
added or removed since, ``None``-valued fields, a malformed value) takes a checked path that
loads what can be loaded and raises an error naming the field otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._errors import (
    TreespecLoadError,
    UnregisteredNameError,
    UnserializableStaticError,
    brief,
)
from ._fields import ClassInfo
from ._statics import SUPPORTED, BadStatic, Unencodable, decode_static, encode_static, type_label

__all__ = ["StateCodec", "decode_for", "encode_for", "make_state_codec"]

GetState = Callable[[Any], Any]
SetState = Callable[[Any], Any]


# --- messages -----------------------------------------------------------------------------------


def _unserializable(
    label: str, where: str, value: Any, e: Unencodable | RecursionError
) -> Exception:
    if isinstance(e, RecursionError):
        problem = "it nests too deeply (or contains itself)"
        inner = value
    else:
        problem = e.problem
        inner = e.value
    inside = "" if inner is value else f" (inside its {type_label(value.__class__)} value)"
    if isinstance(e, Unencodable) and problem.startswith("it holds a value of type"):
        fix = (
            f"register the type with treeclass.register_static({inner.__class__.__qualname__}, "
            'name="mypkg.TypeName") (enums and frozen dataclasses need no converters, other '
            f"types to_json= and from_json=), or store a supported value ({SUPPORTED})"
        )
    else:
        fix = f"store a value made of {SUPPORTED}"
    return UnserializableStaticError(
        f"{where} of {label} cannot be serialized: {problem}{inside}, which has no JSON form; "
        f"{fix}."
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

#: ``None``, or for each data field in order whether the document holds it as a child (the
#: others come back as ``None`` children: written by a version of the class without them).
Plan = "tuple[bool, ...] | None"


class StateCodec:
    """A class's auxdata <-> JSON-safe state, in the core form and in torch's.

    The core auxdata is the tuple of static values (every data field is a child). torch's,
    with ``return_none_fields=False``, is ``(nones, *statics)``: the names of the data fields
    that were ``None`` and are not children, which its state lists under ``"none"``.

    Attributes:
        getstate: core auxdata -> state (``"none"`` is always empty).
        load: state -> ``(core auxdata, plan)``: which data fields the document has as
            children (``None`` when all of them), the others to be filled with ``None``.
        torch_getstate: torch auxdata -> state.
        torch_setstate: state -> torch auxdata.
    """

    __slots__ = ("getstate", "load", "torch_getstate", "torch_setstate")

    def __init__(
        self,
        getstate: GetState,
        load: Callable[[Any], tuple[Any, tuple[bool, ...] | None]],
        torch_getstate: GetState,
        torch_setstate: SetState,
    ) -> None:
        self.getstate = getstate
        self.load = load
        self.torch_getstate = torch_getstate
        self.torch_setstate = torch_setstate


def make_state_codec(info: ClassInfo, return_none_fields: bool) -> StateCodec:
    """The :class:`StateCodec` of a class: exact both ways, with the same types."""
    if info.kind == "namedtuple":
        nt_getstate, nt_setstate = _namedtuple_codec(info)

        def nt_load(state: Any) -> tuple[Any, None]:
            return nt_setstate(state), None

        return StateCodec(nt_getstate, nt_load, nt_getstate, nt_setstate)
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

    # torch's auxdata carries the None fields' names only when it leaves them out.
    torch_skips = not return_none_fields and bool(data)

    def torch_getstate(aux: Any) -> Any:
        if not torch_skips:
            return getstate(aux)
        nones = aux[0]
        if nones:
            present = [n for n in data if n not in nones]
            return {"data": present, "none": list(nones), "static": encode(aux[1:])}
        return {"data": list(data), "none": [], "static": encode(aux[1:])}

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
                    return tuple([decode_static(static[s]) for s in statics])
                except (KeyError, BadStatic, RecursionError):
                    pass  # the checked path names the culprit
        return None

    # What the class could have produced (annotations, hashability, attrs validators):
    # worked out on first load, since annotations may name things defined after the class.
    checker: list[Callable[[tuple[Any, ...], frozenset[str] | None], None] | None] = []

    def checked(values: tuple[Any, ...], saved: frozenset[str] | None = None) -> tuple[Any, ...]:
        """``values`` after checking those the document gave (``saved``: all of them)."""
        if not checker:
            from ._kinds import static_check

            checker.append(static_check(info))
        check = checker[0]
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

    def torch_setstate(state: Any) -> Any:
        values = fast(state)
        if values is not None:
            values = checked(values)
            return ((), *values) if torch_skips else values
        absent, values = _checked(info, state)
        values = checked(values, frozenset(state["static"]))
        if not torch_skips:
            if absent:
                raise TreespecLoadError(
                    f"the saved auxdata of {label} has None-valued field(s) {sorted(absent)!r} "
                    "outside the children, but the class is now registered with "
                    "return_none_fields=True (None fields are children in torch); load it with "
                    "treeclass.treespec_loads, or with the class as it was, or re-save."
                )
            return values
        return (tuple(n for n in data if n in absent), *values)

    return StateCodec(getstate, load, torch_getstate, torch_setstate)


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
                f"class no longer has (its fields are {[f.name for f in info.fields]!r}); load "
                "with the class as it was, or re-save."
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
