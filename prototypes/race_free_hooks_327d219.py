"""PROTOTYPE (issue 13): race-free post-import hooks for the core before the restructure.

A drop-in for ``treeclass._hooks`` of 327d219. ``race_free_hooks.py`` is the same design for
the restructured ``_hooks.py`` (FRAMEWORKS table); port that one.

Not part of the package. ``prototypes/run_races.py`` loads this file as ``treeclass._hooks``
before ``import treeclass`` (``TREECLASS_HOOKS_PROTOTYPE=path``) to measure it against the same
races as the current module; the design is written up in the notes of issue 13 for porting into
the restructured ``_hooks.py`` (its FRAMEWORKS table replaces :data:`WATCHED`).

The rules:

1. **Arm first, then look.** The meta path finder is inserted *before* ``install`` looks at
   ``sys.modules``, so an import that starts in another thread while ``install`` runs is either
   seen by the finder (and activated by it) or already in ``sys.modules`` (and handled below).
2. **Never import into a framework that is still being imported.** An adapter (which imports
   framework submodules such as ``jax.export``) is only imported once the framework's top-level
   module has finished executing:

   - imports that go through the finder activate right after the framework's module code ran,
     in the importing thread (as today);
   - a framework found half-imported by ``install`` (another thread is inside ``import jax``):
     ``import treeclass`` *waits* for that import to finish (polling, holding no lock the other
     import needs), then activates. No treeclass class can exist before ``import treeclass``
     returns, so nothing can see the backend missing. If the framework's own import depends on
     this thread (it imports a module this thread is still importing), the wait ends after
     :data:`WAIT_SECONDS` and a waiter thread takes over;
   - a framework half-imported by *this* thread (treeclass imported from inside the
     framework's own import) is handed to a waiter thread, which activates it as soon as the
     import completes;
   - a half-imported framework whose import then fails is watched again.
3. **Activation is serialised per framework and awaited.** A second caller waits until the
   first activation finished instead of returning early (so ``import treeclass`` never returns
   while another thread is half-way through activating).
4. **A failed activation is an error, and can be retried.** It is recorded; the user's
   ``import jax`` is not broken (a ``RuntimeWarning`` says what failed and how to retry), but
   :func:`retry` -- which the registry calls before every registration, and which would be public
   as ``treeclass.activate_backends()`` -- activates it again and raises
   :class:`~treeclass.RegistrationError` if it fails again.
5. **Readers never trust a half-imported module** (``_complete``): the torch adapter's view of
   optree is patched here (``_complete_optree``) to ignore an optree that another thread is still
   importing (port into ``backends/torch.py``'s ``_optree``).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from _thread import allocate_lock, start_new_thread
from time import monotonic, sleep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType, ModuleType
    from typing import Any, Final

__all__ = ["WATCHED", "activate", "failures", "install", "retry"]

WATCHED: Final[dict[str, str]] = {
    "jax": "treeclass.backends.jax",
    "torch": "treeclass.backends.torch",
    "optree": "treeclass.backends.optree",
}

#: How long ``import treeclass`` waits for another thread's import of a framework.
WAIT_SECONDS: Final = 10.0
_POLL: Final = 0.001

_STATE_LOCK = allocate_lock()
_FRAMEWORK_LOCKS = {name: allocate_lock() for name in WATCHED}
_WATCHING: set[str] = set()  # not imported yet: the finder activates them
_HOOKED: set[str] = set()  # imports the finder wrapped (their loader activates them)
_ACTIVE: set[str] = set()
_FAILED: dict[str, BaseException] = {}


# --- looking at modules -------------------------------------------------------------------------


def _initializing(module: object) -> bool:
    """Whether ``module``'s code is still running (``importlib`` marks its spec meanwhile)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _complete(name: str) -> ModuleType | None:
    """``sys.modules[name]`` if it exists and has finished executing, else ``None``."""
    module = sys.modules.get(name)
    return None if module is None or _initializing(module) else module


def _importing_in_this_thread(module: ModuleType) -> bool:
    """Whether this thread is running ``module``'s code (treeclass imported from inside it)."""
    namespace = module.__dict__
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is namespace:
            return True
        frame = frame.f_back
    return False


def _complete_optree() -> Any:
    """PORT into backends/torch.py ``_optree``: optree only once its import has finished."""
    return _complete("optree")


# --- activation -----------------------------------------------------------------------------------


def _import_adapter(framework: str) -> None:
    name = WATCHED[framework]
    partial = sys.modules.get(name)
    if partial is not None and _initializing(partial):
        # The adapter is being imported (a user imported it directly, and it imported the
        # framework): it activates itself when its module finishes executing.
        return
    adapter: Any = importlib.import_module(name)
    adapter.activate()  # idempotent: importing an adapter already activated it
    if framework == "torch":
        adapter._optree = _complete_optree  # PROTOTYPE patch, see _complete_optree


