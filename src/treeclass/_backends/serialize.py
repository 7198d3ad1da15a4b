"""``treespec_dumps`` / ``treespec_loads``: any registry's structure to the document and back.

The embedded registry's :class:`~treeclass.TreeSpec` is converted here; a framework's structure
(JAX ``PyTreeDef``, torch ``TreeSpec``, optree ``PyTreeSpec``) by its adapter, found through the
:data:`~treeclass._backends.activation.FRAMEWORKS` table (so this module is in the adapters'
wing, above the document's). A ``TreeSpec`` pickles as its
document.
"""

from __future__ import annotations

import copyreg
from typing import Any, Literal, overload

from .._core.codegen import class_in_traceback
from .._core.tree import TreeSpec
from .._errors import (
    RegistrationError,
    TreeclassError,
    TreeclassTypeError,
    TreespecLoadError,
    brief,
    missing_framework,
    qualname,
)
from .._treespec.convert import refuse_dropping
from .._treespec.format import dumps_nodes, loads_spec, spec_to_nodes
from .activation import FRAMEWORKS, adapter, framework_named

__all__ = ["treespec_dumps", "treespec_loads"]

FrameworkName = Literal["jax", "torch", "optree"]


def treespec_dumps(spec: object) -> str:
    """Serialize ``spec`` to canonical, compact JSON text (named nodes, no module paths).

    Nodes are named by their registered names (built-in containers by fixed names), and
    static values by their JSON forms (see ``docs/format.md``); the same spec always gives the
    same text. The document is flat, so trees of any depth round-trip.

    ``spec`` may also be a JAX ``PyTreeDef``, a torch ``TreeSpec`` (``torch.utils._pytree``)
    or an optree ``PyTreeSpec`` (``torch.utils._cxx_pytree``'s too) made of built-in
    containers and treeclass-registered classes: the same structure gives the same document
    in every framework. A torch ``None`` is a leaf there, and so in the document, except the
    ``None`` fields torch keeps in a node's context (``return_none_fields=False``), which are
    written as ``None`` children as in every other registry; a torch dict must have its keys
    in sorted order (see ``docs/parity.md``).

    Args:
        spec: a :class:`~treeclass.TreeSpec` from :func:`~treeclass.tree_flatten` and friends,
            or a JAX, torch or optree structure.

    Returns:
        The JSON document, an ASCII ``str``.

    Raises:
        UnnamedClassError: a class, or a namedtuple, in the tree has no registered name.
        UnserializableStaticError: a static value has no JSON form (the message names the
            class, the field and the fix).
        StructureMismatchError: a torch dict's keys are not in sorted order.
        TreeclassTypeError: ``spec`` is not a structure object treeclass knows.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure({"a": (1, 2), "b": None})
        >>> tc.treespec_dumps(spec)
        '{"format":"treeclass.treespec","leaves":2,"nodes":[["dict",["a","b"],2],["tuple",null,2],null,null,["None",null,0]],"version":1}'
        >>> import jax  # doctest: +SKIP
        >>> treedef = jax.tree_util.tree_structure({"a": (1, 2), "b": None})  # doctest: +SKIP
        >>> tc.treespec_dumps(treedef) == tc.treespec_dumps(spec)  # doctest: +SKIP
        True

    .. versionadded:: 0.1.0
    """
    if isinstance(spec, TreeSpec):
        return dumps_nodes(spec_to_nodes(spec))
    for framework in FRAMEWORKS:
        if framework.owns_spec(spec):
            return dumps_nodes(adapter(framework).nodes_from_spec(spec))
    raise TreeclassTypeError(
        f"treespec_dumps() takes a treeclass TreeSpec, got {type(spec).__name__}; get one from "
        "tree_flatten() or tree_structure() (a JAX PyTreeDef, a torch TreeSpec or an optree "
        "PyTreeSpec is accepted too)."
    )


