"""Post-import hooks: mirror the registry into a framework as soon as it is imported.

``import treeclass`` never imports jax, torch or optree. If one of them is already imported,
its adapter is activated at once; otherwise a small :data:`sys.meta_path` finder (built on
:mod:`importlib.util` alone, which costs nothing to import) waits for the framework's top-level
package to finish executing, then activates the adapter, which registers every class
decorated so far. Classes decorated later are registered as they are decorated. Import order
therefore never matters.

A failure inside a hook never breaks the user's ``import``: it becomes a ``RuntimeWarning``.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from _thread import RLock

TYPE_CHECKING = False  # typing costs ~10 ms to import; checkers treat this as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType
    from typing import Any, Final

__all__ = ["WATCHED", "activate", "install"]

#: Framework top-level package -> treeclass adapter module.
WATCHED: Final[dict[str, str]] = {
    "jax": "treeclass.backends.jax",
    "torch": "treeclass.backends.torch",
    "optree": "treeclass.backends.optree",
}

_LOCK = RLock()
_PENDING: set[str] = set()
_ACTIVATED: set[str] = set()


def activate(framework: str) -> None:
    """Import the adapter for ``framework`` and let it register every class so far."""
    with _LOCK:
        if framework in _ACTIVATED:
            return
        _ACTIVATED.add(framework)
        _PENDING.discard(framework)
    name = WATCHED[framework]
    partial = sys.modules.get(name)
    if partial is not None and getattr(getattr(partial, "__spec__", None), "_initializing", False):
        # The adapter is being imported and imported the framework itself (a user imported
        # ``treeclass.backends.jax`` first): every adapter activates itself when its module
        # finishes executing, so there is nothing to do yet.
        return
    try:
        adapter = importlib.import_module(name)
        adapter.activate()  # idempotent: importing an adapter already activated it
    except Exception as e:
        with _LOCK:
            _ACTIVATED.discard(framework)  # let a later import try again
        warnings.warn(
            f"treeclass could not set up its {framework} backend ({type(e).__name__}: {e}); "
            f"treeclass classes will not be {framework} pytree nodes in this process.",
            RuntimeWarning,
            stacklevel=2,
        )


class _HookLoader:
    """Wraps a framework's loader: runs it, then activates the treeclass adapter."""

    def __init__(self, loader: Any, framework: str) -> None:
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
        activate(self._framework)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder:
    """A meta path finder that only ever answers for the watched top-level packages."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> Any:
        if fullname not in _PENDING:
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
        setattr(spec, "loader", _HookLoader(spec.loader, fullname))  # noqa: B010 (typed as Loader)
        return spec

    def invalidate_caches(self) -> None:
        return None


_FINDER: Final = _PostImportFinder()


def install() -> None:
    """Activate adapters for frameworks already imported; watch for the others."""
    for framework in WATCHED:
        if framework in sys.modules:
            activate(framework)
        else:
            with _LOCK:
                if framework not in _ACTIVATED:
                    _PENDING.add(framework)
    if _PENDING and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
