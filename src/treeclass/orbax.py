"""Orbax checkpoints of treeclass trees that restore without a target object.

Importing this module imports orbax-checkpoint (and so jax); ``import treeclass`` never does.
Nothing here is needed to checkpoint treeclass classes with orbax's own API
(``ocp.StandardCheckpointer().save(path, state)`` and ``restore(path, target)`` work on them
as on any JAX pytree). What orbax cannot do is restore *without* a target: it then returns
nested dicts (tuples become lists, statics are lost). :func:`save` writes the tree's structure
next to its arrays, and :func:`restore` rebuilds the tree in its own classes, in a fresh process
where only the modules defining the classes are imported.

The checkpoint is an ordinary orbax composite checkpoint (``CompositeCheckpointHandler``,
written atomically by orbax) with two items:

* ``treeclass``: a JSON document (orbax ``JsonSave``)::

      {"format": "treeclass.orbax", "version": 2,
       "treespec": "<tc.treespec_dumps of the tree's structure>",
       "leaves": [<one description per leaf, in leaf order>]}

  A leaf is described as ``{"array": "jax" | "numpy" | "numpy-scalar", "dtype": "float32",
  "shape": [2, 3], "key": "0"}`` (an array, stored in the ``arrays`` item under ``key``;
  ``key`` is ``null`` for an array with no elements, which orbax refuses to store), or by its
  value, ``{tag: value}`` as :func:`treeclass.save` writes a Python scalar
  (:mod:`treeclass._io.scalars`): ``{"bool": true}``, ``{"int": 3}`` (``"0x..."`` hex text beyond
  2**53), ``{"float": 1.5}`` (``"nan"``, ``"inf"``, ``"-inf"`` if not finite),
  ``{"complex": [1.5, -0.0]}`` or ``{"str": "..."}``. Version 2 is the only version (no
  release wrote another); restoring refuses any other.

* ``arrays``: an orbax PyTree checkpoint (``PyTreeSave``) of a flat dict ``{key: array}``,
  readable with orbax alone.

Restoring treats the directory as hostile input. The structure item is read first, as JSON
(orbax's ``JsonRestore``: ``json.loads``), and its ``treespec`` goes through
:func:`treeclass.treespec_loads`, which imports and runs nothing by name: a class name that is
not registered raises :class:`~treeclass.UnregisteredNameError` (naming every missing name)
before any array is read. Every leaf description is checked (dtype names against the numeric
dtypes of :mod:`treeclass._io.dtypes`, shapes that a numpy array can have, keys); the arrays
item's orbax metadata must then match them before orbax reads the arrays, so an edited
document cannot make orbax cast or reshape what it reads. Nothing is unpickled. The other
files are read by orbax (``_CHECKPOINT_METADATA``, the arrays' ``_METADATA``, tensorstore's
OCDBT and zarr files); whatever orbax raises on an edited or damaged one (a ``RecursionError``
from deeply nested JSON, tensorstore's ``ValueError`` on a truncated chunk) is reported as a
:class:`~treeclass.TreespecLoadError`. What orbax and tensorstore do with those files is
theirs to decide. Memory: the arrays take the size their metadata declares, and orbax
compresses chunks (a 256 MiB float32 array of zeros takes about 35 KB on disk), so a small
directory can declare large arrays; restore only checkpoints whose declared sizes you accept.

Example:
    >>> import numpy as np
    >>> import treeclass as tc
    >>> import treeclass.orbax as tco
    >>> @tc.pytree_dataclass(name="docs.orbax.State")
    ... class State:
    ...     params: dict[str, np.ndarray]
    ...     step: int
    ...     note: str | None = None
    ...     run: str = tc.field(static=True, default="r1")
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> tco.save(path, State({"w": np.ones((2, 2), np.float32)}, step=3))
    >>> tco.restore(path)  # no target: the classes come from the registered names
    State(params={'w': array([[1., 1.],
           [1., 1.]], dtype=float32)}, step=3, note=None, run='r1')
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Generator, Mapping
from typing import Any, Final, NamedTuple, cast

import treeclass as tc

from ._errors import missing_framework

try:
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
except ModuleNotFoundError as e:
    raise missing_framework("treeclass.orbax", "orbax", e) from e


from ._core.codegen import class_in_traceback
from ._errors import (
    TreeclassError,
    TreeclassTypeError,
    TreespecLoadError,
    UnregisteredNameError,
    brief,
    qualname,
    unregistered_name,
)
from ._io.dtypes import ORBAX_DTYPES, ORBAX_REFUSED, max_dims, numpy_dtype
from ._io.scalars import decode_scalar, encode_scalar
from ._treespec.format import loads_nodes, unregistered_names
from ._treespec.treedoc import child_entries, leaf_paths

__all__ = ["ARRAYS_ITEM", "FORMAT", "STRUCTURE_ITEM", "VERSION", "restore", "save", "save_args"]

#: The ``format`` of the structure document.
FORMAT: Final = "treeclass.orbax"
#: The structure document's version (the only one: no release wrote another).
VERSION: Final = 2
#: The composite checkpoint's item holding the structure document (JSON).
STRUCTURE_ITEM: Final = "treeclass"
#: The composite checkpoint's item holding the array leaves (an orbax PyTree checkpoint).
ARRAYS_ITEM: Final = "arrays"

_ARRAY_KINDS: Final = frozenset({"jax", "numpy", "numpy-scalar"})
_MAX_ELEMENTS: Final = 2**62
_MAX_SPAN: Final = 2**63 - 1  # numpy's limit on an array's dimensions times its item size


def _checkpointer() -> Any:
    """A checkpointer whose handlers are named here, never chosen by the directory's metadata."""
    handler = ocp.CompositeCheckpointHandler(
        **{STRUCTURE_ITEM: ocp.JsonCheckpointHandler(), ARRAYS_ITEM: ocp.PyTreeCheckpointHandler()}
    )
    return ocp.Checkpointer(handler)


