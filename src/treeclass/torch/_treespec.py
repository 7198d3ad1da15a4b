"""A safe reader of ``torch.utils._pytree.treespec_dumps`` text.

torch's own ``treespec_loads`` (torch 2.13.0, ``torch/utils/_pytree.py``) imports the module named
by a ``defaultdict`` node's ``default_factory_module`` and resolves ``default_factory_name`` in it
(``os.system`` is accepted), imports the module of every ``{"__enum__": ..., "fqn": "mod:Qual"}``
object in a context (``enum_object_hook``), and lets ``AssertionError``, ``KeyError``,
``ModuleNotFoundError`` and ``RecursionError`` escape on bad input. This module reads the same
JSON without any of that:

- the text is parsed strictly (no duplicate object keys, no ``NaN``, no oversized numbers; nesting
  is bounded by the parser, which turns a too-deep document into an error): at C speed, a
  duplicate key found by count as in treeclass's own documents
  (:func:`treeclass._core.json.loads_checked`), the contexts' JSON by the strict parser;
- a node type is resolved only among the names registered in this process with torch's pytree
  (``serialized_type_name``, which is how treeclass registers its classes) and torch's built-in
  containers; nothing is imported and no module path is looked up;
- a ``defaultdict`` factory must be one of a fixed set of built-in types; enums in contexts are
  refused (torch writes them by module path);
- every node's number of children is checked against its context where the context fixes it;
- the :class:`torch.utils._pytree.TreeSpec` is built bottom-up without recursion.

Every failure is a :class:`~treeclass.TreespecLoadError` (or
:class:`~treeclass.UnregisteredNameError` naming the name).

Private torch state read here (checked against torch 2.13.0): ``SERIALIZED_TYPE_TO_PYTHON_TYPE``
and ``SUPPORTED_SERIALIZED_TYPES`` -- the maps torch's own loader reads.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import torch.utils._pytree as pytree

from .._backends.torch import NOT_KEPT, kept_context
from .._core.json import MAX_INT_DIGITS, census, loads_checked, loads_strict
from .._core.registry import registered_node
from .._errors import TreespecLoadError, UnregisteredNameError, unregistered_name

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "parse_json", "treespec_from_json"]

#: The treespec serialization protocols this reader understands.
PROTOCOLS: Final = (1,)
#: Deepest tree accepted. torch's pytree functions recurse once per level or more (with the
#: default recursion limit, torch 2.13.0's own treespec_dumps / treespec_loads / unflatten round
#: trip fails past ~330 levels), so a deeper document is not one torch wrote, and the spec would
#: only fail later, in torch, with a RecursionError.
MAX_DEPTH: Final = 256

_FACTORIES: Final[dict[str, type]] = {
    t.__name__: t
    for t in (list, dict, set, frozenset, tuple, int, float, complex, str, bytes, bool)
}
_KEYS: Final = frozenset(("type", "context", "children_spec"))
_DEFAULTDICT_KEYS: Final = frozenset(
    ("default_factory_module", "default_factory_name", "dict_context")
)


def _brief(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# --- strict JSON ---------------------------------------------------------------------------


def parse_json(text: str | bytes | bytearray, what: str) -> Any:
    """``text`` as :func:`treeclass._core.json.loads_strict` parses it, or a TreespecLoadError.

    No duplicate keys, no ``NaN``, ints of at most :data:`MAX_INT_DIGITS` digits; any problem
    is a :class:`TreespecLoadError` about ``what``.
    """
    try:
        return loads_strict(text)
    except ValueError as e:
        raise TreespecLoadError(f"{what} is not valid JSON ({str(e)[:200]}).") from None


# --- contexts ---------------------------------------------------------------------------------


def _no_enums(value: Any, where: str) -> None:
    """Refuse torch's ``{"__enum__": ...}`` objects anywhere inside ``value`` (iteratively)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if v.__class__ is dict:
            if "__enum__" in v:
                raise TreespecLoadError(
                    f"{where} holds an enum member written by module path "
                    f"({_brief(v.get('fqn'), 80)}); torch's loader would import that module, so "
                    "treeclass does not load it. Use a treeclass class with the enum in a static "
                    "field (register the enum with treeclass.register_static), or plain keys."
                )
            stack.extend(v.values())
        elif v.__class__ is list:
            stack.extend(v)


