"""The frameworks treeclass knows, and activating their adapters when they are imported.

:data:`FRAMEWORKS` is the one table of frameworks: adding one is a row here plus a module in
``treeclass/_backends/`` (see ``docs/contributing.md``). ``import treeclass`` imports none of
them. A framework already imported gets its adapter activated at once; for the others a small
:data:`sys.meta_path` finder (built on :mod:`importlib.util` alone) waits for the framework's
module to finish executing, then activates the adapter, which registers every class so far.
Classes registered later reach every active adapter as they are registered, so import order
never matters. A failure inside a hook never breaks the user's ``import``: it becomes a
``RuntimeWarning``, and the activation is tried again the next time it can be.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from _thread import RLock
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

__all__ = ["FRAMEWORKS", "Framework", "activate", "adapter", "framework_named", "install"]


class Framework:
    """One row of :data:`FRAMEWORKS`.

    Attributes:
        name: what users call it (``treespec_loads(..., to=name)``).
        module: the module whose import activates the adapter.
        adapter: the treeclass module (in ``treeclass._backends``) that mirrors the registry
            into the framework: it defines ``BACKEND`` and, if the framework has a structure
            object treeclass converts, ``nodes_from_spec`` / ``spec_from_nodes``.
        spec_types: ``(module prefix, type name)`` of the framework's structure objects, to
            recognise them without importing anything.
    """

    __slots__ = ("adapter", "module", "name", "spec_types")

    def __init__(
        self, name: str, module: str, adapter: str, spec_types: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.name = name
        self.module = module
        self.adapter = adapter
        self.spec_types = spec_types

    def owns_spec(self, spec: object) -> bool:
        """Whether ``spec`` is one of this framework's structure objects."""
        t = type(spec)
        return any(
            t.__module__.startswith(prefix) and t.__name__ == type_name
            for prefix, type_name in self.spec_types
        )

    def __repr__(self) -> str:
        return f"Framework({self.name!r})"


#: Every framework treeclass mirrors its registry into.
FRAMEWORKS: Final = (
    Framework("jax", "jax", "treeclass._backends.jax", (("jaxlib", "PyTreeDef"),)),
    Framework(
        "torch",
        "torch",
        "treeclass._backends.torch",
        (("torch.utils._pytree", "TreeSpec"), ("torch.utils._pytree", "LeafSpec")),
    ),
    Framework("optree", "optree", "treeclass._backends.optree", (("optree", "PyTreeSpec"),)),
    Framework("flax", "flax.serialization", "treeclass._backends.flax"),
)

_LOCK = RLock()
#: Module names the finder watches -> the framework to activate once that module is loaded.
_PENDING: dict[str, Framework] = {}
_ACTIVATED: set[str] = set()


def framework_named(name: object) -> Framework | None:
    """The row of :data:`FRAMEWORKS` called ``name``, or ``None``."""
    return next((f for f in FRAMEWORKS if f.name == name), None)


def _ready(module_name: str) -> bool:
    """Whether ``module_name`` has finished executing (imported and not still initializing)."""
    module = sys.modules.get(module_name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def adapter(framework: Framework) -> ModuleType:
    """Import the framework and its adapter; make sure the adapter is active; return it.

    For callers that need the framework now (``treespec_loads(..., to=...)``).
    """
    importlib.import_module(framework.module)
    module = importlib.import_module(framework.adapter)
    activate(framework)
    return module


def activate(framework: Framework) -> None:
    """Import ``framework``'s adapter and let it register every class so far (idempotent).

    Does nothing while the framework or the adapter is still being imported: the finder
    activates the adapter once they are done.
    """
    with _LOCK:
        if framework.name in _ACTIVATED:
            return
        if not (
            _ready(framework.module)
            and (_ready(framework.adapter) or framework.adapter not in sys.modules)
        ):
            return
        _ACTIVATED.add(framework.name)
    try:
        module = importlib.import_module(framework.adapter)
        from ._registry import activate_backend

        activate_backend(module.BACKEND)
    except Exception as e:
        with _LOCK:
            _ACTIVATED.discard(framework.name)  # a later import tries again
        warnings.warn(
            f"treeclass could not set up its {framework.name} backend ({type(e).__name__}: "
            f"{e}); treeclass classes will not be {framework.name} pytree nodes in this process.",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    with _LOCK:
        for name, f in list(_PENDING.items()):
            if f is framework:
                del _PENDING[name]


class _HookLoader:
    """Wraps a watched module's loader: runs it, then activates the framework's adapter."""

    def __init__(self, loader: Any, framework: Framework) -> None:
        self._loader = loader
        self._framework = framework

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Put the real loader back first, so that the module looks untouched.
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        if spec is not None:
            spec._initializing = False  # done executing; the import system clears it next
        activate(self._framework)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder:
    """A meta path finder that only ever answers for the watched modules."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> Any:
        framework = _PENDING.get(fullname)
        if framework is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        setattr(spec, "loader", _HookLoader(spec.loader, framework))  # noqa: B010 (typed as Loader)
        return spec

    def invalidate_caches(self) -> None:
        return None


_FINDER: Final = _PostImportFinder()


def install() -> None:
    """Activate adapters for frameworks already imported; watch for the others.

    Both the framework's module and its adapter are watched, so that whichever finishes
    importing last activates the adapter (a user may import an adapter directly).
    """
    for framework in FRAMEWORKS:
        if framework.module in sys.modules:
            activate(framework)
        with _LOCK:
            if framework.name not in _ACTIVATED:
                _PENDING[framework.module] = framework
                _PENDING[framework.adapter] = framework
    with _LOCK:
        if _PENDING and _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
