"""PROTOTYPE (issue 13): race-free activation, a drop-in for the restructured ``_hooks.py``.

Same API as ``treeclass._hooks`` on main (``FRAMEWORKS``, ``Framework``, ``framework_named``,
``adapter``, ``activate``, ``install``) plus ``retry`` and ``failures``; the table and the
finder are main's, unchanged. ``prototypes/run_races.py`` loads this file as
``treeclass._hooks`` (``TREECLASS_HOOKS_PROTOTYPE=path``) before ``import treeclass``.
(``race_free_hooks_327d219.py`` is the same design for the core before the restructure.)

What changes, rule by rule (each marked ``RULE n`` below):

1. **Arm first, then look.** ``install`` inserts the finder (watching every framework not yet
   active) *before* it looks at ``sys.modules``: an import that starts meanwhile is seen by the
   finder or is already in ``sys.modules``. The remaining window (an import past ``find_spec``
   but not yet in ``sys.modules``) is closed by :func:`retry` at the next registration.
2. **Never import into a half-imported framework, and never give up on it.** Main's
   ``activate`` already refuses to import an adapter while the framework is initializing -- but
   then nothing activates it later when the import was started before the finder existed (the
   backend stays off, silently: ``tests/test_races.py`` on main). Here ``install``:
   - framework done -> activate now;
   - half-imported by **another** thread -> wait for it (poll ``__spec__._initializing``,
     holding no lock the other import needs) and activate; no treeclass class can exist before
     ``import treeclass`` returns, so nothing sees the backend missing. Bounded
     (:data:`WAIT_SECONDS`) in case that import waits for this thread; then a waiter thread;
   - half-imported by **this** thread (treeclass imported from inside the framework's own
     import) -> a waiter thread activates it when the import completes;
   - an import that fails meanwhile -> watched again.
3. **Activation is serialised per framework and awaited**: a second caller blocks until the
   first finished instead of returning early.
4. **A failed activation is an error, and is retried.** Recorded; the user's ``import`` is not
   broken (``RuntimeWarning`` saying how to retry); :func:`retry` -- for the registry to call at
   the start of ``register`` (before its own lock: activation takes the registry lock), and as a
   public ``treeclass.activate_backends()`` -- activates again and raises ``RegistrationError``
   if it fails again.
5. **Readers never trust a half-imported module**: :func:`complete` (port into
   ``_backends/torch.py``'s ``_optree``, which the prototype patches at activation).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from _thread import RLock, start_new_thread
from collections.abc import Sequence
from time import monotonic, sleep
from types import FrameType, ModuleType
from typing import Any, Final

__all__ = [
    "FRAMEWORKS",
    "Framework",
    "activate",
    "adapter",
    "complete",
    "failures",
    "framework_named",
    "install",
    "retry",
]


class Framework:
    """One row of :data:`FRAMEWORKS` (as on main)."""

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


#: Every framework treeclass mirrors its registry into (main's table, unchanged).
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

#: How long ``import treeclass`` waits for another thread's import of a framework.
WAIT_SECONDS: Final = 10.0
_POLL: Final = 0.001

_LOCK = RLock()
# RULE 3. Reentrant: importing the adapter runs the finder's hook for the adapter module, which
# calls activate() again in the same thread; _IN_PROGRESS makes that inner call a no-op.
_ACTIVATING = {f.name: RLock() for f in FRAMEWORKS}
_IN_PROGRESS: set[str] = set()
#: Module names the finder watches -> the framework to activate once that module is loaded.
_PENDING: dict[str, Framework] = {}
_HOOKED: set[str] = set()  # module names whose import the finder wrapped
_WAITING: set[str] = set()  # frameworks a waiter thread is watching
_ACTIVATED: set[str] = set()
_FAILED: dict[str, BaseException] = {}


def framework_named(name: object) -> Framework | None:
    """The row of :data:`FRAMEWORKS` called ``name``, or ``None``."""
    return next((f for f in FRAMEWORKS if f.name == name), None)


def _initializing(module: object) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def complete(module_name: str) -> ModuleType | None:
    """RULE 5: ``sys.modules[module_name]`` once it has finished executing, else ``None``."""
    module = sys.modules.get(module_name)
    return None if module is None or _initializing(module) else module


def _ready(module_name: str) -> bool:
    return complete(module_name) is not None


def _importing_here(module: ModuleType) -> bool:
    """Whether this thread is running ``module``'s code (we are inside its import)."""
    namespace = module.__dict__
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is namespace:
            return True
        frame = frame.f_back
    return False


def adapter(framework: Framework) -> ModuleType:
    """Import the framework and its adapter; make sure the adapter is active; return it."""
    importlib.import_module(framework.module)
    module = importlib.import_module(framework.adapter)
    activate(framework, raise_errors=True)
    return module