def _json_context(context: Any, where: str) -> Any:
    if context.__class__ is not str:
        raise TreespecLoadError(
            f"the context of {where} must be a JSON string, got {_brief(context, 60)}."
        )
    value = parse_json(context, f"the context of {where}")
    _no_enums(value, f"the context of {where}")
    return value


def _keys(value: Any, where: str) -> list[Any]:
    if value.__class__ is not list:
        raise TreespecLoadError(
            f"the context of {where} must be the list of its keys, got {_brief(value, 60)}."
        )
    seen: set[tuple[str, str]] = set()
    for key in value:
        # Scalar keys only (a tuple key comes back from torch's JSON as an unhashable list).
        # Duplicates are found by type and text, not by hashing the keys themselves: ints that
        # all hash alike would make a set of them quadratic. 1, 1.0 and True are one dict key.
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
                f"{_brief(key, 60)}."
            )
        if tag in seen:
            raise TreespecLoadError(f"{where} has the key {_brief(key, 60)} twice.")
        seen.add(tag)
    return value


def _arity(where: str, expected: int, got: int) -> None:
    if expected != got:
        raise TreespecLoadError(f"{where} has {got} children but its context gives it {expected}.")


def _null(context: Any, where: str, k: int) -> None:
    del k  # any number of children
    if context != "null":
        raise TreespecLoadError(
            f'the context of {where} must be "null", got {_brief(context, 60)}.'
        )


def _dict(context: Any, where: str, k: int) -> list[Any]:
    keys = _keys(_json_context(context, where), where)
    _arity(where, len(keys), k)
    return keys


def _defaultdict(context: Any, where: str, k: int) -> list[Any]:
    if context.__class__ is not dict or frozenset(context) != _DEFAULTDICT_KEYS:
        raise TreespecLoadError(
            f"the context of {where} must be an object with the keys "
            f"{sorted(_DEFAULTDICT_KEYS)!r}, got {_brief(context, 80)}."
        )
    module = context["default_factory_module"]
    name = context["default_factory_name"]
    factory = _FACTORIES.get(name) if module == "builtins" and name.__class__ is str else None
    if factory is None:
        label = (
            f"{module[:60]}.{name[:60]}"
            if module.__class__ is str and name.__class__ is str
            else _brief((module, name), 80)
        )
        raise TreespecLoadError(
            f"the default_factory of {where} is {label}; "
            "torch's loader would import and call it, so treeclass only loads the built-in "
            f"factories {', '.join(sorted(_FACTORIES))}."
        )
    keys = _keys(context["dict_context"], where)
    _no_enums(keys, f"the context of {where}")
    _arity(where, len(keys), k)
    return [factory, keys]


def _deque(context: Any, where: str, k: int) -> int | None:
    del k  # any number of children
    maxlen = _json_context(context, where)
    if maxlen is not None and (maxlen.__class__ is not int or maxlen < 0):
        raise TreespecLoadError(
            f"the context of {where} must be its maxlen (null or a count), got "
            f"{_brief(maxlen, 40)}."
        )
    return maxlen


def _registered(name: str) -> type | None:
    """The class torch maps ``name`` to, or ``None`` (private; torch 2.13.0)."""
    if name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
        return None  # every class registered without a name shares it
    return pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)


def _unregistered(name: str) -> UnregisteredNameError:
    return unregistered_name(name, "this treespec")