@overload
def treespec_loads(text: str | bytes | bytearray, *, to: None = None) -> TreeSpec: ...
@overload
def treespec_loads(text: str | bytes | bytearray, *, to: FrameworkName) -> Any: ...
def treespec_loads(text: str | bytes | bytearray, *, to: FrameworkName | None = None) -> Any:
    """Load a :class:`~treeclass.TreeSpec` from :func:`treespec_dumps` text, safely.

    Loading never imports a module or calls anything that was not registered: every node
    name must be registered in this process (import the modules that define the classes
    first). A document written before a class gained a field still loads if the new field
    is static with a default, or a data field whose default is ``None``.

    With ``to="jax"``, ``"torch"`` or ``"optree"`` the result is that framework's structure
    instead (a ``jax.tree_util.PyTreeDef``, a ``torch.utils._pytree.TreeSpec``, an optree
    ``PyTreeSpec`` of the global namespace): a structure flattened in one framework and
    saved unflattens the same leaves in another. That framework is imported then, and only
    then.

    Args:
        text: the JSON document, as ``str`` or UTF-8 ``bytes``.
        to: ``None`` (a treeclass ``TreeSpec``), ``"jax"``, ``"torch"`` or ``"optree"``.

    Returns:
        The spec; it equals the spec it was dumped from.

    Raises:
        UnregisteredNameError: a node or static type name is not registered here.
        TreespecLoadError: anything else wrong with the input (not JSON, a newer format
            version, wrong shapes or types, a truncated or edited document, a state that no
            longer fits its class, a structure the framework refuses); an unknown ``to``, or
            a ``to`` framework that is not installed or whose treeclass backend cannot be set
            up; ``to="torch"`` for a tree with a ``None`` node (a leaf in torch). Both are
            ``ValueError`` subclasses.

    Example:
        >>> import treeclass as tc
        >>> spec = tc.tree_structure([1, (2, 3)])
        >>> tc.treespec_loads(tc.treespec_dumps(spec)) == spec
        True
        >>> tc.treespec_loads(tc.treespec_dumps(spec), to="jax")  # doctest: +SKIP
        PyTreeDef([*, (*, *)])

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.0 ``to=`` (JAX, torch and optree structures).
    """
    spec = loads_spec(text)[1]
    if to is None:
        return spec
    framework = framework_named(to)
    if framework is None or not framework.spec_types:
        raise TreespecLoadError(
            f"treespec_loads(to={brief(to, 40)}) is not a framework treeclass converts to; "
            'use to="jax", to="torch", to="optree", or to=None for a treeclass TreeSpec.'
        )
    try:
        module = adapter(framework)
    except ImportError as e:
        missing = missing_framework(
            f"treespec_loads(to={to!r})", framework.name, e, otherwise=", or load with to=None"
        )
        raise TreespecLoadError(str(missing)) from e
    except RegistrationError as e:
        raise TreespecLoadError(
            f"treespec_loads(to={to!r}) cannot build a {framework.name} structure: {e}"
        ) from e
    refuse_dropping(spec, framework.name)
    try:
        return module.spec_from_spec(spec)
    except TreespecLoadError:
        raise
    except Exception as e:
        # The document was valid for treeclass, but building the framework's structure ran
        # code that refused it (the framework's own checks, a class's __post_init__ with
        # unflatten_calls_init=True): still a load error, never the framework's own.
        if isinstance(e, RecursionError):
            raise TreespecLoadError(
                f"the treespec loaded, but it nests too deeply for {framework.name} to build "
                "its structure (RecursionError); load it with to=None."
            ) from e
        kind = "treeclass" if isinstance(e, TreeclassError) else type(e).__name__
        cls = class_in_traceback(e)
        if cls is None:
            raise TreespecLoadError(
                f"the treespec loaded, but {framework.name} could not build its structure "
                f"from it ({kind}: {brief(str(e), 300)})."
            ) from e
        raise TreespecLoadError(
            f"the treespec loaded, but {framework.name} could not build its structure from "
            f"it: rebuilding a {qualname(cls)} node raised {kind}: {brief(str(e), 300)}; the "
            f"document holds a state {cls.__qualname__} refuses, so it was not written by "
            "treeclass from a valid object."
        ) from e


def _reduce_treespec(spec: TreeSpec) -> tuple[Any, tuple[str]]:
    """A ``TreeSpec`` pickles as its document: names, never classes or module paths."""
    return treespec_loads, (treespec_dumps(spec),)


copyreg.pickle(TreeSpec, _reduce_treespec)

# Public (and pickled) under the package name, where users find them.
treespec_dumps.__module__ = "treeclass"
treespec_loads.__module__ = "treeclass"
