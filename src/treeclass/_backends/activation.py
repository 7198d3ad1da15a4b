"""The frameworks treeclass knows, and activating their adapters when they are imported.

:data:`FRAMEWORKS` is the one table of frameworks (``docs/contributing.md``); ``import
treeclass`` imports none of them. A framework already imported gets its adapter activated at
once; for the others a :data:`sys.meta_path` finder waits for the framework's module to finish
executing, then activates the adapter, which registers every class so far. Import order and
thread never matter (``docs/how-it-works.md``, "Frameworks and import order"), by five rules:

1. **Arm first, then look**: :func:`install` inserts the finder before it looks at
   :data:`sys.modules`; the one window left (an import past ``find_spec``, not yet in
   :data:`sys.modules`) is closed by :func:`retry`, called at every registration.
2. **Never import into a half-imported framework** (adapters import its submodules): through
   the finder, right after the module executed; imported half-way by another thread at
   ``import treeclass``, wait for it (bounded by :data:`WAIT_SECONDS`, then a waiter thread
   takes over); by this thread (treeclass imported inside the framework's import), a waiter
   thread; an import that fails meanwhile is watched again.
3. **Activation is serialised per framework, and awaited** (a reentrant lock; an "in
   progress" mark makes the finder's hook for the adapter module a no-op). Lock order: a
   framework's lock, then the registry's.
4. **A failed activation is an error, and is retried**, never breaking the user's ``import``:
   logged at ``ERROR``, warned, retried by :func:`retry` and :func:`activate_backends`. Only
   the main backend failing fails an activation; ``extras`` or ``activated()`` failing is
   reported alike, the framework stays active, and that part is run again.
5. **Readers never trust a half-imported module**: :func:`complete`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from _thread import RLock, start_new_thread
from collections.abc import Sequence
from time import monotonic, sleep
from types import FrameType, ModuleType
from typing import Any, Final, NamedTuple

from .._core import registry as _registry
from .._core.nodes import NodeType
from .._errors import RegistrationError, report_failures

__all__ = [
    "FRAMEWORKS",
    "WAIT_SECONDS",
    "Framework",
    "activate",
    "activate_backends",
    "adapter",
    "complete",
    "framework_named",
    "install",
    "module_installed",
    "retry",
]


class Framework(NamedTuple):
    """One row of :data:`FRAMEWORKS`.

    Attributes:
        name: what users call it (``treespec_loads(..., to=name)``).
        module: the module whose import activates the adapter.
        adapter: the treeclass module mirroring the registry into it (``docs/contributing.md``).
        spec_types: ``(module prefix, type name)`` of its structure objects (never imported).
        extras: treeclass modules whose ``BACKEND`` is activated with the adapter's, not listed
            by ``active_backends()``.
    """

    name: str
    module: str
    adapter: str
    spec_types: tuple[tuple[str, str], ...] = ()
    extras: tuple[str, ...] = ()

    def installed(self) -> bool:
        """Whether the framework's module can be imported here (nothing is imported)."""
        return module_installed(self.module)

    def owns_spec(self, spec: object) -> bool:
        """Whether ``spec`` is one of this framework's structure objects."""
        t = type(spec)
        return any(
            t.__module__.startswith(prefix) and t.__name__ == type_name
            for prefix, type_name in self.spec_types
        )


def module_installed(name: str) -> bool:
    """Whether module ``name`` can be imported here, without importing it or its packages.

    (``importlib.util.find_spec("flax.serialization")`` would import flax, and jax.)
    """
    import importlib.machinery
    import importlib.util

    def spec(name: str) -> object:
        parent = name.rpartition(".")[0]
        if not parent or parent in sys.modules:  # nothing left to import to look
            return importlib.util.find_spec(name)
        locations = getattr(spec(parent), "submodule_search_locations", None)
        return locations and importlib.machinery.PathFinder.find_spec(name, list(locations))

    try:
        return bool(spec(name))
    except (ImportError, ValueError):  # a package whose import failed; a module without spec
        return name in sys.modules


