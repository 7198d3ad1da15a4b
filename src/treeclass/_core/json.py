"""Canonical JSON out, strict JSON in: the only place treeclass reads or writes JSON text.

Reading treats the text as hostile: duplicate object keys, ``NaN``/``Infinity``, numbers that
overflow a float and integer literals longer than Python prints are refused, and so is a
nesting too deep for the parser, so every failure is one ``ValueError`` that callers turn into
a treeclass error (:class:`~treeclass.TreespecLoadError`, :class:`~treeclass.FileLoadError`).
:func:`loads_strict` is the one strict loader: every reader of JSON a user hands treeclass
(treespec documents, file headers, torch's treespec JSON, ``treeclass inspect``) parses with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_INT_DIGITS", "dumps_canonical", "loads_strict"]

#: Longest integer literal accepted (CPython's own default ``int`` <-> ``str`` limit).
MAX_INT_DIGITS: Final = 4300

_encode: Callable[[Any], str] | None = None
_decode: Callable[[str], Any] | None = None


def dumps_canonical(obj: Any) -> str:
    """Canonical, compact JSON text: sorted keys, no spaces, ASCII only, no nan.

    Example:
        >>> from treeclass._core.json import dumps_canonical
        >>> dumps_canonical({"b": [1, 2.5], "a": None})
        '{"a":null,"b":[1,2.5]}'
    """
    global _encode
    if _encode is None:
        import json

        _encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False).encode
    return _encode(obj)


def _parse_int(text: str) -> int:
    if len(text) <= MAX_INT_DIGITS:  # the usual case, one comparison
        return int(text)
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(
            f"an integer literal of {digits} digits is longer than {MAX_INT_DIGITS} digits"
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:
        raise ValueError(f"the number {text[:30]} does not fit in a float")
    return value


def _reject_constant(text: str) -> Any:
    raise ValueError(f"{text} is not valid JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the object key {key[:60]!r} appears twice")
            seen.add(key)
    return obj


def loads_strict(data: str | bytes | bytearray) -> Any:
    """Parse strict JSON (UTF-8 if bytes); any problem is a ``ValueError`` saying what.

    Example:
        >>> from treeclass._core.json import loads_strict
        >>> loads_strict('{"a": [1, 2.5]}')
        {'a': [1, 2.5]}
        >>> loads_strict('{"a": 1, "a": 2}')
        Traceback (most recent call last):
        ...
        ValueError: the object key 'a' appears twice
    """
    global _decode
    if _decode is None:
        import json

        _decode = json.JSONDecoder(
            parse_float=_parse_float,
            parse_int=_parse_int,
            parse_constant=_reject_constant,
            object_pairs_hook=_object,
        ).decode
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8")  # a UnicodeDecodeError is a ValueError
    elif not isinstance(data, str):
        raise ValueError(f"expected JSON text as str or bytes, got {type(data).__name__}")
    try:
        return _decode(str(data))
    except RecursionError:
        raise ValueError("it nests too deeply") from None
