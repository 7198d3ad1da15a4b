"""Helpers for users' own test suites: :func:`assert_roundtrip` and Hypothesis strategies.

``assert_roundtrip(obj)`` flattens and rebuilds ``obj`` through every pytree registry that is
installed and every serializer that applies, and fails naming the first that does not give the
tree back. :func:`pytree_classes` and :func:`trees` are Hypothesis strategies (Hypothesis is
imported when they are called; ``pip install hypothesis``).

Example:
    >>> import treeclass as tc
    >>> from treeclass.testing import assert_roundtrip
    >>> @tc.pytree_dataclass(name="docs.testing.Point")
    ... class Point:
    ...     x: float
    ...     y: float = 0.0
    >>> assert_roundtrip(Point(1.0, 2.0))
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import keyword
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from ._backends.serialize import treespec_dumps, treespec_loads
from ._core.api import field, pytree_dataclass
from ._core.tree import TreeSpec, tree_flatten, tree_leaves, tree_structure
from ._errors import MissingDependencyError, UnnamedClassError, brief, qualname
from ._io import schema
from ._io.files import load, save
from ._pickle import _find_by_path, is_installed

__all__ = ["assert_roundtrip", "assert_schema_compatible", "pytree_classes", "trees"]


def _importable(module: str) -> Any | None:
    """The module if it is imported or importable (a framework the user has), else ``None``."""
    if module in sys.modules:
        return sys.modules[module]
    top = module.split(".", maxsplit=1)[0]
    try:
        if importlib.util.find_spec(top) is None:
            return None
        return importlib.import_module(module)
    except ImportError:
        return None


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float))


def _leaves_equal(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if _is_array(x) or _is_array(y):
            import numpy as np

            xa, ya = np.asarray(x), np.asarray(y)
            if xa.shape != ya.shape or xa.dtype != ya.dtype:
                return False
            if not np.array_equal(xa, ya, equal_nan=xa.dtype.kind in "fc"):
                return False
        elif type(x) is not type(y) or not (x == y or (_is_nan(x) and _is_nan(y))):
            return False
    return True


def _is_nan(x: Any) -> bool:
    return isinstance(x, (float, complex)) and x != x  # noqa: PLR0124 (nan is not itself)


def _same_tree(a: Any, b: Any) -> bool:
    if type(a) is not type(b) or tree_structure(a) != tree_structure(b):
        return False
    return _leaves_equal(tree_leaves(a), tree_leaves(b))


def _same_values(a: Any, b: Any) -> bool:
    """tc.load gives numpy arrays (or the framework's, see docs/files.md): compare values."""
    return tree_structure(a) == tree_structure(b) and _leaves_equal(
        [_as_numpy(x) for x in tree_leaves(a)], [_as_numpy(x) for x in tree_leaves(b)]
    )


def _check(
    what: str, original: Any, back: Any, same: Callable[[Any, Any], bool] = _same_tree
) -> None:
    if not same(original, back):
        raise AssertionError(
            f"{what} did not give the tree back: got {back!r}, expected {original!r}."
        )


def _registries() -> list[tuple[str, Callable[[Any], tuple[list[Any], Any]], Any]]:
    """``(name, flatten, unflatten(spec, leaves))`` for every installed registry."""
    out: list[tuple[str, Callable[[Any], tuple[list[Any], Any]], Any]] = [
        ("treeclass (embedded)", tree_flatten, TreeSpec.unflatten),
    ]
    jtu = _importable("jax.tree_util")
    if jtu is not None:
        out.append(("jax.tree_util", jtu.tree_flatten, jtu.tree_unflatten))
    torch_pytree = _importable("torch.utils._pytree")
    if torch_pytree is not None:
        out.append(("torch.utils._pytree", torch_pytree.tree_flatten, torch_pytree.tree_unflatten))
        if _importable("optree") is not None:
            cxx = _importable("torch.utils._cxx_pytree")
            if cxx is not None:
                out.append(("torch.utils._cxx_pytree", cxx.tree_flatten, cxx.tree_unflatten))
    optree = _importable("optree")
    if optree is not None:
        out.append(
            (
                "optree",
                lambda t: optree.tree_flatten(t, none_is_leaf=False, namespace="treeclass"),
                optree.tree_unflatten,
            )
        )
    return out


def assert_roundtrip(obj: Any) -> None:
    """Assert that ``obj`` comes back equal from every registry and serializer that applies.

    Checked, each against ``obj`` (same types, same structure, equal leaves; arrays compared
    with numpy, by shape, dtype and values):

    * flatten and unflatten in the embedded registry and in every installed framework registry
      (``jax.tree_util``, ``torch.utils._pytree`` and its C++ twin, ``optree``): a framework
      that is installed is imported, one that is not is skipped;
    * ``treespec_dumps`` / ``treespec_loads`` of the structure, when every class in it has a
      ``name=`` (an unnamed class cannot be serialized: the check is skipped);
    * ``pickle`` of the object;
    * ``tc.save`` / ``tc.load``, when the tree has an array leaf (numpy, JAX or torch);
    * ``jax.export``, when jax is installed and every leaf is a numeric numpy or JAX array
      (numpy scalars included): a jitted identity over the tree is exported, serialized,
      deserialized and called on the tree, and the deserialized ``in_tree`` / ``out_tree``
      (the classes' names, static values, structure) and the result are compared with the
      tree, its leaves as :func:`jax.numpy.asarray` makes them. Skipped when a class has no
      ``name=`` (or is an ``equinox.Module``, whose JAX node is equinox's), as the treespec
      check is, and for trees with other leaves (Python scalars, strings, torch tensors).

    Args:
        obj: a tree (instances of registered classes, containers, leaves).

    Raises:
        AssertionError: a registry or serializer gave back something else; the message names
            it.

    Example:
        >>> import treeclass as tc
        >>> from treeclass.testing import assert_roundtrip
        >>> @tc.pytree_dataclass(name="docs.testing.State")
        ... class State:
        ...     step: int
        ...     run: str = tc.field(static=True, default="a")
        >>> assert_roundtrip({"s": State(1), "t": (State(2), None)})
    """
    for name, flatten, unflatten in _registries():
        leaves, spec = flatten(obj)
        _check(f"flatten/unflatten in {name}", obj, unflatten(spec, leaves))
    leaves, spec = tree_flatten(obj)
    try:
        text = treespec_dumps(spec)
    except UnnamedClassError:
        pass
    else:
        _check("treespec_dumps/treespec_loads", obj, treespec_loads(text).unflatten(leaves))
    try:
        back = pickle.loads(pickle.dumps(obj))
    except Exception as e:  # (AttributeError or PicklingError: a class pickle cannot find)
        raise AssertionError(_pickle_failure(obj, spec, leaves, e)) from e
    _check("pickle", obj, back)
    if any(_is_array(x) for x in leaves):
        _check_save(obj)
    _check_jax_export(obj, leaves, spec)


def _by_module_path(cls: type) -> bool:
    """Whether pickle finds ``cls`` by its module path (``module.QualName``), as it looks."""
    try:
        return _find_by_path(cls.__module__, cls.__qualname__) is cls
    except Exception:  # (what pickle's lookup raises: the class is not found there)
        return False


def _pickle_failure(obj: Any, spec: TreeSpec, leaves: list[Any], e: Exception) -> str:
    """The message of a tree pickle refused: the classes it cannot find, and the fix."""
    classes = [entry[0].type for entry in spec._entries if entry is not None]
    classes += [type(leaf) for leaf in leaves]
    lost = [
        cls for cls in dict.fromkeys(classes) if not _by_module_path(cls) and not is_installed(cls)
    ]
    failed = f"pickle failed on {brief(obj, 200)}: {type(e).__name__}: {e}"
    if not lost:
        return f"{failed}."
    many = len(lost) > 1
    listed = ", ".join(qualname(cls) for cls in lost)
    return (
        f"{failed}; pickle finds a class by its module path, and the class{'es' * many} "
        f"{listed} {'are' if many else 'is'} not importable by module path (defined inside "
        "a function, or deleted or renamed in its module). Define "
        f"{'them' if many else 'it'} at module level, or register {'them' if many else 'it'} "
        'with a name (tc.pytree_dataclass(name="mypkg.Name"), pickle_by_name=True, the '
        "default) so that instances pickle by that name."
    )


def assert_schema_compatible(
    lock: str | os.PathLike[str],
    *,
    modules: Sequence[str],
    mode: str = "backward",
) -> None:
    """Assert that the classes ``modules`` register are compatible with a schema lock.

    What ``treeclass schema check MODULE ... --against LOCK --mode MODE`` checks, for
    pytest: the modules are imported, and the assertion fails with the command's report
    (each change, its verdict per loader family, and the fix of each breaking one).

    Args:
        lock: the lock file (written by ``treeclass schema dump MODULE ... -o PATH``).
        modules: the modules whose classes the lock holds.
        mode: ``"backward"`` (today's classes load what the locked ones wrote),
            ``"forward"`` (the locked classes load what today's write) or ``"full"`` (both).

    Raises:
        AssertionError: a change breaks loading in ``mode``; the message is the report.
        SchemaLockError: the lock cannot be read, or ``mode`` is not one of the three.

    Example:
        >>> from treeclass.__main__ import main  # the command line, in this process
        >>> from treeclass.testing import assert_schema_compatible
        >>> lock = tmp / "treeclass.lock.json"  # (in a repository: its root)
        >>> main(["schema", "dump", "treeclass._io.demo", "-o", str(lock)])
        0
        >>> assert_schema_compatible(lock, modules=["treeclass._io.demo"])
    """
    locked = schema.read_lock_file(os.fspath(lock))
    for module in modules:
        importlib.import_module(module)
    report = schema.check(locked, modules, mode)
    if not report.compatible:
        raise AssertionError(report.text())


def _jax_array_leaf(x: Any, jax: Any) -> bool:
    """A leaf :func:`_check_jax_export` passes as an argument: a numeric numpy or JAX array."""
    import numpy as np

    if isinstance(x, jax.Array):
        return True
    if not isinstance(x, (np.ndarray, np.generic)):
        return False
    kind: str = cast("Any", x).dtype.kind
    return kind in "biufc"


def _check_jax_export(obj: Any, leaves: list[Any], spec: TreeSpec) -> None:
    """``jax.export`` of a jitted identity over ``obj`` (see :func:`assert_roundtrip`)."""
    jax = _importable("jax")
    if jax is None or not leaves or not all(_jax_array_leaf(x, jax) for x in leaves):
        return
    jnp = importlib.import_module("jax.numpy")
    export = importlib.import_module("jax.export")

    args = [jnp.asarray(x) for x in leaves]  # what jit passes on (dtypes as JAX makes them)
    tree = spec.unflatten(args)
    try:
        expected_out = treespec_dumps(jax.tree_util.tree_structure(tree))
        expected_in = treespec_dumps(jax.tree_util.tree_structure(((tree,), {})))
    except UnnamedClassError:
        return  # a class jax.export cannot serialize: no name (or equinox's own node)
    what = "jax.export (export, serialize, deserialize, call)"
    try:
        exported = export.deserialize(export.export(jax.jit(_identity))(tree).serialize())
        out = exported.call(tree)
    except Exception as e:
        raise AssertionError(f"{what} failed on {obj!r}: {type(e).__name__}: {e}") from e
    for side, got, want in (
        ("in_tree", exported.in_tree, expected_in),
        ("out_tree", exported.out_tree, expected_out),
    ):
        try:
            text = treespec_dumps(got)
        except UnnamedClassError as e:
            raise AssertionError(f"{what} gave back an {side} treeclass cannot read: {e}") from e
        if text != want:
            raise AssertionError(
                f"{what} gave back the {side} {text}, expected {want} (the classes' names, "
                "static values and structure of the tree)."
            )
    _check(what, tree, out)


def _identity(tree: Any) -> Any:
    return tree


def _check_save(obj: Any) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tree.safetensors")
        try:
            save(path, obj)
        except UnnamedClassError:
            return
        back = load(path)
    _check("tc.save/tc.load", obj, back, _same_values)


def _as_numpy(x: Any) -> Any:
    if not _is_array(x):
        return x
    import numpy as np

    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _hypothesis() -> Any:
    try:
        return importlib.import_module("hypothesis.strategies")
    except ImportError:
        raise MissingDependencyError(
            "treeclass.testing's strategies need Hypothesis, which is not installed; "
            "install it with `pip install hypothesis`."
        ) from None


_CLASS_IDS = itertools.count()


def pytree_classes(*, named: bool = True, max_fields: int = 4) -> Any:
    """A Hypothesis strategy for new ``@tc.pytree_dataclass`` classes of random shape.

    Each class has 1 to ``max_fields`` fields with random names, some of them static (with a
    default) and some data fields with a default of ``None``; it is frozen or not. Every class
    drawn is registered (a new, unique name ``treeclass.testing.C<n>`` when ``named``), and
    stays registered for the rest of the process.

    Args:
        named: give each class a unique ``name=``, so that serializers apply to it.
        max_fields: the most fields a class has.

    Returns:
        A strategy of classes; each class's ``__treeclass_testing_fields__`` is a tuple of
        ``(name, static)`` pairs, in field order.

    Raises:
        MissingDependencyError: Hypothesis is not installed.

    Example:
        >>> from hypothesis import given, settings
        >>> from treeclass.testing import pytree_classes
        >>> @settings(max_examples=5)
        ... @given(pytree_classes())
        ... def test(cls):
        ...     assert cls.__treeclass_testing_fields__
        >>> test()
    """
    st = _hypothesis()

    def usable(s: str) -> bool:
        return not keyword.iskeyword(s) and s != "replace"

    def first(t: tuple[str, bool, bool]) -> str:
        return t[0]

    ident = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(usable)
    shape = st.lists(
        st.tuples(ident, st.booleans(), st.booleans()),
        min_size=1,
        max_size=max_fields,
        unique_by=first,
    )

    def build(spec: list[tuple[str, bool, bool]], frozen: bool) -> type:
        # Fields without a default first (dataclasses' rule), then the defaulted ones.
        ordered = sorted(spec, key=lambda t: t[1] or t[2])
        namespace: dict[str, Any] = {"__annotations__": {}}
        for fname, static, has_default in ordered:
            namespace["__annotations__"][fname] = Any
            if static:
                namespace[fname] = field(static=True, default="s")
            elif has_default:
                namespace[fname] = None
        n = next(_CLASS_IDS)
        cls = type(f"C{n}", (), namespace)
        cls.__module__ = __name__
        cls.__qualname__ = f"C{n}"
        name = f"treeclass.testing.C{n}" if named else None
        made = pytree_dataclass(name=name, frozen=frozen)(cls)
        made.__treeclass_testing_fields__ = tuple((f, s) for f, s, _ in ordered)  # type: ignore[attr-defined]
        return made

    return st.builds(build, shape, st.booleans())


def trees(
    leaves: Any = None, *, classes: Any = None, extra_nodes: Any = None, max_leaves: int = 20
) -> Any:
    """A Hypothesis strategy for nested trees of class instances, containers and leaves.

    Args:
        leaves: a strategy for the leaves (default: ints, floats without nan, short strings,
            booleans and ``None``).
        classes: a strategy for the classes whose instances appear (default:
            :func:`pytree_classes`).
        extra_nodes: more kinds of nodes: a function taking the strategy of children and
            returning a strategy of nodes built from them (instances of your own classes,
            other containers), drawn from as often as each built-in kind.
        max_leaves: passed to ``hypothesis.strategies.recursive``.

    Returns:
        A strategy of trees.

    Raises:
        MissingDependencyError: Hypothesis is not installed.

    Example:
        >>> from hypothesis import given, settings
        >>> from treeclass.testing import assert_roundtrip, trees
        >>> @settings(max_examples=10, deadline=None)
        ... @given(trees())
        ... def test(tree):
        ...     assert_roundtrip(tree)
        >>> test()
    """
    st = _hypothesis()
    if leaves is None:
        leaves = st.one_of(
            st.integers(-(2**40), 2**40),
            st.floats(allow_nan=False),
            st.text(max_size=4),
            st.booleans(),
            st.none(),
        )
    if classes is None:
        classes = pytree_classes()

    def instance(draw: Any, cls: Any, children: Any) -> Any:
        values = {}
        for fname, static in cls.__treeclass_testing_fields__:
            values[fname] = draw(st.sampled_from(["s", "t"])) if static else draw(children)
        return cls(**values)

    def nodes(children: Any) -> Any:
        def instances(draw: Any) -> Any:
            return instance(draw, draw(classes), children)

        kinds = [
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(st.text(max_size=3), children, max_size=3),
            st.composite(instances)(),
        ]
        if extra_nodes is not None:
            kinds.append(extra_nodes(children))
        return st.one_of(*kinds)

    return st.recursive(leaves, nodes, max_leaves=max_leaves)