#: Every framework treeclass mirrors its registry into.
FRAMEWORKS: Final = (
    Framework("jax", "jax", "treeclass._backends.jax", (("jaxlib", "PyTreeDef"),)),
    Framework(
        "torch",
        "torch",
        "treeclass._backends.torch",
        (("torch.utils._pytree", "TreeSpec"), ("torch.utils._pytree", "LeafSpec")),
        extras=("treeclass._backends.torch_collate",),
    ),
    Framework("optree", "optree", "treeclass._backends.optree", (("optree", "PyTreeSpec"),)),
    Framework("flax", "flax.serialization", "treeclass._backends.flax"),
    Framework("optax", "optax", "treeclass._backends.optax"),
)

#: How long ``import treeclass`` waits for another thread's import of a framework before a
#: waiter thread takes over (rule 2).
WAIT_SECONDS: Final = 10.0
_POLL: Final = 0.001  # the first polling interval; a waiter thread backs off to _POLL_MAX
_POLL_MAX: Final = 0.05

_LOCK = RLock()  # guards the sets below; held only briefly, never across an import
# Rule 3: one reentrant lock per framework, held across its activation.
_ACTIVATING: Final = {f.name: RLock() for f in FRAMEWORKS}
_IN_PROGRESS: set[str] = set()  # frameworks whose activation holds their lock now
#: Module names the finder watches -> the framework to activate once that module is loaded.
_PENDING: dict[str, Framework] = {}
_HOOKED: set[str] = set()  # module names whose import the finder wrapped
_WAITING: set[str] = set()  # frameworks a waiter thread is watching
_ACTIVATED: set[str] = set()
_FAILED: dict[str, BaseException] = {}  # framework name -> why its activation failed
#: Active frameworks whose ``extras`` or ``activated()`` hook failed (see :func:`_finish`).
_INCOMPLETE: set[str] = set()


def framework_named(name: object) -> Framework | None:
    """The row of :data:`FRAMEWORKS` called ``name``, or ``None``."""
    return next((f for f in FRAMEWORKS if f.name == name), None)


def _initializing(module: object) -> bool:
    """Whether ``module`` is still executing (its import has not finished)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def complete(module_name: str) -> ModuleType | None:
    """``sys.modules[module_name]`` once its import has finished, else ``None`` (rule 5)."""
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
    """Import the framework and its adapter, active, for a caller that needs it now.

    Raises:
        ImportError: the framework is not installed.
        RegistrationError: the adapter could not be activated.
    """
    importlib.import_module(framework.module)
    if not activate(framework, raise_errors=True):
        # Another thread is still importing the framework, or this thread is inside its import.
        raise RegistrationError(
            f"treeclass's {framework.name} backend is not set up yet: {framework.module} is "
            "still being imported; use it once that import has finished."
        )
    return sys.modules[framework.adapter]


def activate(
    framework: Framework,
    *,
    raise_errors: bool = False,
    registering: str | None = None,
    executed: str | None = None,
) -> bool:
    """Import ``framework``'s adapter and let it register every class so far (rules 3, 4).

    Idempotent; ``True`` once active; ``False`` while the framework or the adapter is still
    being imported (the finder, or a waiter, activates it then).

    Raises:
        RegistrationError: with ``raise_errors``, instead of the warning; ``registering`` is
            the class whose registration asked (the message says it was not registered).
    """
    with _ACTIVATING[framework.name]:
        with _LOCK:
            if framework.name in _ACTIVATED:
                return True
            if framework.name in _IN_PROGRESS:
                return False  # this thread is inside the activation (the adapter's hook)

        def ready(name: str) -> bool:
            return name == executed or _ready(name)

        if not (
            ready(framework.module)
            and (ready(framework.adapter) or framework.adapter not in sys.modules)
        ):
            return False
        with _LOCK:
            _IN_PROGRESS.add(framework.name)
        try:
            return _activate(framework, raise_errors, registering)
        finally:
            with _LOCK:
                _IN_PROGRESS.discard(framework.name)


def _finish(
    framework: Framework, module: ModuleType
) -> tuple[list[tuple[str, Exception]], list[tuple[NodeType, Exception]]]:
    """Activate the framework's ``extras`` and run the adapter's ``activated()`` hook.

    Each runs even if another failed; idempotent; the caller holds the framework's lock.
    Returns what failed (``(what, error)``) and the classes the extras refused. An extra still
    being imported is left for :func:`retry`, unreported.
    """
    failed: list[tuple[str, Exception]] = []
    refused: list[tuple[NodeType, Exception]] = []
    waiting = False
    for extra in framework.extras:
        if extra in sys.modules and not _ready(extra):
            waiting = True
            continue
        try:
            refused += _registry.activate_backend(
                importlib.import_module(extra).BACKEND, framework=False
            )
        except Exception as e:
            failed.append((extra, e))
    activated = getattr(module, "activated", None)
    if activated is not None:  # what an adapter does once (optax: name its states)
        try:
            activated()
        except Exception as e:
            failed.append(("its activated() hook", e))
    with _LOCK:
        if failed or waiting:
            _INCOMPLETE.add(framework.name)
        else:
            _INCOMPLETE.discard(framework.name)
    return failed, refused


def _incomplete(framework: Framework, what: str, error: Exception) -> str:
    """The message of a part of an activation failing after the main backend's."""
    return (
        f"treeclass set up its {framework.name} backend, but not {what} ({type(error).__name__}: "
        f"{error}); treeclass classes are {framework.name} pytree nodes, but what that part "
        "adds is missing; fix the cause and call treeclass.activate_backends() to retry."
    )


