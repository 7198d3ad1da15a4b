"""Path entries of the embedded registry, formatted the way JAX formats them.

``keystr((DictKey('k'), SequenceKey(0), GetAttrKey('x')))`` is ``"['k'][0].x"``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

__all__ = ["DictKey", "GetAttrKey", "KeyEntry", "KeyPath", "SequenceKey", "keystr"]


class SequenceKey:
    """The position of a child in a tuple or list: ``[0]``."""

    __slots__ = ("idx",)
    __module__ = "treeclass"
    __match_args__ = ("idx",)

    idx: int

    def __init__(self, idx: int) -> None:
        object.__setattr__(self, "idx", idx)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def __repr__(self) -> str:
        return f"SequenceKey(idx={self.idx!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is SequenceKey and other.idx == self.idx

    def __hash__(self) -> int:
        return hash((SequenceKey, self.idx))

    def __reduce__(self) -> tuple[type[SequenceKey], tuple[int]]:
        return (SequenceKey, (self.idx,))


class DictKey:
    """The key of a child in a dict: ``['k']``."""

    __slots__ = ("key",)
    __module__ = "treeclass"
    __match_args__ = ("key",)

    key: Hashable

    def __init__(self, key: Hashable) -> None:
        object.__setattr__(self, "key", key)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def __repr__(self) -> str:
        return f"DictKey(key={self.key!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is DictKey and other.key == self.key

    def __hash__(self) -> int:
        return hash((DictKey, self.key))

    def __reduce__(self) -> tuple[type[DictKey], tuple[Hashable]]:
        return (DictKey, (self.key,))


class GetAttrKey:
    """The field of a child in a registered class or namedtuple: ``.name``."""

    __slots__ = ("name",)
    __module__ = "treeclass"
    __match_args__ = ("name",)

    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __str__(self) -> str:
        return f".{self.name}"

    def __repr__(self) -> str:
        return f"GetAttrKey(name={self.name!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is GetAttrKey and other.name == self.name

    def __hash__(self) -> int:
        return hash((GetAttrKey, self.name))

    def __reduce__(self) -> tuple[type[GetAttrKey], tuple[str]]:
        return (GetAttrKey, (self.name,))


KeyEntry = SequenceKey | DictKey | GetAttrKey
KeyPath = tuple[KeyEntry, ...]

_SIMPLE_SEPARATOR: Final = ""


def _simple(key: object) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return key.name
    return str(key)


def keystr(path: Sequence[object], *, simple: bool = False, separator: str = "") -> str:
    """Format a key path the way ``jax.tree_util.keystr`` does.

    Args:
        path: a sequence of key entries, as given by :func:`tree_flatten_with_path`.
        simple: write bare keys (``k``, ``0``, ``x``) instead of ``['k']``, ``[0]``, ``.x``.
        separator: the text between entries.

    Returns:
        The path as a string.

    Example:
        >>> import treeclass as tc
        >>> tc.keystr((tc.DictKey("k"), tc.SequenceKey(0), tc.GetAttrKey("x")))
        "['k'][0].x"
        >>> tc.keystr((tc.DictKey("k"), tc.SequenceKey(0)), simple=True, separator="/")
        'k/0'
    """
    if simple:
        return separator.join(_simple(k) for k in path)
    return separator.join(str(k) for k in path)
