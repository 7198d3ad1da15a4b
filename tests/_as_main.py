# How every Python process of the tests runs its script: the source of this file is the
# ``python -c`` command of a fresh process (tests/_subproc.py), and what a child forked by the
# zygote runs (tests/_zygote.py), with ``sys.argv == ["-c", MODE, TARGET, *ARGS]``:
#
#   MODE "-c": run the source TARGET as ``python -c TARGET ARGS`` does;
#   MODE "-m": run the module TARGET as ``python -m TARGET ARGS`` does.
#
# It runs it in ``__main__`` with the ``sys.argv`` and ``sys.path[0]`` the interpreter gives, and
# ends as the interpreter's shutdown does in what a program sees of it: the exit status of
# ``SystemExit`` or of an uncaught exception (its traceback printed as the interpreter prints it),
# non-daemon threads joined, exit handlers run, stdout and stderr flushed. Then ``os._exit``: the
# modules are not torn down (freed object by object), which took a process that imported torch
# a third of a second of CPU, for nothing a test sees. So objects are not finalized at exit: a
# script closes the files it writes (``with open(...)``, ``Path.write_text``).
#
# Comments, not a docstring (it would be the ``__doc__`` of ``__main__``); it imports nothing
# before the script (``sys`` and ``os`` are imported at startup), so that what a test
# sees imported is what the script imported; and it leaves no name in ``__main__``.


def _run_as_main() -> None:
    import os
    import sys

    own = sys._getframe().f_code
    del globals()["_run_as_main"]
    mode, target = sys.argv[1:3]
    del sys.argv[1:3]
    status = 0
    try:
        if mode == "-c":
            code = compile(target, "<string>", "exec")
            exec(code, globals())
        else:
            import runpy

            sys.path[0] = os.getcwd()
            sys.argv[0] = "-m"
            runpy._run_module_as_main(target)  # type: ignore[attr-defined]  # python -m's call
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException as e:  # reported as the interpreter reports it
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code is own:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        status = 1
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # type: ignore[attr-defined]  # joins the non-daemon threads
    import atexit  # (only now: the script sees what it imported itself)

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: the interpreter's 120
            status = status or 120
    os._exit(status)


if __name__ == "__main__":
    _run_as_main()
