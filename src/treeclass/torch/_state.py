"""Training states made of treeclass classes in ``torch.distributed.checkpoint`` (DCP).

DCP stores the tensors of nested dicts and lists as tensors and pickles any other object
whole. :func:`state_dict` turns a tree into the nested dicts DCP walks (instances and
namedtuples by field name, sequences as lists, dicts keyed by ``str(key)``; leaves and static
values as they are), :func:`load_state_dict` puts what DCP loaded back into the same classes
(checking the structure and static values), and :class:`StatefulTree` does both through DCP's
``Stateful`` protocol (``docs/torch.md``, "Distributed checkpoints"). Never imports torch;
instances are rebuilt without ``__init__``.

Example:
    >>> import torch
    >>> import torch.distributed.checkpoint as dcp
    >>> import treeclass as tc
    >>> from treeclass.torch import load_state_dict, state_dict
    >>> @tc.pytree_dataclass(name="docs.state.Train")
    ... class Train:
    ...     w: torch.Tensor
    ...     step: int
    ...     lr: float = tc.field(static=True, default=0.1)
    >>> state = Train(torch.ones(2), step=3)
    >>> sd = state_dict(state)
    >>> sd
    {'w': tensor([1., 1.]), 'step': 3, 'lr': 0.1}
    >>> sd["w"] is state.w
    True
    >>> load_state_dict(Train(torch.zeros(2), step=0), {"w": torch.ones(2), "step": 3, "lr": 0.1})
    Train(w=tensor([1., 1.]), step=3, lr=0.1)
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from .._core.fields import is_namedtuple_class
from .._core.keys import attr_entry, index_entry
from .._core.nodes import NodeType
from .._core.registry import registered_node
from .._errors import StructureMismatchError, TreeclassTypeError

T = TypeVar("T")

__all__ = ["StatefulTree", "load_state_dict", "state_dict"]


def _fields(cls: type) -> tuple[NodeType, tuple[tuple[str, bool], ...]] | None:
    """A registered dataclass / attrs class's node and ``((name, is_static), ...)``, or ``None``."""
    node = registered_node(cls)
    if node is None or node.kind == "namedtuple" or node.info is None:
        return None
    return node, tuple((f.name, f.static) for f in node.info.fields)


def _where(path: str) -> str:
    return f"at {path}" if path else "at the root"


def state_dict(tree: Any) -> dict[str, Any]:
    """The state dict of ``tree`` for ``torch.distributed.checkpoint``: nested dicts and lists.

    Args:
        tree: a treeclass instance, a namedtuple or a ``dict`` (the root of a state dict is a
            mapping), holding any pytree.

    Returns:
        Nested dicts (by field name or ``str(key)``) and lists whose leaves are the
        tree's own leaves (its tensors, not copies) and static values.

    Raises:
        TreeclassTypeError: the root is not a mapping-like node, or two keys of a dict have the
            same ``str()``.
    """
    out = _to_state(tree, "")
    if not isinstance(out, dict):
        raise TreeclassTypeError(
            f"state_dict() needs a tree whose root is a treeclass class, a namedtuple or a "
            f"dict (a DCP state dict is a mapping), got a {type(tree).__name__}; wrap it, "
            'e.g. state_dict({"params": tree}).'
        )
    return out  # pyright: ignore[reportUnknownVariableType]


