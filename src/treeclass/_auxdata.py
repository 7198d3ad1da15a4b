"""Per-class auxdata getstate / setstate: static values to a JSON-safe form and back.

Every registered class gets a generated pair (compiled once, on first use, with
:func:`treeclass._codegen.compile_source`) that is exact::

    setstate(json.loads(json.dumps(getstate(aux)))) == aux   # with the same types

State of a dataclass / attrs node (field names, not positions, so old blobs keep loading)::

    {"data": [names of the fields that are children, in order],
     "none": [names of the data fields that were None and are not children],
     "static": {static field name: encoded value}}

State of a namedtuple node: ``{"fields": [field names]}``.

Encoded static values (every non-scalar is a one-key object naming its type, so a tuple comes
back a tuple and a list a list at every depth)::

    None, true/false, a str, a finite float, an int in (-2**53, 2**53)  -> themselves
    [v, ...]                           a list
    {"tuple": [v, ...]}                a tuple
    {"dict": {"k": v, ...}}            a dict with str keys (keys sorted)
    {"frozenset": [v, ...]}            a frozenset (items in canonical-JSON order)
    {"bytes": "base64"}                bytes
    {"int": "-0x1f..."}                an int outside (-2**53, 2**53), in hex (any size)
    {"float": "nan" | "inf" | "-inf"}  a non-finite float
    {"registered": [name, v]}          a value of a type registered with register_static()

Loading is strict: anything else is a :class:`~treeclass.TreespecLoadError` naming the class
and the field, and a name that is not registered is an :class:`~treeclass.UnregisteredNameError`.
"""

from __future__ import annotations

import math

from . import _statics
from ._errors import TreespecLoadError, UnregisteredNameError, UnserializableStaticError

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final

    from ._registry import NodeDef

__all__ = [
    "MAX_STATIC_DEPTH",
    "aux_from_bytes",
    "aux_to_bytes",
    "brief",
    "decode_static",
    "dumps_canonical",
    "encode_static",
    "loads_json",
    "make_getstate",
    "make_setstate",
]

#: How deeply static values may nest (containers inside containers).
MAX_STATIC_DEPTH: Final = 100
# Ints that every JSON reader holds exactly (IEEE doubles); others are written in hex.
_SAFE_INT: Final = 1 << 53
# Longest integer literal accepted when loading (CPython's own default limit since 3.11).
_MAX_INT_DIGITS: Final = 4300
_INT_HEX: Final = frozenset("0123456789abcdef")

_SUPPORTED: Final = "None, bool, int, float, str, bytes, tuple, list, dict with str keys, frozenset"


class _Unencodable(Exception):
    """Internal: a static value (or a part of it) has no JSON form."""

    def __init__(self, value: Any, problem: str) -> None:
        super().__init__(problem)
        self.value = value
        self.problem = problem


