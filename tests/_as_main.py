# How every Python process of the tests runs its script: the source of this file is the
# ``python -c`` command of a fresh process (tests/_subproc.py), and what a child forked by the
# zygote runs (tests/_zygote.py), with ``sys.argv == ["-c", MODE, TARGET, *ARGS]``:
#
#   MODE "-c": run the source TARGET as ``python -c TARGET ARGS`` does;
#   MODE "-m": run the module TARGET as ``python -m TARGET ARGS`` does.
#
# It runs it in ``__main__`` with the ``sys.argv`` and ``sys.path[0]`` the interpreter gives (and,
# from Python 3.13, the source lines its tracebacks show), and ends as the interpreter's
# shutdown does in what a program sees of it: the exit status of ``SystemExit`` or of an uncaught
# exception (its traceback printed as the interpreter prints it; a ``KeyboardInterrupt`` ends
# the process by SIGINT), non-daemon threads joined, exit handlers run, Python's and C's output
# streams flushed (a failed flush: status 120). Then ``os._exit``: the modules are not torn
# down (freed object by object), which took a process that imported torch a third of a second
# of CPU, for nothing a test sees. So the objects still alive at exit are not finalized: a
# script closes the files it writes (``with open(...)``, ``Path.write_text``). What differs
# from the interpreter: this runner's frame is under the script's (``sys._getframe(1)`` at
# module level), and C-level exit handlers do not run.
#
# Comments, not a docstring (it would be the ``__doc__`` of ``__main__``); it imports nothing
# before the script (``sys`` and ``os`` are imported at startup, and ``linecache`` from 3.13),
# so that what a test sees imported is what the script imported; and it leaves no name in
# ``__main__``.


def _run_as_main() -> None:
    import os
    import sys

    own = sys._getframe().f_code
    del globals()["_run_as_main"]
    mode, target = sys.argv[1:3]
    del sys.argv[1:3]
    status = 0
    interrupted = False
    try:
        if mode == "-c":
            if sys.version_info >= (3, 13):  # where tracebacks show a -c command's lines
                import linecache

                lines = [line + "\n" for line in target.splitlines()]
                linecache.cache["<string>"] = (len(target), None, lines, "<string>")
            code = compile(target, "<string>", "exec", dont_inherit=True)
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
        interrupted = isinstance(e, KeyboardInterrupt)
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # type: ignore[attr-defined]  # joins the non-daemon threads
    import atexit  # (only now: the script sees what it imported itself)
    import ctypes

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None or getattr(stream, "closed", False):
            continue  # as the interpreter skips them
        try:
            stream.flush()
        except Exception:  # a broken stream: the interpreter's status
            status = 120
    ctypes.CDLL(None).fflush(None)  # what C extensions printed
    if interrupted:  # as the interpreter ends on an uncaught KeyboardInterrupt
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status)


if __name__ == "__main__":
    _run_as_main()
