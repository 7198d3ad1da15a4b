"""The one reader of ``torch.utils._pytree.treespec_dumps`` JSON text; never imports torch.

Used by :mod:`treeclass.torch` and ``treeclass inspect``. Unlike torch's loader (which imports
what a ``defaultdict`` factory or an enum names), it parses strictly
(:func:`treeclass._core.json.loads_checked`), walks iteratively at most :data:`MAX_DEPTH` levels
in linear time, reads built-in containers' contexts itself (built-in factories only, no enums)
and resolves no name. Every failure is a :class:`~treeclass.TreespecLoadError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .._core.json import census, loads_checked, loads_strict
from .._errors import TreespecLoadError, brief

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["MAX_DEPTH", "TORCH_NAMES", "parse_json", "read", "where"]

#: The treespec serialization protocols this reader understands.
PROTOCOLS: Final = (1,)
#: Deepest tree accepted: torch 2.13.0's own treespec_dumps / loads / unflatten round trip
#: recurses and fails past ~330 levels, so a deeper document is not one torch wrote.
MAX_DEPTH: Final = 256

_FACTORIES: Final[dict[str, type]] = {
    t.__name__: t
    for t in (list, dict, set, frozenset, tuple, int, float, complex, str, bytes, bool)
}
_KEYS: Final = frozenset(("type", "context", "children_spec"))
_DEFAULTDICT_KEYS: Final = frozenset(
    ("default_factory_module", "default_factory_name", "dict_context")
)


def parse_json(text: str | bytes | bytearray, what: str) -> Any:
    """``text`` as :func:`treeclass._core.json.loads_strict` parses it, or a TreespecLoadError."""
    try:
        return loads_strict(text)
    except ValueError as e:
        raise TreespecLoadError(f"{what} is not valid JSON ({str(e)[:200]}).") from None


def objects(value: Any) -> Iterator[dict[Any, Any]]:
    """Every JSON object inside the parsed JSON ``value`` (iteratively: no recursion limit)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if v.__class__ is dict:
            yield v
            stack.extend(v.values())
        elif v.__class__ is list:
            stack.extend(v)


def _no_enums(value: Any, where: str) -> None:
    """Refuse torch's ``{"__enum__": ...}`` objects anywhere inside ``value``."""
    for v in objects(value):
        if "__enum__" in v:
            raise TreespecLoadError(
                f"{where} holds an enum member written by module path "
                f"({brief(v.get('fqn'), 80)}); torch's loader would import that module, so "
                "treeclass does not load it. Use a treeclass class with the enum in a static "
                "field (register the enum with treeclass.register_static), or plain keys."
            )


def json_context(context: Any, where: str) -> Any:
    """A context that is JSON text, parsed strictly, with no enum in it."""
    if context.__class__ is not str:
        raise TreespecLoadError(
            f"the context of {where} must be a JSON string, got {brief(context, 60)}."
        )
    value = parse_json(context, f"the context of {where}")
    _no_enums(value, f"the context of {where}")
    return value


def _keys(value: Any, where: str, k: int) -> list[Any]:
    if value.__class__ is not list:
        raise TreespecLoadError(
            f"the context of {where} must be the list of its keys, got {brief(value, 60)}."
        )
    seen: set[tuple[str, str]] = set()
    for key in value:
        # Scalar keys only. Duplicates by type and text, not by hash (ints that hash alike
        # would make a set quadratic); 1, 1.0 and True are one dict key.
        kt = key.__class__
        if kt is str:
            tag = ("s", key)
        elif key is None:
            tag = ("n", "")
        elif kt is bool or kt is int or (kt is float and key.is_integer()):
            tag = ("i", str(int(key)))
        elif kt is float:
            tag = ("f", repr(key))
        else:
            raise TreespecLoadError(
                f"{where} has a key that is not a string, number, boolean or null: "
                f"{brief(key, 60)}."
            )
        if tag in seen:
            raise TreespecLoadError(f"{where} has the key {brief(key, 60)} twice.")
        seen.add(tag)
    arity(where, len(value), k)
    return value


