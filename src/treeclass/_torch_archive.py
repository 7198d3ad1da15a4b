"""Check a ``.pt2`` archive before ``torch.export.load`` reads it.

What ``torch.export.load`` (torch 2.13.0) does with an archive that can run code, and what this
module refuses (unless the caller passes ``trusted=True`` to :func:`treeclass.torch.load`):

========================================  =====================================================
archive part (torch 2.13.0 source)        what torch does with it
========================================  =====================================================
``data/sample_inputs/<model>.pt``         ``torch.load(weights_only=True)``, and on *any*
(``_export/serde/serialize.py``,          failure ``torch.load(weights_only=False)``: a full
``deserialize_torch_artifact``)           unpickling (arbitrary code)
``data/weights/<path>`` with              ``torch.load(weights_only=False)``
``use_pickle`` (``export/pt2_archive/
_package.py``, ``_load_state_dict``)
``data/weights/<model>.pt`` (legacy)      as the example inputs (weights-only, then full)
``data/constants/tensor_*`` with          ``torch.load(weights_only=False)``
``use_pickle`` (``_load_constants``)
``data/constants/<model>.pt`` (legacy)    as the example inputs
``data/constants/opaque_obj_*``           ``pickle.loads`` (arbitrary code)
``data/constants/custom_obj_*``           ``torch._C._pickle_load_obj`` (TorchScript
                                          unpickler: registered torchbind classes by name)
``data/aotinductor/...``                  compiled shared libraries, loaded and run
``expr_str`` of symbolic sizes in         ``sympy.sympify``, which evaluates the text
``models/<model>.json``                   as Python (``_parse_sym_expr``)
``in_spec`` / ``out_spec`` of the         ``torch.utils._pytree.treespec_loads``: imports
module call graph                         enum modules and ``defaultdict`` factory modules
``guards_code`` of the program            run as Python source (``exec``) by
                                          ``ExportedProgram.module()`` (``export/_unlift.py``,
                                          ``_convert_guards_code_to_fn``)
========================================  =====================================================

Pickles are accepted when ``torch.load(weights_only=True)`` -- torch's restricted unpickler,
which only rebuilds tensors and a fixed set of plain types -- loads them; then torch's own,
later, full unpickling of the same bytes can only reach the same allow-listed globals. Symbolic
expressions and guards are accepted only when their Python syntax tree uses nothing but
numbers, the sympy / torch functions torch itself writes there, and plain names. Treespecs go
through treeclass's own reader (:mod:`treeclass._torch_treespec`), which never imports.

The archive is read with torch's own reader (``torch.export.pt2_archive.PT2ArchiveReader``), so
the checks see exactly the records torch will read.
"""

from __future__ import annotations

import ast
import io
import os
import re
from typing import IO, Any, Final

from ._errors import TreespecLoadError
from ._torch_treespec import parse_json, treespec_from_json

__all__ = ["CHECKED_TORCH_VERSION", "UnsafeArchiveError", "check_archive"]

#: The torch release whose archive layout and loader this module was checked against.
CHECKED_TORCH_VERSION: Final = "2.13.0"

_ARCHIVE_VERSION: Final = "0"
_TRUST: Final = (
    "If you trust where the file comes from, load it with "
    "treeclass.torch.load(..., trusted=True), which is torch.export.load."
)


class UnsafeArchiveError(TreespecLoadError):
    """An archive holds something that would run code when ``torch.export.load`` reads it.

    Raised by :func:`treeclass.torch.load` unless it is called with ``trusted=True``.
    """

    __module__ = "treeclass.torch"


def _unsafe(source: str, what: str, detail: str) -> UnsafeArchiveError:
    return UnsafeArchiveError(
        f"treeclass.torch.load refuses {source}: {what} {detail}; torch.export.load would run "
        f"code stored in the file to load it. {_TRUST}"
    )


# --- pickles ----------------------------------------------------------------------------------

_GLOBAL: Final = re.compile(r"GLOBAL ([\w.]+)")


def _check_pickle(data: bytes, source: str, what: str, record: str) -> None:
    """Refuse ``data`` unless torch's weights-only unpickler loads it."""
    from torch.serialization import load

    try:
        load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        names = sorted(set(_GLOBAL.findall(str(e))))
        why = (
            f"is a pickle that names {', '.join(names)}, which torch.load(weights_only=True) "
            "does not allow"
            if names
            else f"is a pickle torch.load(weights_only=True) refuses ({type(e).__name__})"
        )
        raise _unsafe(source, what, f"({record}) {why}") from None


