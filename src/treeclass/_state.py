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

__all__ = ["decode_for", "encode_for", "make_state_codec"]

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


def make_state_codec(info: ClassInfo, return_none_fields: bool) -> tuple[GetState, SetState]:
    """``(getstate, setstate)`` of a class: auxdata -> JSON-safe state, and its inverse.

    ``setstate(json.loads(json.dumps(getstate(aux)))) == aux``, with the same types.
    """
    if info.kind == "namedtuple":
        return _namedtuple_codec(info)
    label = info.qualname
    statics = info.static_fields
    # Tuples (never mutated): the closures below keep them.
    data = info.data_fields
    data_list = list(data)
    static_order = tuple(sorted(enumerate(statics, start=1), key=lambda p: p[1]))
    nones_possible = bool(data) and not return_none_fields

    def explain(aux: Any) -> Exception:
        for i, s in enumerate(statics, start=1):
            try:
                encode_static(aux[i])
            except (Unencodable, RecursionError) as e:
                return _unserializable(label, f"static field {s!r}", aux[i], e)
        return UnserializableStaticError(f"the static fields of {label} cannot be serialized.")

    def getstate(aux: Any) -> Any:
        try:
            static = {s: encode_static(aux[i]) for i, s in static_order}
        except (Unencodable, RecursionError):
            raise explain(aux) from None
        if nones_possible and aux[0]:
            nones = aux[0]
            return {
                "data": [n for n in data if n not in nones],
                "none": list(nones),
                "static": static,
            }
        return {"data": list(data), "none": [], "static": static}

    n_static = len(statics)

    def setstate(state: Any) -> Any:
        if (
            state.__class__ is dict
            and len(state) == 3
            and state.get("data") == data_list
            and state.get("none") == []
        ):
            static = state.get("static")
            if static.__class__ is dict and len(static) == n_static:
                try:
                    return ((), *[decode_static(static[s]) for s in statics])
                except (KeyError, BadStatic, RecursionError):
                    pass  # the checked path names the culprit
        return _setstate_checked(info, return_none_fields, state)

    return getstate, setstate


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


def _setstate_checked(info: ClassInfo, return_none_fields: bool, state: Any) -> Any:
    """Load any state a version of the class may have written, or raise clearly."""
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
        f = info.field(name)
        if return_none_fields or f.default is not None:
            why = (
                "the class is registered with return_none_fields=True"
                if return_none_fields
                else "its default is not None"
            )
            raise TreespecLoadError(
                f"{label} has a data field {name!r} that the saved auxdata does not have, and "
                f"it cannot be filled in ({why}); only a new data field whose default is None "
                "(with return_none_fields=False) loads as None. Load with the class as it was, "
                "or re-save."
            )
        nones.add(name)
    if nones and return_none_fields:
        raise TreespecLoadError(
            f"the saved auxdata of {label} has None-valued field(s) {sorted(nones)!r} outside "
            "the children, but the class is now registered with return_none_fields=True "
            "(None fields are children); load with the class as it was, or re-save."
        )
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
    return (tuple(n for n in data_fields if n in nones), *values)
