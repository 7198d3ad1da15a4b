"""The zygote of ``_subproc.run_script(..., preload=...)``: a server that forks fresh processes.

Run as ``python _zygote.py '["jax", "torch"]'`` by ``tests/_subproc.py`` (one per test process
and preload list, started on first use). It imports the listed frameworks -- only imports them:
no operation, no backend, and never treeclass -- then reads requests on stdin, one a line (the
path of a JSON file: argv, cwd, env, stdout and stderr files), forks one child per request and
answers on stdout ``pid PID`` at once, then ``exit PID CODE`` when the child ends (CODE
negative: the signal that killed it). Children run at the same time (the two processes of a
distributed job): a request is served while earlier children still run.

The child turns itself into the fresh process the request describes: its working directory,
environment, ``sys.path`` (as ``python -c``/``-m`` builds it from the request's ``PYTHONPATH``),
``sys.argv``, stdin from /dev/null, stdout and stderr into the request's files; it then runs
the script in a new ``__main__`` module as every process of the tests does, through
``tests/_as_main.py``, which ends it without tearing its modules down: in a fork, freeing the
objects would also write to, and so copy, every page the child shares with the zygote. So
treeclass and every user module are imported afresh in each child; only the preloaded
frameworks (and the standard library modules they use) are already imported.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import sys
import types
from pathlib import Path
from typing import Any

_AS_MAIN = (Path(__file__).resolve().parent / "_as_main.py").read_text()


def _serve() -> dict[str, Any]:
    """Fork one child per request; return the request, in the child only."""
    answer = os.dup(1)
    # SIGCHLD wakes the select below through this pipe (no thread: the zygote forks).
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 4096):
                    pass
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:  # no child left
                    break
                if pid == 0:
                    break
                os.write(answer, f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
        if 0 in ready:
            chunk = os.read(0, 4096)
            if not chunk:
                os._exit(0)  # the test process is gone
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (answer, wake_r, wake_w):
                        os.close(fd)
                    with open(line.decode().strip()) as f:
                        request: dict[str, Any] = json.load(f)
                    return request
                os.write(answer, f"pid {pid}\n".encode())


def _become(request: dict[str, Any], base_path: list[str]) -> None:
    """Turn this child into the fresh process ``request`` describes."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    argv = request["argv"]
    folders = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    first = "" if argv[0] == "-c" else os.getcwd()
    sys.path[:] = [first, *folders, *base_path]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


def _main() -> None:
    del sys.path[0]  # this file's folder
    server_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in sys.path if p not in server_path]
    for name in json.loads(sys.argv[1]):
        importlib.import_module(name)
    assert "treeclass" not in sys.modules, "the zygote must not import treeclass"
    # What the frameworks allocated stays shared with the children: a collection in a child
    # would otherwise write to (and so copy) every page of it.
    gc.freeze()
    request = _serve()
    _become(request, base_path)
    # Run it as a fresh process's ``python -c`` runs tests/_as_main.py, in a new ``__main__``
    # (that ends the process).
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv[:] = ["-c", *request["argv"]]
    exec(compile(_AS_MAIN, "<string>", "exec", dont_inherit=True), vars(main))


if __name__ == "__main__":
    _main()