# --- symbolic expressions and guards ------------------------------------------------------------

# Functions torch writes in ``expr_str`` (sympy.srepr of its shape expressions) and in guards.
# fmt: off
_EXPR_FUNCS: Final = frozenset((
    "Add", "Mul", "Pow", "Integer", "Rational", "Float", "Symbol", "Dummy", "Max", "Min", "Abs",
    "Mod", "floor", "ceiling", "sqrt", "exp", "log", "Equality", "Unequality", "StrictLessThan",
    "StrictGreaterThan", "LessThan", "GreaterThan", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And",
    "Or", "Not", "Xor", "ITE", "Piecewise", "ExprCondPair", "Tuple", "BooleanTrue",
    "BooleanFalse", "Infinity", "NegativeInfinity", "IntInfinity", "NegativeIntInfinity", "NaN",
    "Zero", "One", "NegativeOne", "Half",
    # torch.utils._sympy.functions (the names torch's deserializer passes to sympify)
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt",
    "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt",
    "RoundDecimal", "ToFloat", "Identity",
))
# fmt: on
_EXPR_FUNC_PATTERN: Final = re.compile(r"(OpaqueUnaryFn|BitwiseFn)_[a-z0-9_]+")
_EXPR_NAMES: Final = frozenset(
    ("oo", "zoo", "nan", "true", "false", "pi", "E", "I", "int_oo", "True", "False", "None")
)
# Powers and shifts by a constant evaluate at once: bound them (10**(10**9) would never end).
_POWERS: Final = frozenset(("Pow", "PowByNatural", "FloatPow", "LShift", "RShift"))
_MAX_EXPONENT: Final = 64
_SAFE_TEXT: Final = re.compile(r"[A-Za-z0-9_.+\-]{0,100}")
_OPERATORS: Final = (ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context)
_MAX_SOURCE: Final = 100_000

_GUARD_NAMES: Final = frozenset(
    ("L", "math", "torch", "inf", "IsNonOverlappingAndDenseIndicator",
     "cast_symbool_to_symint_guardless")
)  # fmt: skip
_GUARD_METHODS: Final = frozenset(("size", "stride", "storage_offset", "dim", "numel"))
_MATH: Final = frozenset(
    ("floor", "ceil", "trunc", "isnan", "isinf", "isfinite", "inf", "sqrt", "log2", "log",
     "exp", "fabs", "pi", "e")
)  # fmt: skip


def _constant_ok(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, str) and bool(_SAFE_TEXT.fullmatch(value)) and "__" not in value