class _BadStatic(Exception):
    """Internal: encoded static data is malformed (or names an unregistered type)."""

    def __init__(self, problem: str, *, unregistered: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.unregistered = unregistered


def brief(value: Any, limit: int) -> str:
    """``repr(value)`` cut to about ``limit`` characters, safe for any value (for messages)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long for str(), or a deep nesting
        text = f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _type_name(t: type) -> str:
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


# --- canonical JSON ---------------------------------------------------------------------------

_ENCODE: Callable[[Any], str] | None = None
_DECODE: Callable[[str], Any] | None = None


def dumps_canonical(obj: Any) -> str:
    """Canonical, compact JSON text: sorted keys, no spaces, ASCII only, no nan.

    Example:
        >>> from treeclass._auxdata import dumps_canonical
        >>> dumps_canonical({"b": [1, 2.5], "a": None})
        '{"a":null,"b":[1,2.5]}'
    """
    enc = _ENCODE
    if enc is None:
        import json

        enc = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False).encode
        globals()["_ENCODE"] = enc
    return enc(obj)


def _parse_int(text: str) -> int:
    if len(text) > _MAX_INT_DIGITS:
        raise ValueError(f"an integer literal of {len(text)} digits is too long")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:
        raise ValueError(f"the number {text[:30]} does not fit in a float")
    return value


def _reject_constant(text: str) -> Any:
    raise ValueError(f"{text} is not valid JSON")


def loads_json(data: str | bytes | bytearray) -> Any:
    """Parse strict JSON (UTF-8 if bytes); raises ``ValueError`` or ``RecursionError``.

    Numbers that overflow a float (``1e999``), ``NaN`` / ``Infinity`` and integer literals
    longer than 4300 digits are rejected; callers turn every failure into a
    :class:`~treeclass.TreespecLoadError`.
    """
    dec = _DECODE
    if dec is None:
        import json

        dec = json.JSONDecoder(
            parse_float=_parse_float, parse_int=_parse_int, parse_constant=_reject_constant
        ).decode
        globals()["_DECODE"] = dec
    if isinstance(data, str):
        return dec(str(data))
    if isinstance(data, (bytes, bytearray)):
        return dec(bytes(data).decode("utf-8"))
    raise ValueError(f"expected JSON text as str or bytes, got {type(data).__name__}")


# --- static values ----------------------------------------------------------------------------


def _int_text(value: int) -> str:
    return hex(value)  # "0x1f" / "-0x1f": exact at any size (no digit limit for base 16)


def _frozenset_key(encoded: Any) -> str:
    return dumps_canonical(encoded)


def encode_static(value: Any, _depth: int = 0) -> Any:
    """Encode one static value as JSON-safe data (see the module docstring for the forms).

    Raises:
        _Unencodable: the value, or a value inside it, has no JSON form (the generated
            getstate turns this into an :class:`~treeclass.UnserializableStaticError`).

    Example:
        >>> from treeclass._auxdata import encode_static
        >>> encode_static((1, [b"x", float("inf")]))
        {'tuple': [1, [{'bytes': 'eA=='}, {'float': 'inf'}]]}
    """
    t: Any = value.__class__  # type() of an Any is Unknown to pyright
    if t is str or t is bool or value is None:
        return value
    if t is int:
        if -_SAFE_INT < value < _SAFE_INT:
            return value
        text = _int_text(value)
        if len(text) > 2 * _MAX_INT_DIGITS:  # what the loader accepts (see _decode_int)
            raise _Unencodable(
                value, f"it is an integer of {value.bit_length()} bits, more than a treespec holds"
            )
        return {"int": text}
    if t is float:
        if value - value == 0.0:
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if _depth >= MAX_STATIC_DEPTH:
        raise _Unencodable(
            value, f"it nests deeper than {MAX_STATIC_DEPTH} levels (or contains itself)"
        )
    d = _depth + 1
    if t is tuple:
        return {"tuple": [encode_static(v, d) for v in value]}
    if t is list:
        return [encode_static(v, d) for v in value]
    if t is dict:
        for k in value:
            kt: Any = k.__class__
            if kt is not str:
                raise _Unencodable(
                    k, f"it is a dict with a {_type_name(kt)} key {brief(k, 40)} (only str keys)"
                )
        return {"dict": {k: encode_static(value[k], d) for k in sorted(value)}}
    if t is bytes:
        import base64

        return {"bytes": base64.b64encode(value).decode("ascii")}
    if t is frozenset:
        items = [encode_static(v, d) for v in value]
        items.sort(key=_frozenset_key)
        return {"frozenset": items}
    sd = _statics.static_for_type(t)
    if sd is not None:
        try:
            converted = sd.to_json(value)
        except Exception as e:
            raise _Unencodable(
                value,
                f"its to_json converter (registered as {sd.name!r}) raised "
                f"{type(e).__name__}: {brief(str(e), 80)}",
            ) from e
        return {"registered": [sd.name, encode_static(converted, d)]}
    raise _Unencodable(value, f"it holds a value of type {_type_name(t)}")


def _decode_int(value: Any) -> int:
    v: Any = value
    if v.__class__ is str and 3 <= len(v) <= 2 * _MAX_INT_DIGITS:
        digits = v[3:] if v.startswith("-0x") else (v[2:] if v.startswith("0x") else "")
        if digits and _INT_HEX.issuperset(digits):
            return int(v, 16)
    raise _BadStatic(f'{{"int": {brief(v, 60)}}} is not an integer in hex like "0x1f" or "-0x1f"')


def _decode_tagged(data: dict[str, Any], d: int) -> Any:
    if len(data) != 1:
        raise _BadStatic(
            f"an object with keys {sorted(data)!r}; an encoded static value is an object "
            'with exactly one key naming its type ("tuple", "dict", ...)'
        )
    ((tag, v),) = data.items()
    vt: Any = v.__class__
    if tag == "tuple":
        if vt is list:
            return tuple([decode_static(x, d) for x in v])
    elif tag == "dict":
        if vt is dict:
            return {k: decode_static(x, d) for k, x in v.items()}
    elif tag == "int":
        return _decode_int(v)
    elif tag == "float":
        if vt is str:
            if v == "nan":
                return math.nan  # the same object each time, so that equal auxdata compare ==
            if v == "inf":
                return math.inf
            if v == "-inf":
                return -math.inf
    elif tag == "bytes":
        if vt is str:
            import base64
            import binascii

            try:
                return base64.b64decode(v.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError, ValueError):
                raise _BadStatic(f"{v[:40]!r} is not base64 text") from None
    elif tag == "frozenset":
        if vt is list:
            try:
                return frozenset([decode_static(x, d) for x in v])
            except TypeError:
                raise _BadStatic("a frozenset holds an unhashable item") from None
    elif tag == "registered":
        if vt is list and len(v) == 2 and v[0].__class__ is str:
            name: str = v[0]
            sd = _statics.static_for_name(name)
            if sd is None:
                raise _BadStatic(
                    f"it names the static type {name!r}, which is not registered in this "
                    "process; import the module that calls "
                    f'treeclass.register_static(..., name="{name}") before loading',
                    unregistered=True,
                )
            inner = decode_static(v[1], d)
            try:
                return sd.from_json(inner)
            except Exception as e:
                raise _BadStatic(
                    f"the from_json converter of static type {name!r} ({sd.qualname}) "
                    f"rejected {brief(inner, 80)}: {type(e).__name__}: {e}"
                ) from None
    else:
        raise _BadStatic(f"{tag[:60]!r} is not a known static value type")
    raise _BadStatic(f'the value of a {{"{tag}": ...}} object has the wrong form: {brief(v, 60)}')


def decode_static(data: Any, _depth: int = 0) -> Any:
    """Inverse of :func:`encode_static`.

    Raises:
        _BadStatic: ``data`` is not an encoded static value (the generated setstate turns
            this into a :class:`~treeclass.TreespecLoadError` naming the class and field).

    Example:
        >>> from treeclass._auxdata import decode_static
        >>> decode_static({"tuple": [1, [{"bytes": "eA=="}]]})
        (1, [b'x'])
    """
    t: Any = data.__class__
    if t is str or t is int or t is bool or data is None:
        return data
    if t is float:
        if data - data == 0.0:
            return data
        raise _BadStatic('a non-finite number (written {"float": "nan"} and the like)')
    if _depth >= MAX_STATIC_DEPTH:
        raise _BadStatic(f"the value nests deeper than {MAX_STATIC_DEPTH} levels")
    if t is list:
        return [decode_static(x, _depth + 1) for x in data]
    if t is dict:
        return _decode_tagged(data, _depth + 1)
    raise _BadStatic(f"a value of type {_type_name(t)} is not JSON data")


# --- errors -----------------------------------------------------------------------------------


def _unserializable(
    label: str, where: str, value: Any, e: _Unencodable | RecursionError
) -> Exception:
    if isinstance(e, RecursionError):
        problem = "it nests too deeply (or contains itself)"
        inner = value
    else:
        problem = e.problem
        inner = e.value
    inside = "" if inner is value else f" (inside its {_type_name(value.__class__)} value)"
    if isinstance(e, _Unencodable) and problem.startswith("it holds a value of type"):
        fix = (
            f"register the type with treeclass.register_static({inner.__class__.__qualname__}, "
            'name="mypkg.TypeName") (enums and frozen dataclasses need no converters, other '
            f"types to_json= and from_json=), or store a supported value ({_SUPPORTED})"
        )
    else:
        fix = f"store a value made of {_SUPPORTED}"
    return UnserializableStaticError(
        f"{where} of {label} cannot be serialized: {problem}{inside}, which has no JSON form; "
        f"{fix}."
    )


def _load_error(label: str, where: str, e: _BadStatic | RecursionError) -> TreespecLoadError:
    if isinstance(e, RecursionError):
        return TreespecLoadError(f"cannot load {where} of {label}: the value nests too deeply.")
    cls = UnregisteredNameError if e.unregistered else TreespecLoadError
    return cls(f"cannot load {where} of {label}: {e.problem}.")


def encode_for(label: str, where: str, value: Any) -> Any:
    """:func:`encode_static`, raising a public error that names ``where`` of ``label``."""
    try:
        return encode_static(value)
    except (_Unencodable, RecursionError) as e:
        raise _unserializable(label, where, value, e) from None


def decode_for(label: str, where: str, data: Any) -> Any:
    """:func:`decode_static` with a :class:`~treeclass.TreespecLoadError` naming ``where``."""
    try:
        return decode_static(data)
    except (_BadStatic, RecursionError) as e:
        raise _load_error(label, where, e) from None


# --- generated getstate / setstate ------------------------------------------------------------

_INDENT: Final = "    "


def make_getstate(node: NodeDef) -> Callable[[Any], Any]:
    """Generate ``getstate(aux) -> JSON-safe value`` for ``node``.

    Raises (from the generated function):
        UnserializableStaticError: a static value has no JSON form; the message names the
            class, the field, the value's type and the fix.
    """
    from ._codegen import compile_source

    info = node.info
    label = node.qualname
    if node.kind == "namedtuple":
        ns: dict[str, Any] = {"_FIELDS": list(info.data_fields)}
        source = 'def getstate(aux):\n    return {"fields": [*_FIELDS]}\n'
        return compile_source(source, ns, what="getstate", cls=node.cls, func="getstate")

    statics = info.static_fields

    def explain(aux: Any) -> Exception:
        for i, s in enumerate(statics, start=1):
            try:
                encode_static(aux[i])
            except (_Unencodable, RecursionError) as e:
                return _unserializable(label, f"static field {s!r}", aux[i], e)
        return UnserializableStaticError(f"the static fields of {label} cannot be serialized.")

    ns = {
        "_enc": encode_static,
        "_DATA": list(info.data_fields),
        "_explain": explain,
        "_Unencodable": _Unencodable,
    }
    lines = ["def getstate(aux):"]
    if statics:
        # Keys in sorted order: the state is canonical even where it is dumped unsorted.
        index = {s: i for i, s in enumerate(statics, start=1)}
        items = ", ".join(f"{s!r}: _enc(aux[{index[s]}])" for s in sorted(statics))
        lines.append(f"{_INDENT}try:")
        lines.append(f"{_INDENT * 2}static = {{{items}}}")
        lines.append(f"{_INDENT}except (_Unencodable, RecursionError):")
        lines.append(f"{_INDENT * 2}raise _explain(aux) from None")
    else:
        lines.append(f"{_INDENT}static = {{}}")
    if info.data_fields and not node.return_none_fields:
        lines.append(f"{_INDENT}nones = aux[0]")
        lines.append(f"{_INDENT}if nones:")
        lines.append(
            f"{_INDENT * 2}return {{'data': [n for n in _DATA if n not in nones], "
            "'none': list(nones), 'static': static}"
        )
    lines.append(f"{_INDENT}return {{'data': [*_DATA], 'none': [], 'static': static}}")
    source = "\n".join(lines) + "\n"
    return compile_source(source, ns, what="getstate", cls=node.cls, func="getstate")


def make_setstate(node: NodeDef) -> Callable[[Any], Any]:
    """Generate ``setstate(state) -> aux`` for ``node``, the exact inverse of its getstate.

    The generated function handles the state the class writes today in one step; any other
    state (a field added or removed since, None-valued fields, a malformed value) goes through
    a checked path that loads what can be loaded and raises a clear error otherwise.

    Raises (from the generated function):
        TreespecLoadError: the state does not fit the class; the message names the field.
        UnregisteredNameError: a static value names a type not registered here.
    """
    from ._codegen import compile_source

    info = node.info
    if node.kind == "namedtuple":
        ns: dict[str, Any] = {
            "_STATE": {"fields": list(info.data_fields)},
            "_slow": _namedtuple_setstate,
            "_node": node,
        }
        source = (
            "def setstate(state):\n"
            "    if state == _STATE:\n"
            "        return None\n"
            "    return _slow(_node, state)\n"
        )
        return compile_source(source, ns, what="setstate", cls=node.cls, func="setstate")

    statics = info.static_fields
    ns = {
        "_DATA": list(info.data_fields),
        "_dec": decode_static,
        "_BadStatic": _BadStatic,
        "_slow": _setstate_checked,
        "_node": node,
    }
    lines = ["def setstate(state):"]
    lines.append(
        f"{_INDENT}if state.__class__ is dict and len(state) == 3 and state.get('data') == _DATA "
        "and state.get('none') == []:"
    )
    lines.append(f"{_INDENT * 2}static = state.get('static')")
    lines.append(f"{_INDENT * 2}if static.__class__ is dict and len(static) == {len(statics)}:")
    if statics:
        values = "".join(f" _dec(static[{s!r}])," for s in statics)
        lines.append(f"{_INDENT * 3}try:")
        lines.append(f"{_INDENT * 4}return ((),{values})")
        lines.append(f"{_INDENT * 3}except (KeyError, _BadStatic, RecursionError):")
        lines.append(f"{_INDENT * 4}pass  # the checked path names the culprit")
    else:
        lines.append(f"{_INDENT * 3}return ((),)")
    lines.append(f"{_INDENT}return _slow(_node, state)")
    source = "\n".join(lines) + "\n"
    return compile_source(source, ns, what="setstate", cls=node.cls, func="setstate")


def _str_list(value: Any) -> bool:
    return value.__class__ is list and all(v.__class__ is str for v in value)


def _namedtuple_setstate(node: NodeDef, state: Any) -> None:
    label = node.qualname
    fields = list(node.info.data_fields)
    if not (state.__class__ is dict and len(state) == 1 and _str_list(state.get("fields"))):
        raise TreespecLoadError(
            f'the auxdata of namedtuple {label} must be {{"fields": [field names]}}, got '
            f"{brief(state, 80)}."
        )
    saved: list[str] = state["fields"]
    gone = [f for f in saved if f not in fields]
    new = [f for f in fields if f not in saved]
    if gone or new:
        detail = "; ".join(
            part
            for part in (
                f"field(s) {gone!r} no longer exist" if gone else "",
                f"field(s) {new!r} are new" if new else "",
            )
            if part
        )
        raise TreespecLoadError(
            f"namedtuple {label} was saved with fields {saved!r} but now has {fields!r} "
            f"({detail}); a namedtuple's fields cannot be renamed, added or removed between "
            "saving and loading, so load with the class as it was, or re-save."
        )
    raise TreespecLoadError(
        f"namedtuple {label} was saved with fields {saved!r} in another order than its "
        f"fields {fields!r}; load with the class as it was, or re-save."
    )


def _setstate_checked(node: NodeDef, state: Any) -> Any:
    """Load any state a version of ``node``'s class may have written, or raise clearly."""
    info = node.info
    label = node.qualname
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
        if name in data_fields or name in static_fields:
            continue
        raise TreespecLoadError(
            f"the saved auxdata of {label} names the field {name!r}, which the class no longer "
            f"has (its fields are {[f.name for f in info.fields]!r}); load with the class as "
            "it was, or re-save."
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
        if node.return_none_fields or f.default is not None:
            why = (
                "the class is registered with return_none_fields=True"
                if node.return_none_fields
                else "its default is not None"
            )
            raise TreespecLoadError(
                f"{label} has a data field {name!r} that the saved auxdata does not have, and "
                f"it cannot be filled in ({why}); only a new data field whose default is None "
                "(with return_none_fields=False) loads as None. Load with the class as it was, "
                "or re-save."
            )
        nones.add(name)
    if nones and node.return_none_fields:
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


# --- bytes (what jax.export stores) -----------------------------------------------------------


def aux_to_bytes(node: NodeDef, aux: Any) -> bytes:
    """Canonical UTF-8 JSON of ``node.getstate(aux)`` (what ``jax.export`` stores).

    Raises:
        UnserializableStaticError: a static value has no JSON form.
    """
    return dumps_canonical(node.getstate(aux)).encode("ascii")


def aux_from_bytes(node: NodeDef, data: bytes) -> Any:
    """Inverse of :func:`aux_to_bytes`.

    Raises:
        TreespecLoadError: ``data`` is not valid JSON or does not fit the class.
        UnregisteredNameError: a static value names a type not registered here.
    """
    try:
        state = loads_json(data)
    except (ValueError, RecursionError) as e:
        raise TreespecLoadError(
            f"the saved auxdata of {node.qualname} is not valid JSON: {e}"
        ) from None
    return node.setstate(state)