def _activate(framework: Framework, raise_errors: bool, registering: str | None) -> bool:
    """Import the adapter and activate its backend (the caller holds the framework's lock)."""
    try:
        module = importlib.import_module(framework.adapter)
        refused = _registry.activate_backend(module.BACKEND)
    except Exception as e:
        with _LOCK:
            _FAILED[framework.name] = e
        if raise_errors:
            raise RegistrationError(_failed_again(framework, e, registering)) from e
        report_failures(
            [
                f"treeclass could not set up its {framework.name} backend ({type(e).__name__}: "
                f"{e}), so treeclass classes are not {framework.name} pytree nodes yet; it is "
                "tried again at the next registration, or call treeclass.activate_backends() to "
                "retry now."
            ],
            stacklevel=3,
        )
        return False
    with _LOCK:
        _ACTIVATED.add(framework.name)
        _FAILED.pop(framework.name, None)
        for name, f in list(_PENDING.items()):
            if f is framework:
                del _PENDING[name]
    failed, more = _finish(framework, module)
    # Reported once the state is settled (a warning may be an error, -W error).
    _registry.warn_missing(framework.name, refused + more)
    report_failures([_incomplete(framework, what, e) for what, e in failed], stacklevel=3)
    return True


def _retry_incomplete(quiet: bool = False) -> None:
    """Run again the parts of active frameworks' activations that failed (see :func:`_finish`).

    ``quiet`` (at a registration): a part failing again, already reported, is left as it is.

    Raises:
        RegistrationError: a part failed again (unless ``quiet``).
    """
    with _LOCK:
        names = sorted(_INCOMPLETE)
    for name in names:
        framework = framework_named(name)
        if framework is None:
            continue
        with _ACTIVATING[name]:
            with _LOCK:
                if name in _IN_PROGRESS:  # a registration made by the hook being retried
                    continue
                _IN_PROGRESS.add(name)
            try:
                failed, refused = _finish(framework, sys.modules[framework.adapter])
            finally:
                with _LOCK:
                    _IN_PROGRESS.discard(name)
        _registry.warn_missing(framework.name, refused)
        if failed and not quiet:
            what, e = failed[0]
            raise RegistrationError(_incomplete(framework, what, e)) from e


def _failed_again(framework: Framework, error: Exception, registering: str | None) -> str:
    """The message of a :class:`RegistrationError` for an activation that failed."""
    cause = f"{type(error).__name__}: {error}"
    if registering is not None:
        return (
            f"treeclass could not set up its {framework.name} backend again ({cause}), so "
            f"{registering} was not registered (nothing changed); fix the cause and register "
            "it again, or call treeclass.activate_backends()."
        )
    return (
        f"treeclass could not set up its {framework.name} backend ({cause}), so treeclass "
        f"classes are not {framework.name} pytree nodes; fix the cause and call "
        "treeclass.activate_backends() again."
    )


def _wait_then_activate(framework: Framework, deadline: float | None) -> bool:
    """Wait for another thread's import of the framework, then activate it (rule 2).

    ``False``: the deadline passed first (none: poll with a growing interval).
    """
    pause = _POLL
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
        sleep(pause)
        if deadline is None:
            pause = min(pause * 2, _POLL_MAX)