def arity(where: str, expected: int, got: int) -> None:
    """Refuse a node whose number of children is not the one its context gives it."""
    if expected != got:
        raise TreespecLoadError(f"{where} has {got} children but its context gives it {expected}.")


def _null(context: Any, where: str, k: int) -> None:
    if context != "null":
        raise TreespecLoadError(f'the context of {where} must be "null", got {brief(context, 60)}.')


def _dict(context: Any, where: str, k: int) -> list[Any]:
    return _keys(json_context(context, where), where, k)


def _defaultdict(context: Any, where: str, k: int) -> list[Any]:
    if context.__class__ is not dict or frozenset(context) != _DEFAULTDICT_KEYS:
        raise TreespecLoadError(
            f"the context of {where} must be an object with the keys "
            f"{sorted(_DEFAULTDICT_KEYS)!r}, got {brief(context, 80)}."
        )
    module = context["default_factory_module"]
    name = context["default_factory_name"]
    factory = _FACTORIES.get(name) if module == "builtins" and name.__class__ is str else None
    if factory is None:
        label = (
            f"{module[:60]}.{name[:60]}"
            if module.__class__ is str and name.__class__ is str
            else brief((module, name), 80)
        )
        raise TreespecLoadError(
            f"the default_factory of {where} is {label}; torch's loader would import and call "
            f"it, so treeclass only loads the built-in factories {', '.join(sorted(_FACTORIES))}."
        )
    _no_enums(context["dict_context"], f"the context of {where}")
    return [factory, _keys(context["dict_context"], where, k)]


def _deque(context: Any, where: str, k: int) -> int | None:
    maxlen = json_context(context, where)
    if maxlen is not None and (maxlen.__class__ is not int or maxlen < 0):
        raise TreespecLoadError(
            f"the context of {where} must be its maxlen (null or a count), got {brief(maxlen, 40)}."
        )
    return maxlen


def _namedtuple(context: Any, where: str, k: int) -> str:
    if context.__class__ is not str:
        raise TreespecLoadError(
            f"the context of {where} must be the namedtuple's serialized name, got "
            f"{brief(context, 60)}."
        )
    return context


#: torch's built-in containers: name -> ``(context, where, k) -> context read`` (``None``, the
#: keys, ``[factory, keys]``, the maxlen, or the namedtuple's name, which the caller resolves).
CONTAINERS: Final[dict[str, Callable[[Any, str, int], Any]]] = {
    "builtins.tuple": _null,
    "builtins.list": _null,
    "builtins.dict": _dict,
    "collections.OrderedDict": _dict,
    "collections.defaultdict": _defaultdict,
    "collections.deque": _deque,
    "collections.namedtuple": _namedtuple,
}
#: Every serialized type name torch 2.13.0 registers itself (no class of a user's).
TORCH_NAMES: Final = frozenset(
    (
        *CONTAINERS,
        "torch.fx.immutable_collections.immutable_list",
        "torch.fx.immutable_collections.immutable_dict",
        "torch.Size",
    )
)


def _not_a_treespec(problem: str) -> TreespecLoadError:
    return TreespecLoadError(
        f"this text is not a torch treespec ({problem}); pass what "
        "torch.utils._pytree.treespec_dumps wrote."
    )


#: A node's position: ``None`` (the root) or ``(parent's position, index)``.
Where: TypeAlias = "tuple[Any, int] | None"
_LEAF_NODE: Final[dict[str, Any]] = {"type": None, "context": None, "children_spec": []}
LEAF: Final = (None, None, 0, False, None)


def where(at: Where) -> str:
    """The words for a position: ``child 2 of child 0 of the root`` (at most 300 characters)."""
    path: list[int] = []
    while at is not None:
        at, i = at
        path.append(i)
    text = "the root"
    for i in reversed(path):
        text = f"child {i} of {text}"[:300]
    return text