# --- save -------------------------------------------------------------------------------------


@functools.cache
def _tensorstore_holds(dtype: str) -> bool:
    """Whether the installed tensorstore has ``dtype`` (float4, float8_e8m0 are newer)."""
    import tensorstore as ts

    try:
        ts.dtype(dtype)
    except ValueError:
        return False
    return True


def _version(distribution: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - orbax needs both
        return "(unknown version)"


def _describe(path: str, index: int, leaf: Any, arrays: dict[str, Any]) -> dict[str, Any]:
    """The JSON description of one leaf; arrays with elements go into ``arrays``."""
    scalar = encode_scalar(leaf, path)
    if scalar is not None:
        return {scalar[0]: scalar[1]}
    kind: type = leaf.__class__
    if isinstance(leaf, jax.Array):
        array_kind = "jax"
    elif kind is np.ndarray:
        array_kind = "numpy"
    elif issubclass(kind, np.generic):
        array_kind = "numpy-scalar"
    else:
        raise TreeclassTypeError(
            f"the leaf at {path} is a {qualname(leaf.__class__)}, which "
            "treeclass.orbax cannot save; it saves jax and numpy arrays (numeric dtypes) and "
            "numpy scalars, and Python bool, int, float, complex and str leaves. Convert it to "
            "an array, or make the class that holds it a treeclass class (with name=) so that "
            "it is structure, not a leaf."
        )
    try:
        found: Any = np.dtype(leaf.dtype)
        dtype = str(found.name)
    except TypeError:  # not a numpy dtype at all (a typed PRNG key's key<fry>)
        dtype = ""
    if dtype not in ORBAX_DTYPES:
        raise TreeclassTypeError(
            f"the array at {path} has dtype {leaf.dtype}, which treeclass.orbax cannot save; it "
            "saves arrays of numeric dtypes (bool, ints, floats including bfloat16 and float8, "
            f"complex) except {', '.join(ORBAX_REFUSED[:-1])} and {ORBAX_REFUSED[-1]} (orbax's "
            "tensorstore cannot write them). For a typed PRNG key use jax.random.key_data(key)."
        )
    if not _tensorstore_holds(dtype):
        raise TreeclassTypeError(
            f"the array at {path} has dtype {dtype}, which the installed tensorstore "
            f"{_version('tensorstore')} (orbax-checkpoint {_version('orbax-checkpoint')}'s "
            "array store) cannot write; upgrade them (pip install -U 'stable-pytrees[orbax]' "
            "tensorstore) or save with treeclass.save."
        )
    shape: list[int] = [int(n) for n in leaf.shape]
    key: str | None = None
    if math.prod(shape) > 0:  # orbax refuses arrays without elements; their shape is enough
        key = str(index)
        arrays[key] = np.asarray(leaf) if array_kind == "numpy-scalar" else leaf
    return {"array": array_kind, "dtype": dtype, "shape": shape, "key": key}


def save_args(tree: Any) -> ocp.args.Composite:
    """The orbax arguments that write ``tree`` in :func:`save`'s layout.

    For an orbax ``CheckpointManager`` (which names, keeps and deletes step directories):
    ``manager.save(step, args=treeclass.orbax.save_args(tree))``, then
    ``treeclass.orbax.restore(manager.directory / str(step))``. Every check of :func:`save`
    happens here, before anything is written.

    Args:
        tree: as for :func:`save`.

    Returns:
        An ``ocp.args.Composite`` with the items ``treeclass`` and (if the tree has array
        leaves with elements) ``arrays``.

    Raises:
        UnnamedClassError, UnserializableStaticError, TreeclassTypeError: as :func:`save`.

    Example:
        >>> import numpy as np, tempfile
        >>> import orbax.checkpoint as ocp
        >>> import treeclass.orbax as tco
        >>> manager = ocp.CheckpointManager(tempfile.mkdtemp())
        >>> manager.save(1, args=tco.save_args({"w": np.ones(2, np.float32), "step": 1}))
        True
        >>> manager.wait_until_finished()
        >>> tco.restore(manager.directory / "1")
        {'step': 1, 'w': array([1., 1.], dtype=float32)}
        >>> manager.close()
    """
    pairs, spec = tc.tree_flatten_with_path(tree)
    treespec = tc.treespec_dumps(spec)  # refuses unnamed classes before anything is written
    arrays: dict[str, Any] = {}
    paths = [tc.keystr(path) or "the root" for path, _ in pairs]
    leaves = [_describe(paths[i], i, leaf, arrays) for i, (_, leaf) in enumerate(pairs)]
    document = {"format": FORMAT, "version": VERSION, "treespec": treespec, "leaves": leaves}
    items: dict[str, Any] = {STRUCTURE_ITEM: ocp.args.JsonSave(document)}
    if arrays:
        items[ARRAYS_ITEM] = ocp.args.PyTreeSave(arrays)
    return ocp.args.Composite(**items)


def save(directory: str | os.PathLike[str], tree: Any, *, force: bool = False) -> None:
    """Write ``tree`` as an orbax checkpoint that :func:`restore` reads without a target.

    Every class in the tree must be registered with a ``name=`` (the structure is stored by
    name, never by module path). Nothing is written if the structure or a leaf cannot be
    saved. With an orbax ``CheckpointManager``, use :func:`save_args` instead.

    Args:
        directory: the checkpoint directory to create (orbax writes it atomically).
        tree: any tree of treeclass classes, namedtuples and built-in containers whose leaves
            are jax or numpy arrays (numeric dtypes), numpy scalars, or Python ``bool``,
            ``int``, ``float``, ``complex`` and ``str`` values.
        force: replace an existing checkpoint at ``directory`` (as orbax's ``force=``).

    Raises:
        UnnamedClassError: a class in the tree has no ``name=``.
        UnserializableStaticError: a static field's value has no JSON form.
        TreeclassTypeError: a leaf of another type, or an array of a non-numeric dtype; the
            message names its key path.
        ValueError: orbax refused (for example, ``directory`` exists and ``force`` is off).

    Example:
        >>> import numpy as np, os, tempfile
        >>> import treeclass.orbax as tco
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
        >>> tco.save(path, {"w": np.zeros(3, np.float32), "lr": 0.1, "dims": (3,)})
        >>> {"arrays", "treeclass"} <= set(os.listdir(path))
        True
    """
    args = save_args(tree)
    checkpointer = _checkpointer()
    try:
        checkpointer.save(os.path.abspath(os.fspath(directory)), args=args, force=force)
    finally:
        checkpointer.close()


# --- restore ----------------------------------------------------------------------------------


def _unregistered_names(treespec: str) -> list[str]:
    """Every node name of a treespec document that no class is registered under."""
    try:
        nodes = loads_nodes(treespec)
    except TreespecLoadError:
        return []
    return unregistered_names(nodes)


def _load_spec(treespec: str, where: str) -> tc.TreeSpec:
    try:
        return tc.treespec_loads(treespec)
    except UnregisteredNameError as e:
        missing = _unregistered_names(treespec)
        if not missing:
            raise
        holder = f"the checkpoint at {where}"
        raise unregistered_name(missing, holder, " (only the structure was read)") from e


def _bad(where: str, problem: str) -> TreespecLoadError:
    return TreespecLoadError(
        f"the treeclass structure of the checkpoint at {where} is not valid: {problem}. The "
        "checkpoint was not written by treeclass.orbax.save, or was edited or damaged."
    )


@contextlib.contextmanager
def _reading(where: str, what: str) -> Generator[None, None, None]:
    """Whatever orbax raises while it reads ``what`` becomes a TreespecLoadError.

    An edited file surfaces in orbax or tensorstore as any exception (``RecursionError`` from
    deep JSON, ``AttributeError`` from a field of the wrong type, tensorstore's ``ValueError``).
    """
    try:
        yield
    except TreeclassError:
        raise
    except Exception as e:
        problem = f"orbax could not read {what} ({type(e).__name__}: {brief(str(e), 300)})"
        raise _bad(where, problem) from e


def _dtype(name: Any, where: str, label: str) -> np.dtype[Any]:
    if isinstance(name, str) and name in ORBAX_DTYPES:
        try:
            dtype: np.dtype[Any] = numpy_dtype(name)
        except ImportError:
            raise _bad(where, f"{label} has dtype {name!r}, which this ml_dtypes lacks") from None
        return dtype
    raise _bad(where, f"{label} has dtype {str(name)[:40]!r}, not a numeric dtype")


class _Array(NamedTuple):
    """A checked array description."""

    kind: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    key: str | None
    label: str


def _check_leaf(desc: Any, index: int, label: str, where: str) -> Any:
    """The value a leaf description stands for, or an :class:`_Array` to read."""
    if desc.__class__ is not dict or not desc:
        raise _bad(where, f"{label} is described by {desc.__class__.__name__}, not an object")
    keys: set[str] = set(desc)
    if len(keys) == 1:
        (tag,) = keys
        try:
            return decode_scalar(tag, desc[tag])
        except ValueError:
            raise _bad(where, f"{label} has an invalid {tag[:40]!r} description") from None
    if keys != {"array", "dtype", "shape", "key"}:
        raise _bad(where, f"{label} has the fields {sorted(keys)[:8]}")
    kind: Any = desc["array"]
    if kind.__class__ is not str or kind not in _ARRAY_KINDS:
        raise _bad(where, f"{label} is an array of the unknown kind {str(kind)[:40]!r}")
    dtype = _dtype(desc["dtype"], where, label)
    shape: Any = desc["shape"]
    if (
        shape.__class__ is not list
        or len(shape) > max_dims()
        or not all(n.__class__ is int and 0 <= n <= _MAX_ELEMENTS for n in shape)
        or (kind == "numpy-scalar" and shape)
    ):
        raise _bad(where, f"{label} has an invalid shape")
    dims: tuple[int, ...] = tuple(shape)
    size = math.prod(dims)
    if size > _MAX_ELEMENTS:
        raise _bad(where, f"{label} has more than 2**62 elements")
    if math.prod(n for n in dims if n) * dtype.itemsize > _MAX_SPAN:
        # numpy refuses such a shape even with a zero dimension (no array can have it)
        raise _bad(where, f"{label} has dimensions no numpy array can have")
    key: Any = desc["key"]
    expected = str(index) if size else None
    if key != expected:
        raise _bad(where, f"{label} has the key {str(key)[:40]!r} instead of {expected!r}")
    return _Array(kind, dtype, dims, expected, label)


def _check_document(raw: Any, where: str) -> tuple[str, list[Any]]:
    if raw.__class__ is not dict:
        raise _bad(where, f"the {STRUCTURE_ITEM!r} item holds a {raw.__class__.__name__}")
    if raw.get("format") != FORMAT:
        raise _bad(where, f"its format is not {FORMAT!r}")
    version: Any = raw.get("version")
    if version.__class__ is not int:
        raise _bad(where, "it has no integer version")
    if version > VERSION:
        raise TreespecLoadError(
            f"the checkpoint at {where} was written by a newer treeclass (structure version "
            f"{version}; this treeclass reads version {VERSION}); upgrade treeclass to restore it."
        )
    if version != VERSION or set(raw) != {"format", "version", "treespec", "leaves"}:
        raise _bad(where, f"it does not have the fields of version {version}")
    treespec: Any = raw["treespec"]
    leaves: Any = raw["leaves"]
    if treespec.__class__ is not str or leaves.__class__ is not list:
        raise _bad(where, "its treespec is not a string or its leaves not a list")
    return treespec, leaves


def _leaf_labels(treespec: str, count: int) -> list[str]:
    """The key path of every leaf, for messages, from the document (as ``tc.load`` reads them).

    No class is built: no ``unflatten_calls_init=True`` class's ``__init__`` runs on placeholders.
    """
    nodes = loads_nodes(treespec)  # treespec_loads accepted it: this cannot raise
    paths = leaf_paths(nodes, child_entries(nodes, strict=False))
    labels = [f"the leaf at {path or 'the root'}" for path in paths]
    return labels if len(labels) == count else [f"leaf {i}" for i in range(count)]


def _metadata_tree(checkpointer: Any, path: str) -> Mapping[str, Any]:
    """The orbax metadata of the arrays item: ``{key: ArrayMetadata}`` (orbax 0.12)."""
    metadata: Any = checkpointer.metadata(path)
    item: Any = getattr(metadata, "item_metadata", metadata)[ARRAYS_ITEM]
    tree: Any = getattr(item, "tree", item)
    if not isinstance(tree, Mapping):
        raise TypeError(f"orbax metadata of {ARRAYS_ITEM!r} is a {tree.__class__.__name__}")
    return cast("Mapping[str, Any]", tree)


def _check_against_metadata(tree: Mapping[str, Any], wanted: dict[str, _Array], where: str) -> None:
    """The stored arrays' metadata (run inside :func:`_reading`) must be what was described."""
    if set(tree) != set(wanted):
        raise _bad(where, f"its {ARRAYS_ITEM!r} item holds other arrays than it describes")
    for key, array in wanted.items():
        meta = tree[key]
        shape = tuple(getattr(meta, "shape", ()) or ())
        dtype: Any = getattr(meta, "dtype", None)
        if shape != array.shape or dtype is None or np.dtype(dtype) != array.dtype:
            described = str(array.dtype)
            raise _bad(
                where,
                f"{array.label} is described as {described}{list(array.shape)} but "
                f"stored as {dtype}{list(shape)}",
            )


def _restore_args(wanted: dict[str, _Array], sharding: Any) -> tuple[dict[str, Any], ...]:
    item: dict[str, Any] = {}
    args: dict[str, Any] = {}
    for key, array in wanted.items():
        if array.kind == "jax":
            item[key] = jax.ShapeDtypeStruct(array.shape, array.dtype, sharding=sharding)
            args[key] = ocp.ArrayRestoreArgs(
                sharding=sharding, global_shape=array.shape, dtype=array.dtype
            )
        else:
            item[key] = jax.ShapeDtypeStruct(array.shape, array.dtype)
            args[key] = ocp.RestoreArgs(restore_type=np.ndarray, dtype=array.dtype)
    return item, args


def _leaf_value(value: Any, array: _Array, where: str, sharding: Any) -> Any:
    if array.key is None:  # no elements: rebuilt from the description alone
        empty = np.zeros(array.shape, array.dtype)
        return jax.device_put(empty, sharding) if array.kind == "jax" else empty
    if (
        not isinstance(value, (np.ndarray, jax.Array))
        or tuple(value.shape) != array.shape
        or value.dtype != array.dtype
    ):
        raise _bad(where, f"orbax restored {array.label} with another type, shape or dtype")
    if array.kind == "numpy-scalar":
        return np.asarray(value)[()]
    return value


def restore(directory: str | os.PathLike[str], *, sharding: Any = None) -> Any:
    """Read a checkpoint written by :func:`save` back into its own classes, without a target.

    Only the modules that define the tree's classes need to be imported (in any order, under
    any module name: classes are found by their registered names). Statics, ``None`` fields,
    tuples and lists, array shapes and dtypes, jax vs numpy arrays and Python scalar leaves
    come back as saved. The classes are rebuilt as :func:`treeclass.load` rebuilds them (by
    the structure's ``unflatten``: without ``__init__``, unless a class was registered with
    ``unflatten_calls_init=True``; then its ``__init__`` runs on the restored leaves only).

    Args:
        directory: the checkpoint directory.
        sharding: where jax arrays are placed (a ``jax.sharding.Sharding``); default: this
            process's first device, ``jax.local_devices()[0]`` (``jax.devices()[0]`` in a
            single process). numpy arrays stay numpy arrays.

    Returns:
        The tree.

    Raises:
        UnregisteredNameError: the structure names classes not registered in this process
            (the message names them all); raised before any array is read.
        TreespecLoadError: the directory is not a treeclass.orbax checkpoint, or its
            structure is invalid, from a newer treeclass, or does not match the stored arrays;
            orbax could not read one of its files; or a class registered with
            ``unflatten_calls_init=True`` refused the restored leaves.

    Example:
        >>> import numpy as np, os, tempfile
        >>> import treeclass.orbax as tco
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
        >>> tco.save(path, {"w": np.zeros(2, np.float32), "dims": (2,), "lr": 0.5})
        >>> tco.restore(path)
        {'dims': (2,), 'lr': 0.5, 'w': array([0., 0.], dtype=float32)}
    """
    path: str = os.path.abspath(os.fspath(directory))
    where = repr(path)
    if not os.path.isdir(os.path.join(path, STRUCTURE_ITEM)):
        raise TreespecLoadError(
            f"{where} holds no {STRUCTURE_ITEM!r} item, so it is not a checkpoint written by "
            "treeclass.orbax.save; a checkpoint written with orbax's own API restores with "
            "orbax and a target object."
        )
    checkpointer = _checkpointer()
    try:
        with _reading(where, "it"):
            restored = checkpointer.restore(
                path, args=ocp.args.Composite(**{STRUCTURE_ITEM: ocp.args.JsonRestore()})
            )
            raw = restored[STRUCTURE_ITEM]
        treespec, descriptions = _check_document(raw, where)
        spec = _load_spec(treespec, where)
        if len(descriptions) != spec.num_leaves:
            raise _bad(
                where,
                f"it describes {len(descriptions)} leaves for a structure of {spec.num_leaves}",
            )
        labels = _leaf_labels(treespec, spec.num_leaves)
        checked = [_check_leaf(d, i, labels[i], where) for i, d in enumerate(descriptions)]
        wanted = {a.key: a for a in checked if isinstance(a, _Array) and a.key is not None}
        if sharding is None:
            sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        stored: Mapping[str, Any] = {}
        if wanted:
            if not os.path.isdir(os.path.join(path, ARRAYS_ITEM)):
                raise _bad(where, f"its {ARRAYS_ITEM!r} item is missing")
            with _reading(where, "the array metadata"):
                _check_against_metadata(_metadata_tree(checkpointer, path), wanted, where)
            item, args = _restore_args(wanted, sharding)
            composite = ocp.args.Composite(
                **{ARRAYS_ITEM: ocp.args.PyTreeRestore(item=item, restore_args=args)}
            )
            with _reading(where, "the arrays"):
                got: Any = checkpointer.restore(path, args=composite)[ARRAYS_ITEM]
                if not isinstance(got, Mapping):
                    raise _bad(where, f"orbax restored its arrays as a {type(got).__name__}")
                stored = cast("Mapping[str, Any]", got)
    finally:
        checkpointer.close()
    leaves = [
        _leaf_value(stored.get(leaf.key) if leaf.key else None, leaf, where, sharding)
        if isinstance(leaf, _Array)
        else leaf
        for leaf in checked
    ]
    return _rebuild(spec, leaves, where)


def _rebuild(spec: tc.TreeSpec, leaves: list[Any], where: str) -> Any:
    """``spec.unflatten(leaves)``; a class refusing them is the checkpoint's fault.

    (An ``unflatten_calls_init=True`` class's ``__init__`` may refuse an edited leaf.)
    """
    try:
        return spec.unflatten(leaves)
    except TreeclassError:
        raise
    except Exception as e:
        cls = class_in_traceback(e)
        node = "a node" if cls is None else f"a {qualname(cls)} node"
        raise _bad(
            where,
            f"rebuilding {node} from the restored leaves raised {type(e).__name__}: "
            f"{brief(str(e), 300)}",
        ) from e