def _namedtuple(context: Any, where: str, k: int) -> type:
    if context.__class__ is not str:
        raise TreespecLoadError(
            f"the context of {where} must be the namedtuple's serialized name, got "
            f"{_brief(context, 60)}."
        )
    cls = _registered(context)
    fields: Any = getattr(cls, "_fields", None)
    if cls is None or fields.__class__ is not tuple:
        raise _unregistered(context)
    _arity(f"{where} ({context!r})", len(fields), k)
    return cls


# name -> (the type torch's TreeSpec holds, context parser(context, where, arity) -> context)
_BUILTINS: Final[dict[str, tuple[Any, Callable[[Any, str, int], Any]]]] = {
    "builtins.tuple": (tuple, _null),
    "builtins.list": (list, _null),
    "builtins.dict": (dict, _dict),
    "collections.OrderedDict": (collections.OrderedDict, _dict),
    "collections.defaultdict": (collections.defaultdict, _defaultdict),
    "collections.deque": (collections.deque, _deque),
    "collections.namedtuple": (collections.namedtuple, _namedtuple),
}


def _treeclass_arity(cls: type, context: Any) -> int | None:
    """The number of children of a treeclass node with torch auxdata ``context``.

    torch's auxdata of a class holds the names of its ``None`` fields first when they are left
    out of the children (``return_none_fields=False`` and data fields), and only the static
    values otherwise (see ``treeclass._core.state.make_state_codec``). Reads treeclass's registry.
    """
    node = registered_node(cls)
    if node is None or node.kind not in ("dataclass", "attrs"):
        return None
    n_data = len(node.data_fields)
    skips_nones = not node.return_none_fields and n_data > 0
    return n_data - len(context[0]) if skips_nones else n_data


def _resolve(name: str, context: Any, where: str, k: int) -> tuple[Any, Any]:
    builtin = _BUILTINS.get(name)
    if builtin is not None:
        return builtin[0], builtin[1](context, where, k)
    cls = _registered(name)
    if cls is None:
        raise _unregistered(name)
    serialize = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
    if serialize is None:  # pragma: no cover - torch keeps both maps together
        raise _unregistered(name)
    label = f"{where} ({name!r})"
    if serialize.from_dumpable_context is None:
        # torch would json.loads it with its enum hook (which imports); we parse it strictly.
        return cls, _json_context(context, label)
    if context.__class__ is str:
        parse_json(context, f"the context of {label}")  # duplicate keys, bad numbers
    try:
        value = serialize.from_dumpable_context(context)
    except TreespecLoadError:
        raise
    except Exception as e:
        raise TreespecLoadError(
            f"the context of {label} was refused by the from_dumpable_context registered for "
            f"{cls.__module__}.{cls.__qualname__}: {type(e).__name__}: {str(e)[:200]}"
        ) from None
    expected = _treeclass_arity(cls, value)
    if expected is not None:
        _arity(label, expected, k)
    return cls, value


def _leaf() -> pytree.TreeSpec:
    make: Callable[[], pytree.TreeSpec] | None = getattr(pytree, "treespec_leaf", None)
    return make() if make is not None else pytree.TreeSpec(None, None, [])


def _not_a_treespec(problem: str) -> TreespecLoadError:
    return TreespecLoadError(
        f"this text is not a torch treespec ({problem}); pass what "
        "torch.utils._pytree.treespec_dumps wrote."
    )


#: A node's position while walking: ``None`` (the root) or ``(parent's position, index)``.
_Where: TypeAlias = "tuple[Any, int] | None"
_LEAF_ORDER: Final = (None, None, 0)


def _where(at: _Where) -> str:
    """The words for a position: ``child 2 of child 0 of the root`` (at most 300 characters)."""
    path: list[int] = []
    while at is not None:
        at, i = at
        path.append(i)
    text = "the root"
    for i in reversed(path):
        text = f"child {i} of {text}"[:300]
    return text


#: A leaf as torch's treespec_dumps writes it.
_LEAF_NODE: Final[dict[str, Any]] = {"type": None, "context": None, "children_spec": []}


