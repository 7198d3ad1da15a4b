"""Path entries of the embedded registry, and the one rule for key-path text.

``keystr((DictKey('k'), SequenceKey(0), GetAttrKey('x')))`` is ``"['k'][0].x"``: a position
is ``[0]``, a dict key ``['k']`` (its ``repr`` in brackets), a field ``.name``.
:func:`index_entry` and :func:`attr_entry` are that rule; :func:`keystr`, the key classes'
``str``, the key paths read from a treespec document (:mod:`treeclass._treespec.treedoc`) and
so the tensor names of :func:`treeclass.save` files all use them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from operator import is_
from typing import Any, ClassVar, Final

__all__ = [
    "DictKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "SequenceKey",
    "attr_entry",
    "field_keys",
    "index_entry",
    "keystr",
    "mapping_keys",
    "sequence_keys",
]


def index_entry(key: object) -> str:
    """The key-path text of a child by position or dict key: ``[0]``, ``['k']``."""
    return f"[{key!r}]"


def attr_entry(name: str) -> str:
    """The key-path text of a registered class's or namedtuple's field: ``.name``."""
    return f".{name}"


class _Key:
    """The base of the key classes: immutable, one value, compared by class and value."""

    __slots__ = ()
    __module__ = "treeclass"
    __match_args__: ClassVar[tuple[str]]

    def _value(self) -> Any:
        return getattr(self, self.__match_args__[0])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__match_args__[0]}={self._value()!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._value() == self._value()

    def __hash__(self) -> int:
        return hash((type(self), self._value()))

    def __reduce__(self) -> tuple[type[_Key], tuple[Any]]:
        return (type(self), (self._value(),))


class SequenceKey(_Key):
    """The position of a child in a tuple or list: ``[0]``."""

    __slots__ = ("idx",)
    __module__ = "treeclass"
    __match_args__ = ("idx",)

    idx: int

    def __init__(self, idx: int) -> None:
        object.__setattr__(self, "idx", idx)

    def __str__(self) -> str:
        return index_entry(self.idx)


class DictKey(_Key):
    """The key of a child in a dict: ``['k']``."""

    __slots__ = ("key",)
    __module__ = "treeclass"
    __match_args__ = ("key",)

    key: Hashable

    def __init__(self, key: Hashable) -> None:
        object.__setattr__(self, "key", key)

    def __str__(self) -> str:
        return index_entry(self.key)


class GetAttrKey(_Key):
    """The field of a child in a registered class or namedtuple: ``.name``."""

    __slots__ = ("name",)
    __module__ = "treeclass"
    __match_args__ = ("name",)

    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        return attr_entry(self.name)


KeyEntry = SequenceKey | DictKey | GetAttrKey
KeyPath = tuple[KeyEntry, ...]


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
        return separator.join(str(k._value()) if isinstance(k, _Key) else str(k) for k in path)
    return separator.join(map(str, path))


# --- a node's children's keys, each in a 1-tuple (what a path is extended by) ----------------

#: The keys of the first positions, made once (replaced whole, never changed: threads that
#: extend it at once each make a consistent tuple).
_sequence_keys: tuple[tuple[SequenceKey], ...] = ()
_SEQUENCE_KEPT: Final = 1024  # positions whose keys are kept


def sequence_keys(k: int) -> Sequence[tuple[SequenceKey]]:
    """The keys ``(SequenceKey(0),), ...`` of a tuple's or list's ``k`` children."""
    global _sequence_keys
    kept = _sequence_keys
    if k <= len(kept):
        return kept[:k]
    more = tuple([(SequenceKey(i),) for i in range(len(kept), k)])
    if len(kept) < _SEQUENCE_KEPT:
        _sequence_keys = (kept + more)[:_SEQUENCE_KEPT]
    return kept + more


#: ``dict keys -> (those keys, their DictKey 1-tuples)``: the keys of the mappings seen last.
_MAPPING_KEYS: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[tuple[DictKey], ...]]] = {}
_MAPPING_KEPT: Final = 256  # mappings whose keys are kept (forgotten all at once past that)
_MAPPING_SIZE: Final = 256  # keys at most in a mapping whose keys are kept


def mapping_keys(keys: tuple[Any, ...]) -> Sequence[tuple[DictKey]]:
    """The keys ``(DictKey(k),), ...`` of a mapping's children, ``keys`` its keys in order.

    The keys of a mapping seen before (the very same key objects: ``1`` and ``True`` are
    equal but make different keys) are made once.
    """
    if len(keys) > _MAPPING_SIZE:
        return [(DictKey(k),) for k in keys]
    # Looked up by the keys' ids, so that no key's own __hash__ or __eq__ runs (the stored
    # tuple keeps the keys alive, so their ids stay theirs while it is kept).
    ids = tuple(map(id, keys))
    known = _MAPPING_KEYS.get(ids)
    if known is not None and all(map(is_, known[0], keys)):
        return known[1]
    made = tuple([(DictKey(k),) for k in keys])
    if len(_MAPPING_KEYS) >= _MAPPING_KEPT:
        _MAPPING_KEYS.clear()
    _MAPPING_KEYS[ids] = (keys, made)
    return made


def field_keys(names: Sequence[str]) -> tuple[tuple[GetAttrKey], ...]:
    """The keys ``(GetAttrKey(name),), ...`` of a class's or namedtuple's fields ``names``."""
    return tuple([(GetAttrKey(name),) for name in names])