def _small_power(node: ast.AST) -> bool:
    """Whether an exponent (or shift) is symbolic or a small constant."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("Integer", "Float", "Rational")
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        node = node.args[0]
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Constant):
        value = node.value
        try:
            return abs(float(value)) <= _MAX_EXPONENT  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return False
    return True


def _parse(text: object, kind: str) -> ast.Expression:
    if not isinstance(text, str) or len(text) > _MAX_SOURCE:
        raise TreespecLoadError(f"a {kind} in the archive is not a string of sensible size.")
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise TreespecLoadError(
            f"the {kind} {text[:120]!r} in the archive is not a Python expression."
        ) from None


def _expr_problem(text: object) -> str | None:
    """Why ``text`` (an ``expr_str``) is not a plain sympy expression, or ``None``."""
    tree = _parse(text, "symbolic size")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.keyword, *_OPERATORS)):
            if isinstance(node, ast.keyword) and not (
                node.arg is not None
                and re.fullmatch(r"[a-z][a-z_]{0,40}", node.arg)
                and isinstance(node.value, ast.Constant)
            ):
                return f"the keyword {node.arg!r}"
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if not isinstance(func, ast.Name) or not (
                func.id in _EXPR_FUNCS or _EXPR_FUNC_PATTERN.fullmatch(func.id)
            ):
                return f"a call of {ast.unparse(func)[:60]!r}"
            if func.id in _POWERS and len(node.args) == 2 and not _small_power(node.args[1]):
                return f"{func.id} with a large constant exponent"
        elif isinstance(node, ast.Name):
            if node.id not in _EXPR_NAMES and not (
                node.id in _EXPR_FUNCS or _EXPR_FUNC_PATTERN.fullmatch(node.id)
            ):
                return f"the name {node.id!r}"
        elif isinstance(node, ast.Constant):
            if not _constant_ok(node.value):
                return f"the constant {node.value!r:.60}"
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Pow, ast.LShift, ast.RShift)) and not _small_power(
                node.right
            ):
                return "a power with a large constant exponent"
        elif not isinstance(node, (ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return f"a {type(node).__name__} expression"
    return None


def _guard_problem(text: object) -> str | None:
    """Why ``text`` (one of ``guards_code``) is not a plain shape guard, or ``None``."""
    if isinstance(text, str) and any(c in text for c in '#\\\n\r"'):
        return "a comment, a backslash, a double quote or a line break"
    tree = _parse(text, "guard")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, *_OPERATORS)):
            continue
        if isinstance(node, ast.Name):
            if node.id not in _GUARD_NAMES:
                return f"the name {node.id!r}"
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "math":
                ok = node.attr in _MATH
            elif isinstance(base, ast.Name) and base.id == "torch":
                ok = node.attr.startswith("sym_") and node.attr.isidentifier()
            else:
                ok = node.attr in _GUARD_METHODS and not isinstance(base, ast.Name)
            if not ok:
                return f"the attribute {ast.unparse(node)[:60]!r}"
        elif isinstance(node, ast.Call):
            func = node.func
            if node.keywords or not (
                isinstance(func, ast.Attribute)
                or (isinstance(func, ast.Name) and func.id in _GUARD_NAMES - {"L", "math", "torch"})
            ):
                return f"a call of {ast.unparse(func)[:60]!r}"
        elif isinstance(node, ast.Constant):
            if not _constant_ok(node.value):
                return f"the constant {node.value!r:.60}"
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Pow, ast.LShift, ast.RShift)) and not _small_power(
                node.right
            ):
                return "a power with a large constant exponent"
        elif not isinstance(node, (ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript)):
            return f"a {type(node).__name__} expression"
    return None


# --- the model document ---------------------------------------------------------------------------


def _get(value: Any, key: str) -> Any:
    """``value[key]`` if ``value`` is a JSON object holding it, else ``None``."""
    return value.get(key) if value.__class__ is dict else None


def _list(value: Any) -> list[Any]:
    return value if value.__class__ is list else []


def _check_treespecs(doc: Any) -> None:
    for entry in _list(_get(_get(doc, "graph_module"), "module_call_graph")):
        signature = _get(entry, "signature")
        for key in ("in_spec", "out_spec"):
            text = _get(signature, key)
            if text is not None:
                treespec_from_json(text)  # never imports; names what is not registered


def _check_model(doc: Any, source: str, record: str, treespecs_only: bool) -> None:
    if doc.__class__ is not dict:
        raise TreespecLoadError(f"{record} in {source} is not a JSON object.")
    if treespecs_only:
        _check_treespecs(doc)
        return
    # Every symbolic size, anywhere in the graph (an iterative walk: the document is big).
    stack: list[Any] = [doc]
    while stack:
        value: Any = stack.pop()
        if value.__class__ is dict:
            expr: Any = _get(value, "expr_str")
            if expr is not None:
                problem = _expr_problem(expr)
                if problem is not None:
                    raise _unsafe(
                        source,
                        "a symbolic size",
                        f"({record}: {str(expr)[:120]!r}) uses {problem}, and torch evaluates "
                        "it with sympy.sympify, which runs it as Python",
                    )
            stack.extend(value.values())
        elif value.__class__ is list:
            stack.extend(value)
    guards: Any = _get(doc, "guards_code") or []
    if guards.__class__ is not list:
        raise TreespecLoadError(f'"guards_code" of {record} in {source} is not a list.')
    guard: Any
    for guard in guards:
        problem = _guard_problem(guard)
        if problem is not None:
            raise _unsafe(
                source,
                "a guard",
                f"({record}: {str(guard)[:120]!r}) uses {problem}, and "
                "ExportedProgram.module() runs every guard as Python source",
            )
    _check_treespecs(doc)


# --- the archive --------------------------------------------------------------------------------


def _payloads(reader: Any, record: str, source: str) -> list[tuple[str, Any]]:
    """``(path_name, metadata)`` of every entry of a weights or constants config."""
    config: Any = _get(parse_json(reader.read_bytes(record), f"{record} in {source}"), "config")
    if config.__class__ is not dict:
        raise TreespecLoadError(f'{record} in {source} has no "config" object.')
    out: list[tuple[str, Any]] = []
    fqn: Any
    meta: Any
    for fqn, meta in config.items():
        path: Any = _get(meta, "path_name")
        if path.__class__ is not str:
            raise TreespecLoadError(
                f"entry {str(fqn)[:80]!r} of {record} in {source} has no path_name."
            )
        out.append((path, meta))
    return out


def check_archive(
    f: str | os.PathLike[str] | IO[bytes], source: str, *, treespecs_only: bool = False
) -> None:
    """Refuse an archive that ``torch.export.load`` could only load by running its code.

    ``f`` is read with torch's archive reader; a file object is left where it was. With
    ``treespecs_only``, only the program's treespecs are read (to name a missing class).

    Raises:
        UnsafeArchiveError: the archive holds a pickle the weights-only unpickler refuses,
            an opaque or TorchScript object, compiled code, or Python text torch would run.
        UnregisteredNameError: a treespec of the program names a class not registered here.
        TreespecLoadError: the archive is not one this release can check.
    """
    from torch.export.pt2_archive import PT2ArchiveReader

    # torch's reader takes a str or a file object (a Path would be taken for a file object).
    target: Any
    start: int | None
    if isinstance(f, (str, os.PathLike)):
        target, start = os.fspath(f), None
    else:
        target, start = f, f.tell()
    try:
        try:
            reader = PT2ArchiveReader(target)
        except (RuntimeError, AssertionError, ValueError) as e:
            raise TreespecLoadError(
                f"{source} is not a .pt2 archive torch.export.save wrote ({str(e)[:160]})."
            ) from None
        names = reader.get_file_names()
        present = set(names)
        if treespecs_only:
            for n in names:
                if n.startswith("models/") and n.endswith(".json"):
                    _check_model(parse_json(reader.read_bytes(n), n), source, n, True)
            return
        if any(n.startswith("data/aotinductor/") for n in names):
            raise _unsafe(
                source,
                "it holds AOTInductor-compiled code (data/aotinductor/)",
                "that torch loads as a shared library",
            )
        version = reader.read_bytes("archive_version") if "archive_version" in present else b""
        if version.decode("utf-8", "replace") != _ARCHIVE_VERSION:
            raise TreespecLoadError(
                f"{source} has archive version {version[:20]!r}; treeclass checks the layout "
                f"torch {CHECKED_TORCH_VERSION} writes (version {_ARCHIVE_VERSION}), so it "
                f"cannot tell whether loading it is safe. {_TRUST}"
            )
        models = [
            n[len("models/") : -len(".json")]
            for n in names
            if n.startswith("models/") and n.endswith(".json")
        ]
        for model in models:
            legacy = f"data/weights/{model}.pt"
            if legacy in present:
                _check_pickle(reader.read_bytes(legacy), source, "its weights", legacy)
            config_record = f"data/weights/{model}_weights_config.json"
            if legacy not in present and config_record in present:
                for path, meta in _payloads(reader, config_record, source):
                    if _get(meta, "use_pickle"):
                        record = f"data/weights/{path}"
                        if record in present:
                            _check_pickle(reader.read_bytes(record), source, "a weight", record)
            legacy = f"data/constants/{model}.pt"
            if legacy in present:
                _check_pickle(reader.read_bytes(legacy), source, "its constants", legacy)
            config_record = f"data/constants/{model}_constants_config.json"
            if legacy not in present and config_record in present:
                for path, meta in _payloads(reader, config_record, source):
                    record = f"data/constants/{path}"
                    if path.startswith("opaque_obj_"):
                        raise _unsafe(
                            source,
                            f"a constant ({record})",
                            "is an opaque object that torch restores with pickle.loads",
                        )
                    if path.startswith("custom_obj_"):
                        raise _unsafe(
                            source,
                            f"a constant ({record})",
                            "is a TorchScript custom-class object that torch restores by "
                            "class name with its TorchScript unpickler",
                        )
                    if _get(meta, "use_pickle") and record in present:
                        _check_pickle(reader.read_bytes(record), source, "a constant", record)
            inputs = f"data/sample_inputs/{model}.pt"
            if inputs in present:
                data = reader.read_bytes(inputs)
                if data:
                    try:
                        _check_pickle(data, source, "its example inputs", inputs)
                    except UnsafeArchiveError as e:
                        raise UnsafeArchiveError(
                            f"{e} Or save the program with treeclass.torch.save, which leaves "
                            "the example inputs out."
                        ) from None
            record = f"models/{model}.json"
            _check_model(parse_json(reader.read_bytes(record), record), source, record, False)
    finally:
        if start is not None:
            target.seek(start)