def activate(framework: Framework, *, raise_errors: bool = False) -> bool:
    """Import ``framework``'s adapter and let it register every class so far.

    Idempotent; ``True`` once active. Does nothing (``False``) while the framework or the
    adapter is still being imported. RULE 3: serialised per framework, and a concurrent caller
    waits for the first. RULE 4: a failure is recorded for :func:`retry` and reported as a
    ``RuntimeWarning`` (or raised as ``RegistrationError`` with ``raise_errors``).
    """
    with _ACTIVATING[framework.name]:
        with _LOCK:
            if framework.name in _ACTIVATED:
                return True
            if framework.name in _IN_PROGRESS:
                return False  # this thread is activating it already (see _ACTIVATING)
        if not (
            _ready(framework.module)
            and (_ready(framework.adapter) or framework.adapter not in sys.modules)
        ):
            return False
        with _LOCK:
            _IN_PROGRESS.add(framework.name)
        try:
            return _activate(framework, raise_errors)
        finally:
            with _LOCK:
                _IN_PROGRESS.discard(framework.name)


def _activate(framework: Framework, raise_errors: bool) -> bool:
    """Import the adapter and activate its backend (the caller holds the framework's lock)."""
    try:
        module: Any = importlib.import_module(framework.adapter)
        from treeclass._registry import activate_backend

        activate_backend(module.BACKEND)
        if framework.name == "torch":
            module._optree = _complete_optree  # PROTOTYPE patch (RULE 5)
    except Exception as e:
        with _LOCK:
            _FAILED[framework.name] = e
        message = (
            f"treeclass could not set up its {framework.name} backend ({type(e).__name__}: "
            f"{e}); treeclass classes are not {framework.name} pytree nodes until it is set "
            "up: it is tried again at the next registration (or call "
            "treeclass.activate_backends())."
        )
        if raise_errors:
            from treeclass import RegistrationError

            raise RegistrationError(message) from e
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return False
    with _LOCK:
        _ACTIVATED.add(framework.name)
        _FAILED.pop(framework.name, None)
        for name, f in list(_PENDING.items()):
            if f is framework:
                del _PENDING[name]
    return True


def _complete_optree() -> Any:
    return complete("optree")


def failures() -> dict[str, BaseException]:
    """The frameworks whose activation failed, with the error."""
    with _LOCK:
        return dict(_FAILED)


def _wait_then_activate(framework: Framework, deadline: float | None) -> bool:
    """RULE 2: wait for another thread's import; activate. ``False``: stopped waiting."""
    while True:
        module = sys.modules.get(framework.module)
        if module is None:  # that import failed: watch the next attempt
            with _LOCK:
                _PENDING[framework.module] = framework
                _WAITING.discard(framework.name)
            return True
        if not _initializing(module):
            with _LOCK:
                _WAITING.discard(framework.name)
            activate(framework)
            return True
        if deadline is not None and monotonic() > deadline:
            return False
        sleep(_POLL)


def _waiter(framework: Framework) -> None:
    _wait_then_activate(framework, None)


def _start_waiter(framework: Framework) -> None:
    with _LOCK:
        if framework.name in _WAITING:
            return
        _WAITING.add(framework.name)
    start_new_thread(_waiter, (framework,))


def retry() -> None:
    """RULE 4 and the end of RULE 1, for the registry to call before each registration.

    Activates again every framework whose activation failed (raising ``RegistrationError`` if
    it fails again), and any framework that was imported without the finder seeing it.
    """
    for name in list(failures()):
        framework = framework_named(name)
        if framework is not None and _ready(framework.module):
            activate(framework, raise_errors=True)
    for framework in FRAMEWORKS:
        with _LOCK:
            skip = (
                framework.name in _ACTIVATED
                or framework.name in _WAITING
                or framework.module in _HOOKED
            )
        module = None if skip else sys.modules.get(framework.module)
        if module is None:
            continue
        if _initializing(module):
            _start_waiter(framework)
        else:
            activate(framework)


class _HookLoader:
    """Wraps a watched module's loader: runs it, then activates the framework's adapter."""

    def __init__(self, loader: Any, framework: Framework) -> None:
        self._loader = loader
        self._framework = framework

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
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
        setattr(spec, "loader", _HookLoader(spec.loader, framework))  # noqa: B010
        with _LOCK:
            _HOOKED.add(fullname)
        return spec

    def invalidate_caches(self) -> None:
        return None


_FINDER: Final = _PostImportFinder()


def install() -> None:
    """RULE 1: arm the finder, then activate what is imported and wait for what is importing."""
    with _LOCK:
        for framework in FRAMEWORKS:
            if framework.name not in _ACTIVATED:
                _PENDING[framework.module] = framework
                _PENDING[framework.adapter] = framework
        if _PENDING and _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    for framework in FRAMEWORKS:  # ... then look (RULE 2)
        module = sys.modules.get(framework.module)
        if module is None:
            continue  # the finder will see its import
        if not _initializing(module):
            activate(framework)
        elif _importing_here(module):
            _start_waiter(framework)  # waiting here would wait for ourselves
        elif not _wait_then_activate(framework, monotonic() + WAIT_SECONDS):
            _start_waiter(framework)  # that import waits for us: stop waiting