def _start_waiter(framework: Framework) -> None:
    """Start a thread that activates ``framework`` once its import completes."""
    with _LOCK:
        if framework.name in _WAITING:
            return
        _WAITING.add(framework.name)
    start_new_thread(_wait_then_activate, (framework, None))


def _settled(framework: Framework) -> bool:
    """Whether ``framework`` is active, or hooked to activate on import (under ``_LOCK``)."""
    return framework.name in _ACTIVATED or (
        framework.module in _HOOKED and framework.name not in _WAITING
    )


def retry(registering: str | None = None) -> None:
    """Activate what should be active and is not; called before every registration (rule 1).

    ``registering`` is the class being registered, if any (for the error message).

    Raises:
        RegistrationError: a failed activation failed again.
    """
    if _INCOMPLETE:
        _retry_incomplete(quiet=True)
    with _LOCK:
        failed = list(_FAILED)
        # Usually every framework is active or waits for its import (one look for all).
        todo = [f for f in FRAMEWORKS if not _settled(f)]
    for name in failed:
        framework = framework_named(name)
        if framework is not None and _ready(framework.module):
            activate(framework, raise_errors=True, registering=registering)
    for framework in todo:
        with _LOCK:
            skip = _settled(framework)
        module = None if skip else sys.modules.get(framework.module)
        if module is None:
            continue
        if _initializing(module):
            _start_waiter(framework)  # an import the finder did not see: let it finish
        else:
            activate(framework)  # (a waiter may not have woken up yet: no need to wait)


def activate_backends() -> tuple[str, ...]:
    """Retry every framework backend, and every class registration, that failed.

    treeclass sets a framework's backend up when the framework is imported, and a class's
    registration reaches every backend set up. If something fails there (treeclass logs it at
    ``ERROR`` on the ``treeclass`` logger and warns with a ``RuntimeWarning``), the framework
    keeps working but treeclass classes are not its pytree nodes. Each registration tries a
    failed backend again, and registering a class again with the same options retries it with
    the backends it is missing from; this does both at once, for every framework and every
    class.

    Returns:
        The names of the frameworks treeclass mirrors its registry into, as
        :func:`treeclass.active_backends` gives them.

    Raises:
        RegistrationError: a backend, or a class in a backend, failed again; the message names
            the framework, the class and the cause.

    Example:
        >>> import treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.Activated")
        ... class Activated:
        ...     x: float
        >>> tc.activate_backends() == tc.active_backends()
        True

    .. versionadded:: 0.1.0
    """
    retry()
    _retry_incomplete()
    _registry.retry_missing()
    return _registry.active_backends()


activate_backends.__module__ = "treeclass"


class _HookLoader:
    """Wraps a watched module's loader: runs it, then activates the framework's adapter."""

    def __init__(self, loader: Any, framework: Framework) -> None:
        self._loader = loader
        self._framework = framework

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Here, not in find_spec: importlib.util.find_spec runs the finder without importing.
        with _LOCK:
            _HOOKED.add(module.__name__)
        # Put the real loader back first, so that the module looks untouched.
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        # Only a warning made an error (-W error) escapes activate(); it is recorded, and the
        # user's import must not fail (the import system would drop the executed module).
        with contextlib.suppress(Exception):
            activate(self._framework, executed=module.__name__)

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
    """Arm the finder, then activate what is imported and wait for what is importing.

    Both the framework's module and its adapter are watched: whichever finishes importing
    last activates the adapter. The registry calls :func:`retry` before every registration.
    """
    _registry.set_before_register(retry)
    with _LOCK:  # rule 1: arm first ...
        for framework in FRAMEWORKS:
            if framework.name not in _ACTIVATED:
                _PENDING[framework.module] = framework
                _PENDING[framework.adapter] = framework
        if _PENDING and _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    for framework in FRAMEWORKS:  # ... then look (rule 2)
        module = sys.modules.get(framework.module)
        if module is None:
            continue  # the finder will see its import
        if not _initializing(module):
            activate(framework)
        elif _importing_here(module):
            _start_waiter(framework)  # waiting here would wait for ourselves
        elif not _wait_then_activate(framework, monotonic() + WAIT_SECONDS):
            _start_waiter(framework)  # that import waits for us: stop waiting
