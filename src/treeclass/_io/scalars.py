"""Python scalar leaves as JSON values: the one encoding of tc.save and treeclass.orbax.

A leaf whose type is exactly ``bool``, ``int``, ``float``, ``complex`` or ``str`` is stored by
value, as a type tag and a JSON value, as ``docs/files.md`` describes (the ints and floats in
the number codec of static values, :func:`treeclass._core.json.encode_int` and
:func:`~treeclass._core.json.encode_float`). Decoding is strict: a value of the wrong JSON type,
or a hex text that is not the canonical one or longer than the limit, is a ``ValueError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core.json import SAFE_INT as _SAFE_INT
from .._core.json import decode_float, decode_int, dumps_canonical, encode_float, encode_int
from .._errors import TreeclassTypeError, brief

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final

__all__ = [
    "SCALAR_TAGS",
    "ScalarDecodeError",
    "decode_scalar",
    "decode_scalars",
    "encode_scalar",
    "encode_scalars",
]

_TAGS: Final[dict[type, str]] = {
    bool: "bool",
    int: "int",
    float: "float",
    complex: "complex",
    str: "str",
}
#: The tags of the leaves stored by value (of exactly these types: not subclasses).
SCALAR_TAGS: Final = frozenset(_TAGS.values())

_NUMBERS: Final = frozenset((float, int))


def encode_scalar(leaf: Any, where: str) -> tuple[str, Any] | None:
    """``(tag, JSON value)`` of a scalar leaf, or ``None`` when ``leaf`` is not one.

    Args:
        leaf: the leaf.
        where: its key path, for messages.

    Raises:
        TreeclassTypeError: an int too long to store (see
            :func:`~treeclass._core.json.encode_int`).

    Example:
        >>> from treeclass._io.scalars import encode_scalar
        >>> encode_scalar(-0.0, "x"), encode_scalar(2**60, "n"), encode_scalar(1j, "z")
        (('float', -0.0), ('int', '0x1000000000000000'), ('complex', [0.0, 1.0]))
    """
    tag = _TAGS.get(leaf.__class__)
    if tag == "int":
        try:
            return tag, encode_int(leaf)
        except ValueError as e:
            raise TreeclassTypeError(f"the leaf at {where} is {e.args[0]}; {e.args[1]}.") from None
    if tag == "float":
        return tag, encode_float(leaf)
    if tag == "complex":
        return tag, [encode_float(leaf.real), encode_float(leaf.imag)]
    return None if tag is None else (tag, leaf)


def encode_scalars(
    leaves: Sequence[Any], where: Callable[[int], str]
) -> list[tuple[str, str] | None]:
    """For each leaf, ``(tag, canonical JSON text of its value)``, or ``None`` (not a scalar).

    :func:`encode_scalar` of each leaf with its value as
    :func:`~treeclass._core.json.dumps_canonical` writes it; the usual leaves (finite
    floats, ints in (-2**53, 2**53), bool, str) are done inline. ``where(i)``: leaf ``i``'s
    key path, for messages (called only for the leaves left to :func:`encode_scalar`).

    Raises:
        TreeclassTypeError: as :func:`encode_scalar`.

    Example:
        >>> from treeclass._io.scalars import encode_scalars
        >>> encode_scalars([1.5, "a", None, True], [".x", ".y", ".z", ".t"].__getitem__)
        [('float', '1.5'), ('str', '"a"'), None, ('bool', 'true')]
    """
    classes = set(map(type, leaves))
    if classes and classes <= _NUMBERS:  # only floats and ints: in bulk
        try:
            texts = list(map(repr, leaves))  # float.__repr__ and int.__repr__, as JSON writes
        except ValueError:  # an int too long to print: the loop below says so
            texts = ["nan"]
        if "n" not in "".join(texts) and (  # no "inf" or "nan" (nor "-inf")
            int not in classes or (min(leaves) > -_SAFE_INT and max(leaves) < _SAFE_INT)
        ):
            return list(zip(map(_TAGS.__getitem__, map(type, leaves)), texts))
    from json.encoder import encode_basestring_ascii as text_of  # (C) as dumps_canonical

    out: list[tuple[str, str] | None] = []
    append = out.append
    for i, leaf in enumerate(leaves):
        cls = leaf.__class__
        if cls is float:
            if leaf - leaf == 0.0:
                append(("float", float.__repr__(leaf)))
                continue
        elif cls is int:
            if -_SAFE_INT < leaf < _SAFE_INT:
                append(("int", int.__repr__(leaf)))
                continue
        elif cls is bool:
            append(("bool", "true" if leaf else "false"))
            continue
        elif cls is str:
            append(("str", text_of(leaf)))
            continue
        elif cls not in _TAGS:  # not a scalar (an array)
            append(None)
            continue
        scalar = encode_scalar(leaf, where(i) or "the root")
        append(None if scalar is None else (scalar[0], dumps_canonical(scalar[1])))
    return out


def decode_scalar(tag: str, value: Any) -> Any:
    """Inverse of :func:`encode_scalar`: the leaf ``value`` encodes under ``tag``.

    Raises:
        ValueError: ``tag`` is not a scalar tag, or ``value`` is not its encoding.

    Example:
        >>> from treeclass._io.scalars import decode_scalar
        >>> decode_scalar("int", "-0x20000000000000"), decode_scalar("complex", [1.5, "-inf"])
        (-9007199254740992, (1.5-infj))
    """
    cls = value.__class__
    if tag == "int":
        return decode_int(value)
    if tag == "float":
        return decode_float(value)
    if tag == "complex":
        if cls is not list or len(value) != 2:
            raise ValueError(f"{brief(value, 40)} is not a complex ([real, imag])")
        return complex(decode_float(value[0]), decode_float(value[1]))
    if tag == "bool" and cls is bool:
        return value
    if tag == "str" and cls is str:
        return value
    if tag not in SCALAR_TAGS:
        raise ValueError(f"{tag[:40]!r} is not a scalar type ({', '.join(sorted(SCALAR_TAGS))})")
    raise ValueError(f"{brief(value, 40)} is not a {tag}")


class ScalarDecodeError(ValueError):
    """A value :func:`decode_scalars` refused; ``index``: its position in the values."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


def decode_scalars(tags: Sequence[str], values: Sequence[Any]) -> list[Any]:
    """:func:`decode_scalar` of each ``(tag, value)`` pair; the usual values done inline.

    Raises:
        ScalarDecodeError: as :func:`decode_scalar`, with the position of the value.

    Example:
        >>> from treeclass._io.scalars import decode_scalars
        >>> decode_scalars(["float", "int", "str", "complex"], [1.5, 2, "a", [0.0, "inf"]])
        [1.5, 2, 'a', infj]
    """
    out: list[Any] = []
    append = out.append
    for i, (tag, value) in enumerate(zip(tags, values)):
        cls = value.__class__
        if tag == "float":
            if cls is float:
                append(value)
                continue
        elif tag == "int":
            if cls is int and -_SAFE_INT < value < _SAFE_INT:
                append(value)
                continue
        elif (tag == "str" and cls is str) or (tag == "bool" and cls is bool):
            append(value)
            continue
        try:
            append(decode_scalar(tag, value))
        except ValueError as e:
            raise ScalarDecodeError(str(e), i) from None
    return out
