"""Canonical JSON out, strict JSON in: the only place treeclass reads or writes JSON text.

Reading treats the text as hostile: duplicate object keys, ``NaN``/``Infinity``, numbers that
overflow a float, integer literals longer than Python prints and too deep nesting are all one
``ValueError``, which callers turn into a treeclass error. Every reader parses with
:func:`loads_strict`, or where speed matters with :func:`loads_checked` (C speed, duplicate
keys found by counting) or :func:`strict_scanner` (the strict parser at an offset).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any, Final, TypeVar

from .._errors import brief

_T = TypeVar("_T")

__all__ = [
    "EXACT_SCALARS",
    "FLOAT_WORDS",
    "MAX_INT_DIGITS",
    "SAFE_INT",
    "SCALAR_TYPES",
    "census",
    "decode_float",
    "decode_int",
    "dumps_canonical",
    "encode_float",
    "encode_int",
    "loads_strict",
    "no_duplicates",
    "strict_scanner",
]

#: The classes of the scalar values the parsers make (immutable: a value of one of them can be
#: shared by everything that read it).
SCALAR_TYPES: Final = frozenset((str, int, float, bool, type(None)))
#: Those whose equal values are the same value (not float: ``0.0 == -0.0``; and a nan): a
#: static value of one of them is its own JSON form, and equal states holding only these
#: give equal auxdata.
EXACT_SCALARS: Final = frozenset((str, int, bool, type(None)))

#: The most decimal digits of an int treeclass reads or writes, in any form (CPython's own
#: default ``int`` <-> ``str`` limit, ``sys.get_int_max_str_digits()``): what it reads it can
#: print, and write again.
MAX_INT_DIGITS: Final = 4300
_INT_LIMIT: Final = 10**MAX_INT_DIGITS
_MAX_HEX: Final = len(hex(_INT_LIMIT)) + 1  # the longest hex text, sign included
#: Ints in (-SAFE_INT, SAFE_INT) are JSON numbers (every JSON reader holds them exactly, as
#: IEEE doubles); the others are their hex text.
SAFE_INT: Final = 1 << 53
#: The JSON text of the floats that have no JSON number.
FLOAT_WORDS: Final = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

_encode: Callable[[Any], str] | None = None
_decode: Callable[[str], Any] | None = None
_scan: Callable[[str, int], tuple[Any, int]] | None = None
_scan_fast: Callable[[str, int], tuple[Any, int]] | None = None
_decode_fast: Callable[[str], Any] | None = None


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


# --- numbers: the one codec of the ints and floats of static values and scalar leaves ----------


def encode_int(value: int) -> int | str:
    """An int as JSON: itself in (-2**53, 2**53), else its ``hex()`` text (``"0x20000000000000"``).

    Raises:
        ValueError: more than :data:`MAX_INT_DIGITS` digits; its args are the problem and the
            fix, as every writer words them.
    """
    if -SAFE_INT < value < SAFE_INT:
        return value
    if not -_INT_LIMIT < value < _INT_LIMIT:
        raise ValueError(
            f"an integer of more than {MAX_INT_DIGITS:,} decimal digits (about "
            f"{value.bit_length():,} bits), more than treeclass stores (Python cannot print or "
            "parse it)",
            "store a smaller integer, or its text",
        )
    return hex(value)


def decode_int(value: Any) -> int:
    """Inverse of :func:`encode_int` (hex text as ``hex()`` writes it); else ``ValueError``."""
    if value.__class__ is int and -SAFE_INT < value < SAFE_INT:
        return value
    if value.__class__ is str and len(value) <= _MAX_HEX and value.lstrip("-")[:2] == "0x":
        try:
            n = int(value, 16)
        except ValueError:
            n = _INT_LIMIT
        # (an int in (-2**53, 2**53) is written bare: its hex text is not what encode_int writes)
        if not -SAFE_INT < n < SAFE_INT and -_INT_LIMIT < n < _INT_LIMIT and hex(n) == value:
            return n
    raise ValueError(
        f"{brief(value, 40)} is not an int: a number in (-2**53, 2**53), or beyond that the hex "
        f'text hex() writes ("0x20000000000000") of at most {MAX_INT_DIGITS:,} decimal digits'
    )


def encode_float(value: float) -> float | str:
    """A float as JSON: itself if finite, else its :data:`FLOAT_WORDS` word."""
    if value - value == 0.0:
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def decode_float(value: Any) -> float:
    """Inverse of :func:`encode_float` (nan is ``math.nan`` itself); else ``ValueError``."""
    if value.__class__ is float and value - value == 0.0:
        return value
    if value.__class__ is str and value in FLOAT_WORDS:
        return FLOAT_WORDS[value]
    raise ValueError(f"{brief(value, 40)} is not a float (a finite number, or nan, inf or -inf)")


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


def _strict() -> None:
    """Make the strict decoder (on first use: ``json`` is imported only when needed)."""
    global _decode, _scan, _scan_fast
    import json

    decoder = json.JSONDecoder(
        parse_float=_parse_float,
        parse_int=_parse_int,
        parse_constant=_reject_constant,
        object_pairs_hook=_object,
    )
    _decode = decoder.decode
    _scan = decoder.raw_decode
    # Integers parsed by the C scanner: Python refuses literals of more than its own limit
    # on digits itself (used where that limit is on and at most MAX_INT_DIGITS).
    _scan_fast = json.JSONDecoder(
        parse_float=_parse_float, parse_constant=_reject_constant, object_pairs_hook=_object
    ).raw_decode


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
    if _decode is None:
        _strict()
        assert _decode is not None
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8")  # a UnicodeDecodeError is a ValueError
    elif not isinstance(data, str):
        raise ValueError(f"expected JSON text as str or bytes, got {type(data).__name__}")
    try:
        return _decode(str(data))
    except RecursionError:
        raise ValueError("it nests too deeply") from None


def strict_scanner() -> Callable[[str, int], tuple[Any, int]]:
    """A function ``scan(text, pos)``: the JSON value that starts at ``text[pos]`` and its end.

    Parsed as :func:`loads_strict` parses it (no whitespace skipped before it, nothing after
    it looked at); ``ValueError`` (``RecursionError`` when too deep) if none starts there.
    Get one per text: the fastest depends on Python's limit on integer digits, which may
    change.

    Example:
        >>> from treeclass._core.json import strict_scanner
        >>> strict_scanner()('[1,{"a":[2]},3]', 3)
        ({'a': [2]}, 12)
    """
    if _scan is None or _scan_fast is None:
        _strict()
        assert _scan is not None and _scan_fast is not None
    # (Python 3.10 before 3.10.7 has no limit: 0, the hook.)
    limit = getattr(sys, "get_int_max_str_digits", int)()
    return _scan_fast if 0 < limit <= MAX_INT_DIGITS else _scan


def no_duplicates(colons: int, members: int, string_colons: int) -> bool:
    """Whether a value parsed from a text with ``colons`` ``:`` lost no duplicate object key.

    Args:
        colons: the number of ``:`` in the text.
        members: the number of members of all the value's objects (their ``len``).
        string_colons: the number of ``:`` in all its strings, object keys included.

    Every ``:`` of the text (which has no escape that could stand for one) separates a
    member from its key or stands in a string; a duplicate key makes its object one member
    shorter than the text wrote.
    """
    return colons == members + string_colons


def loads_checked(
    text: str,
    check: Callable[[Any], tuple[_T, int, int]],
    refuse: Callable[[ValueError], Exception],
) -> _T:
    """Parse JSON ``text`` at C speed and check it; a duplicate key is refused as when strict.

    The C parser keeps the last of duplicate keys; ``check(value)`` returns the census it
    counted, which :func:`no_duplicates` compares with the text. When a key was dropped (or
    the check failed on a value that may have had one), the text is parsed again by
    :func:`loads_strict`, which names the key; so it is from the start when Python's limit on
    integer digits is off or above :data:`MAX_INT_DIGITS`, or an escape may stand for a ``:``.

    Args:
        text: the JSON text.
        check: the reader's checks of the parsed value; raises its own ``ValueError``.
        refuse: the reader's error for text that is not strict JSON (the parser's error).
    """
    global _decode_fast
    # (Python 3.10 before 3.10.7 has no limit: 0, the strict path.)
    limit = getattr(sys, "get_int_max_str_digits", int)()
    if 0 < limit <= MAX_INT_DIGITS and "u003" not in text:
        if _decode_fast is None:
            import json

            # Python refuses integer literals of more than ``limit`` digits itself.
            _decode_fast = json.JSONDecoder(
                parse_float=_parse_float, parse_constant=_reject_constant
            ).decode
        try:
            doc = _decode_fast(text)
            result, members, string_colons = check(doc)
            if no_duplicates(text.count(":"), members, string_colons):
                return result
        except (ValueError, RecursionError):
            pass  # the strict parser's message, or the check's on its value
    try:
        doc = loads_strict(text)
    except ValueError as e:
        raise refuse(e) from None
    return check(doc)[0]  # the check's error again, if it raised


def census(value: Any) -> tuple[int, int]:
    """``(members, string colons)`` of a parsed JSON value (see :func:`no_duplicates`)."""
    members = 0
    colons = 0
    stack = [value]
    pop = stack.pop
    push = stack.extend
    while stack:
        v = pop()
        cls = v.__class__
        if cls is str:
            colons += v.count(":")
        elif cls is dict:
            members += len(v)
            colons += "".join(v).count(":")
            push(v.values())
        elif cls is list:
            push(v)
    return members, colons