#: One node as read, in pre-order: ``(name, context, k, flat, at)``. ``name`` is ``None`` for
#: a leaf (:data:`LEAF`); ``context`` is read for :data:`CONTAINERS`, else as written; ``k``
#: is the number of children; ``flat``: they are all leaves, and have no entries of their own.
Entry: TypeAlias = "tuple[str | None, Any, int, bool, Where]"


def read(text: str | bytes | bytearray) -> list[Entry]:
    """The nodes of ``treespec_dumps`` text, in pre-order (see :data:`Entry`).

    Raises:
        TreespecLoadError: the text is not a torch treespec this release reads.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise TreespecLoadError(
            f"treespec_loads() takes the JSON text torch's treespec_dumps wrote, got "
            f"{type(text).__name__}."
        )
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _not_json(e) from None
    return loads_checked(text, _walk, _not_json)


def _not_json(e: ValueError) -> TreespecLoadError:
    return _not_a_treespec(f"the text is not valid JSON ({str(e)[:200]}).")


def _walk(doc: Any) -> tuple[list[Entry], int, int]:
    """The entries, with the members and ``:`` counts :func:`loads_checked` compares."""
    if doc.__class__ is not list or len(doc) != 2:
        raise _not_a_treespec(f"it is [protocol, spec], got {brief(doc, 60)}")
    protocol, root = doc
    if protocol.__class__ is not int or protocol not in PROTOCOLS:
        raise TreespecLoadError(
            f"treespec protocol {brief(protocol, 30)} is not one this release reads "
            f"({', '.join(map(str, PROTOCOLS))})."
        )
    out: list[Entry] = []
    stack: list[tuple[Any, Where, int]] = [(root, None, 0)]
    known: dict[tuple[str, Any, int], Any] = {}  # (name, context text, k) -> context read
    members = 0  # of the node objects and the objects in contexts
    colons = 0  # in the names and contexts
    while stack:
        node, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TreespecLoadError(
                f"the treespec nests deeper than {MAX_DEPTH} levels; torch's pytree functions "
                "recurse once per level (its own treespec_dumps cannot write such a spec), so "
                "treeclass does not load it."
            )
        if node.__class__ is not dict or node.keys() != _KEYS:
            raise _not_a_treespec(
                f"{where(at)} must be an object with the keys {sorted(_KEYS)!r}, got "
                f"{brief(node, 80)}"
            )
        children = node["children_spec"]
        if children.__class__ is not list:
            raise _not_a_treespec(f'"children_spec" of {where(at)} must be a list')
        name = node["type"]
        k = len(children)
        members += 3
        context = node["context"]
        if context.__class__ is str:
            colons += context.count(":")
        elif context is not None:
            m, c = census(context)
            members += m
            colons += c
        if name is None:
            if context is not None or k:
                raise _not_a_treespec(
                    f"{where(at)} is a leaf (type null) with a context or children"
                )
            out.append(LEAF)
            continue
        if name.__class__ is not str:
            raise _not_a_treespec(f'"type" of {where(at)} must be a string or null')
        colons += name.count(":")
        container = CONTAINERS.get(name)
        if container is not None:
            if context.__class__ is str:
                key = (name, context, k)
                value = known.get(key)
                if value is None:
                    value = known[key] = container(context, where(at), k)
                if value.__class__ is list:
                    value = value.copy()
            else:
                value = container(context, where(at), k)
            context = value
        # Children all leaves (each exactly {"type": null, ...}): not walked.
        if k and depth < MAX_DEPTH and children.count(_LEAF_NODE) == k:
            members += 3 * k
            out.append((name, context, k, True, at))
            continue
        out.append((name, context, k, False, at))
        for i in range(k - 1, -1, -1):
            stack.append((children[i], (at, i), depth + 1))
    return out, members, colons