def treespec_from_json(text: str | bytes | bytearray) -> pytree.TreeSpec:
    """Build a torch ``TreeSpec`` from ``treespec_dumps`` text, safely (see the module docs).

    Raises:
        UnregisteredNameError: a node type name (or a namedtuple's name) is not registered.
        TreespecLoadError: anything else wrong with the text.
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
    # Parsed at C speed; the walk counts what finds a dropped duplicate key (loads_checked).
    return loads_checked(text, _build, _not_json)


def _not_json(e: ValueError) -> TreespecLoadError:
    return _not_a_treespec(f"the text is not valid JSON ({str(e)[:200]}).")


def _build(doc: Any) -> tuple[pytree.TreeSpec, int, int]:
    """The spec of a parsed document, with the members of its objects and ``:`` of its strings.

    The counts are what :func:`treeclass._core.json.no_duplicates` compares with the text.
    """
    if doc.__class__ is not list or len(doc) != 2:
        raise _not_a_treespec(f"it is [protocol, spec], got {_brief(doc, 60)}")
    protocol, root = doc
    if protocol.__class__ is not int or protocol not in PROTOCOLS:
        raise TreespecLoadError(
            f"treespec protocol {_brief(protocol, 30)} is not one this release reads "
            f"({', '.join(map(str, PROTOCOLS))})."
        )
    # Pre-order walk collecting (node, number of children); then build bottom-up. A node's
    # position is kept as (parent's position, index) and put into words only for an error.
    leaf = _leaf()
    order: list[tuple[Any, Any, int]] = []  # (type, context, k), or (None, a spec made, 0)
    stack: list[tuple[Any, _Where, int]] = [(root, None, 0)]
    # (name, context text, arity) -> [type, context, copy, spec]: a context read before,
    # when it is immutable (shared by the nodes that have it, with the spec of such a node
    # whose children are all leaves: torch's specs are frozen values) or a list of keys
    # (copied for each node).
    known: dict[tuple[str, Any, int], list[Any]] = {}
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
                f"{_where(at)} must be an object with the keys {sorted(_KEYS)!r}, got "
                f"{_brief(node, 80)}"
            )
        children = node["children_spec"]
        if children.__class__ is not list:
            raise _not_a_treespec(f'"children_spec" of {_where(at)} must be a list')
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
                    f"{_where(at)} is a leaf (type null) with a context or children"
                )
            order.append(_LEAF_ORDER)
            continue
        if name.__class__ is not str:
            raise _not_a_treespec(f'"type" of {_where(at)} must be a string or null')
        colons += name.count(":")
        memo = None
        if context.__class__ is str:
            key = (name, context, k)
            memo = known.get(key)
            if memo is None:
                typ, value = _resolve(name, context, _where(at), k)
                kept = kept_context(value)
                if kept is not NOT_KEPT:
                    memo = known[key] = [typ, kept, kept.__class__ is list, None]
            else:
                typ, value = memo[0], memo[1]
                if memo[2]:
                    value = value.copy()
        else:
            typ, value = _resolve(name, context, _where(at), k)
        # Children all leaves (each exactly {"type": null, ...}): made here, not walked.
        if k and depth < MAX_DEPTH and children.count(_LEAF_NODE) == k:
            members += 3 * k
            if memo is not None and not memo[2]:
                spec = memo[3]
                if spec is None:
                    spec = memo[3] = pytree.TreeSpec(typ, value, [leaf] * k)
            else:
                spec = pytree.TreeSpec(typ, value, [leaf] * k)
            order.append((None, spec, 0))
            continue
        order.append((typ, value, k))
        for i in range(k - 1, -1, -1):
            stack.append((children[i], (at, i), depth + 1))
    built: list[pytree.TreeSpec] = []
    for typ, context, k in reversed(order):
        if typ is None:
            built.append(context if context is not None else leaf)
            continue
        kids = built[len(built) - k :] if k else []
        if k:
            del built[len(built) - k :]
            kids.reverse()
        built.append(pytree.TreeSpec(typ, context, kids))
    return built[0], members, colons
