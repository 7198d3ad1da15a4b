"""The typing case files are type-checked by ``tests/test_typing.py``, never imported or run."""

collect_ignore_glob = ["cases/*"]
