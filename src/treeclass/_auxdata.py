"""Per-class auxdata getstate / setstate: static values to a JSON-safe form and back.

FIRST VERSION (to be hardened by the serialization issue): the entry points and their
contract stay: ``setstate(json.loads(json.dumps(getstate(aux)))) == aux``, same types.

State of a dataclass / attrs node: ``{"data": [child field names], "none": [None field
names], "static": {field: encoded value}}``; of a namedtuple: ``{"fields": [...]}``.
"""

from __future__ import annotations

import math

from ._errors import TreespecLoadError, UnserializableStaticError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ._registry import NodeDef

__all__ = ["aux_from_bytes", "aux_to_bytes", "decode_static", "encode_static", "make_getstate", "make_setstate"]


def encode_static(value: Any, where: str) -> Any:
    """Encode one static value as JSON-safe data (tagged objects keep tuple, bytes, nan...)."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if math.isfinite(value):
            return value
        return {"float": repr(value)}
    if t is list:
        return [encode_static(v, where) for v in value]
    if t is tuple:
        return {"tuple": [encode_static(v, where) for v in value]}
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise UnserializableStaticError(
                    f"{where} holds a dict with a {type(k).__name__} key {k!r}; only str keys "
                    "can be serialized."
                )
            out[k] = encode_static(v, where)
        return {"dict": out}
    if t is bytes:
        import base64

        return {"bytes": base64.b64encode(value).decode("ascii")}
    if t is frozenset:
        import json

        items = [encode_static(v, where) for v in value]
        items.sort(key=lambda x: json.dumps(x, sort_keys=True))
        return {"frozenset": items}
    raise UnserializableStaticError(
        f"{where} holds a value of type {t.__module__}.{t.__qualname__}, which has no JSON form; "
        "use a str, number, tuple, list, dict or bytes, or register the type with "
        "treeclass.register_static()."
    )


def decode_static(data: Any, where: str) -> Any:
    """Inverse of :func:`encode_static`."""
    t = type(data)
    if data is None or t is bool or t is int or t is str or t is float:
        return data
    if t is list:
        return [decode_static(v, where) for v in data]
    if t is dict and len(data) == 1:
        ((tag, v),) = data.items()
        if tag == "float" and v in ("nan", "inf", "-inf"):
            return float(v)
        if tag == "tuple" and type(v) is list:
            return tuple(decode_static(x, where) for x in v)
        if tag == "dict" and type(v) is dict:
            return {k: decode_static(x, where) for k, x in v.items()}
        if tag == "bytes" and type(v) is str:
            import base64

            return base64.b64decode(v)
        if tag == "frozenset" and type(v) is list:
            return frozenset(decode_static(x, where) for x in v)
    raise TreespecLoadError(f"{where}: cannot decode static value {data!r}.")


def make_getstate(node: NodeDef) -> Callable[[Any], Any]:
    """Return ``getstate(aux) -> JSON-safe value`` for ``node``."""
    if node.kind == "namedtuple":
        fields = list(node.info.data_fields)
        return lambda aux: {"fields": fields}
    data = node.info.data_fields
    statics = node.info.static_fields
    label = node.qualname

    def getstate(aux: Any) -> Any:
        nones = aux[0]
        return {
            "data": [n for n in data if n not in nones],
            "none": list(nones),
            "static": {
                s: encode_static(v, f"static field {s!r} of {label}")
                for s, v in zip(statics, aux[1:])
            },
        }

    return getstate


def make_setstate(node: NodeDef) -> Callable[[Any], Any]:
    """Return ``setstate(value) -> aux`` for ``node``."""
    if node.kind == "namedtuple":
        return lambda state: None
    statics = node.info.static_fields
    label = node.qualname

    def setstate(state: Any) -> Any:
        try:
            values = tuple(
                decode_static(state["static"][s], f"static field {s!r} of {label}") for s in statics
            )
            return (tuple(state["none"]), *values)
        except (KeyError, TypeError) as e:
            raise TreespecLoadError(f"bad auxdata for {label}: {e}") from None

    return setstate


def aux_to_bytes(node: NodeDef, aux: Any) -> bytes:
    """Canonical UTF-8 JSON of ``node.getstate(aux)`` (what ``jax.export`` stores)."""
    import json

    return json.dumps(node.getstate(aux), separators=(",", ":"), sort_keys=True).encode()


def aux_from_bytes(node: NodeDef, data: bytes) -> Any:
    """Inverse of :func:`aux_to_bytes`; bad bytes raise :class:`TreespecLoadError`."""
    import json

    try:
        state = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise TreespecLoadError(f"bad auxdata bytes for {node.qualname}: {e}") from None
    return node.setstate(state)