def activate(framework: str, *, raise_errors: bool = False) -> bool:
    """Activate ``framework``'s adapter once its import is complete; ``True`` if active.

    Serialised per framework: a concurrent caller waits for the first one to finish. A failure
    is recorded (see :func:`retry`) and reported as a ``RuntimeWarning``, or raised as a
    :class:`~treeclass.RegistrationError` with ``raise_errors``.
    """
    with _FRAMEWORK_LOCKS[framework]:
        with _STATE_LOCK:
            if framework in _ACTIVE:
                return True
        try:
            _import_adapter(framework)
        except Exception as e:
            with _STATE_LOCK:
                _FAILED[framework] = e
            message = (
                f"treeclass could not set up its {framework} backend ({type(e).__name__}: {e}); "
                f"treeclass classes are not {framework} pytree nodes until it is set up. It is "
                "tried again at the next registration, or call treeclass.activate_backends()."
            )
            if raise_errors:
                from treeclass import RegistrationError

                raise RegistrationError(message) from e
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            return False
        with _STATE_LOCK:
            _ACTIVE.add(framework)
            _FAILED.pop(framework, None)
            _WATCHING.discard(framework)
        return True


def failures() -> dict[str, BaseException]:
    """The frameworks whose activation failed, with the error."""
    with _STATE_LOCK:
        return dict(_FAILED)


_WAITERS: set[str] = set()


def retry() -> None:
    """Activate failed frameworks again (raising if one fails again) and any the finder missed.

    The registry calls this before each registration (outside its own lock: activation takes
    the registry lock itself), so a failure is never silent for long. The second part closes
    the one window rule 1 leaves: an import that had already passed ``find_spec`` (before the
    finder was armed) but had not yet put its module into ``sys.modules`` when ``install``
    looked.

    Raises:
        RegistrationError: a framework's adapter failed to activate again.
    """
    for framework in list(failures()):
        if _complete(framework) is not None:
            activate(framework, raise_errors=True)
    with _STATE_LOCK:
        missed = [f for f in _WATCHING if f in sys.modules and f not in _WAITERS]
    for framework in missed:
        module = sys.modules.get(framework)
        if module is None:
            continue
        if framework in _HOOKED:
            continue  # the finder saw it: its own hook activates it
        if not _initializing(module):
            activate(framework)
        else:
            with _STATE_LOCK:
                _WAITERS.add(framework)
            start_new_thread(_waiter, (framework,))


def _wait_then_activate(framework: str, deadline: float | None) -> bool:
    """Wait until ``framework``'s import finished; activate it (``False``: gave up waiting)."""
    while True:
        module = sys.modules.get(framework)
        if module is None:  # the import failed: watch for the next attempt
            with _STATE_LOCK:
                _WATCHING.add(framework)
            return True
        if not _initializing(module):
            activate(framework)
            return True
        if deadline is not None and monotonic() > deadline:
            return False
        sleep(_POLL)


def _waiter(framework: str) -> None:
    _wait_then_activate(framework, None)


# --- the finder ---------------------------------------------------------------------------------


class _HookLoader:
    """Wraps a framework's loader: runs it, then activates the treeclass adapter."""

    def __init__(self, loader: Any, framework: str) -> None:
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
        # The framework's module code has run to the end: importing its submodules is safe.
        activate(self._framework)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder:
    """A meta path finder that only ever answers for the watched top-level packages."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> Any:
        if fullname not in _WATCHING:
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
        setattr(spec, "loader", _HookLoader(spec.loader, fullname))  # noqa: B010
        with _STATE_LOCK:
            _HOOKED.add(fullname)
        return spec

    def invalidate_caches(self) -> None:
        return None


_FINDER: Final = _PostImportFinder()


def install() -> None:
    """Arm the finder, then activate what is imported and wait for what is being imported."""
    with _STATE_LOCK:
        for framework in WATCHED:
            if framework not in _ACTIVE:
                _WATCHING.add(framework)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)  # 1. arm first ...
    for framework in WATCHED:  # ... then look
        module = sys.modules.get(framework)
        if module is None:
            continue  # the finder will see its import
        with _STATE_LOCK:
            _WATCHING.discard(framework)  # its import started before the finder was armed
        if not _initializing(module):
            activate(framework)
        elif _importing_in_this_thread(module):
            start_new_thread(_waiter, (framework,))  # waiting here would wait for ourselves
        elif not _wait_then_activate(framework, monotonic() + WAIT_SECONDS):
            start_new_thread(_waiter, (framework,))  # its import waits for us: stop waiting