def _to_state(node: Any, path: str) -> Any:
    cls: type[object] = node.__class__
    known = _fields(cls)
    if known is not None:
        state: dict[str, Any] = {}
        for name, static in known[1]:
            value = getattr(node, name)
            state[name] = value if static else _to_state(value, path + attr_entry(name))
        return state
    if is_namedtuple_class(cls):
        names: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 (not on type)
        return {n: _to_state(v, path + attr_entry(n)) for n, v in zip(names, node)}
    if cls in (tuple, list):
        return [_to_state(v, path + index_entry(i)) for i, v in enumerate(node)]
    if cls in (dict, OrderedDict, defaultdict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            key = str(k)
            if key in out:
                raise TreeclassTypeError(
                    f"the dict {_where(path)} has two keys whose str() is {key!r}, which a "
                    "DCP state dict cannot tell apart (its keys are strings); use keys with "
                    "distinct str()."
                )
            out[key] = _to_state(v, path + index_entry(k))
        return out
    return node  # a leaf: tensors stay tensors


def load_state_dict(tree: T, state_dict: Mapping[str, Any]) -> T:
    """Rebuild ``tree`` from a state dict made by :func:`state_dict` (and filled by DCP).

    ``tree`` gives the structure: the classes, and the static values the checkpoint must
    have. Instances are rebuilt the way unflatten rebuilds them (no ``__init__``). The tensors
    of the result are those of ``state_dict`` (after ``dcp.load``, the tree's own tensors,
    loaded in place).

    Args:
        tree: a tree of the same structure as the one saved.
        state_dict: the state dict, as ``dcp.load`` left it.

    Returns:
        A new tree of the same classes holding the loaded values.

    Raises:
        StructureMismatchError: the state dict does not have the tree's structure (a field or
            key missing or extra, a list of another length), or a static value differs; the
            message names where.
    """
    result: T = _from_state(tree, state_dict, "")
    return result


def _mismatch(path: str, what: str) -> StructureMismatchError:
    return StructureMismatchError(
        f"the state dict does not match the tree {_where(path)}: {what}; load it into a tree "
        "built the way the saved one was."
    )


def _keys(sd: Any, path: str, expected: list[str]) -> Mapping[str, Any]:
    if not isinstance(sd, Mapping):
        raise _mismatch(path, f"expected a mapping with {expected!r}, got a {type(sd).__name__}")
    mapping: Mapping[str, Any] = sd  # pyright: ignore[reportUnknownVariableType]
    got = list(mapping)
    if sorted(got) != sorted(expected):
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        raise _mismatch(path, f"missing {missing!r}, unexpected {extra!r}")
    return mapping


def _from_state(node: Any, sd: Any, path: str) -> Any:
    cls: type[object] = node.__class__
    known = _fields(cls)
    if known is not None:
        class_node, fields = known
        mapping = _keys(sd, path, [n for n, _ in fields])
        values: dict[str, Any] = {}
        for name, static in fields:
            here = path + attr_entry(name)
            if static:
                mine = getattr(node, name)
                if mapping[name] != mine:
                    raise _mismatch(
                        here,
                        f"the static field {name!r} of {cls.__qualname__} is "
                        f"{mapping[name]!r} in the checkpoint but {mine!r} in the tree given",
                    )
                values[name] = mine
            else:
                values[name] = _from_state(getattr(node, name), mapping[name], here)
        statics = tuple(values[s] for s in class_node.static_fields)
        return class_node.unflatten(statics, [values[d] for d in class_node.data_fields])
    if is_namedtuple_class(cls):
        names: list[str] = list(getattr(cls, "_fields"))  # noqa: B009 (not on type)
        mapping = _keys(sd, path, names)
        items = [_from_state(v, mapping[n], path + attr_entry(n)) for n, v in zip(names, node)]
        new: Any = getattr(tuple, "__new__")  # noqa: B009 (no namedtuple __new__ / defaults)
        return new(cls, items)
    if cls in (tuple, list):
        if not isinstance(sd, (list, tuple)) or len(sd) != len(node):  # pyright: ignore
            raise _mismatch(path, f"expected a list of {len(node)} items, got {sd!r:.80}")
        seq: list[Any] = list(sd)  # pyright: ignore[reportUnknownArgumentType]
        items = [
            _from_state(v, s, path + index_entry(i)) for i, (v, s) in enumerate(zip(node, seq))
        ]
        return tuple(items) if cls is tuple else items
    if cls in (dict, OrderedDict, defaultdict):
        mapping = _keys(sd, path, [str(k) for k in node])
        out: dict[Any, Any]
        if cls is defaultdict:
            out = defaultdict(node.default_factory)
        else:
            out = OrderedDict() if cls is OrderedDict else {}
        for k, v in node.items():
            out[k] = _from_state(v, mapping[str(k)], path + index_entry(k))
        return out
    return sd  # a leaf: what DCP loaded (into the tree's own tensor, for tensors)


class StatefulTree(Generic[T]):
    """A tree under DCP's ``Stateful`` protocol: ``dcp.save`` / ``dcp.load`` call it.

    ``dcp.load`` fills the state dict of :attr:`tree` in place and then calls
    :meth:`load_state_dict`, which replaces :attr:`tree` with the loaded tree (treeclass
    instances are often frozen, so the tree is rebuilt rather than changed).

    Example:
        >>> import tempfile
        >>> import torch
        >>> import torch.distributed.checkpoint as dcp
        >>> import treeclass as tc
        >>> from treeclass.torch import StatefulTree
        >>> @tc.pytree_dataclass(name="docs.state.Params", frozen=True)
        ... class Params:
        ...     w: torch.Tensor
        ...     scale: float = tc.field(static=True, default=2.0)
        >>> folder = tempfile.mkdtemp()
        >>> dcp.save({"params": StatefulTree(Params(torch.ones(2)))}, checkpoint_id=folder)
        ... # doctest: +ELLIPSIS
        Metadata(...)
        >>> holder = StatefulTree(Params(torch.zeros(2)))
        >>> dcp.load({"params": holder}, checkpoint_id=folder)
        >>> holder.tree
        Params(w=tensor([1., 1.]), scale=2.0)
    """

    __slots__ = ("tree",)

    tree: T

    def __init__(self, tree: T) -> None:
        self.tree = tree

    def state_dict(self) -> dict[str, Any]:
        """:func:`state_dict` of :attr:`tree`."""
        return state_dict(self.tree)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Replace :attr:`tree` by :func:`load_state_dict` of it."""
        self.tree = load_state_dict(self.tree, state_dict)

    def __repr__(self) -> str:
        return f"StatefulTree({self.tree!r})"
