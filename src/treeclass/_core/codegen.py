"""Generate a class's pytree functions as Python source, compile it once, bind it per registry.

A class's functions come in families (:class:`Family`), each one source text written from its
:class:`~treeclass._core.fields.ClassInfo` (one line per field, no loops), made once per
class from a template compiled once per shape of class (see "templates" below; a family other
than :data:`CORE` only when first bound) and put into :mod:`linecache` as
``<treeclass generated pkg.mod.Point>`` (``... [tag]>`` for another family), so that
tracebacks and ``inspect.getsource`` show it. A registry gets its own function objects, made
from that code (no ``exec``) with a namespace of its own (:meth:`Generated.bind`): its key
type, the embedded registry's node type, JAX's hash check; only the functions it uses. Nothing
here looks at the class itself; the rebuild plan says how.

- **core** (:data:`CORE`: embedded registry, JAX, optree): every data field is a child,
  ``None`` included; the auxdata is the tuple of static values.
- An adapter whose framework needs another form defines its own :class:`Family` from the
  builders below (:func:`flatten_lines`, :func:`unflatten_blocks`, ...) and binds it with
  ``bind(..., family=...)``.
"""

from __future__ import annotations

import builtins
import linecache
import operator
import os
import re
import sys
from _thread import allocate_lock
from collections.abc import Callable, Collection
from types import CodeType, FunctionType
from typing import Any, Final, cast

from .._errors import RebuildError
from .fields import ClassInfo, FieldInfo, RebuildPlan, Store

__all__ = [
    "CORE",
    "INDENT",
    "Family",
    "Generated",
    "class_in_traceback",
    "compile_function",
    "flatten_lines",
    "generate",
    "join_blocks",
    "release",
    "set_tracing_check",
    "tuple_display",
    "unflatten_blocks",
    "unpack_lines",
]

#: One level of indentation in generated source.
INDENT: Final = "    "
_I: Final = INDENT


class Family:
    """A family of generated functions: one source per class, compiled once, bound per registry.

    Attributes:
        tag: shown in the :mod:`linecache` filename, ``<treeclass generated pkg.mod.Point
            [tag]>`` (``""``: no suffix, the core family).
        functions: the names of the functions the source defines that :meth:`Generated.bind`
            returns.
        write: ``info -> source`` of a class.
    """

    __slots__ = ("functions", "tag", "write")

    def __init__(
        self, tag: str, functions: tuple[str, ...], write: Callable[[ClassInfo], str]
    ) -> None:
        self.tag = tag
        self.functions = functions
        self.write = write

    def __repr__(self) -> str:
        return f"<treeclass codegen family {self.tag or 'core'!r}>"


#: A family's code for one class (shared by every class of the same shape and field names, see
#: "templates" below): the linecache filename of its source, its functions' code by name, the
#: names of the functions that read the key globals (``_k0``, ...), the names of the family's
#: functions that its functions call by name (the helpers, ``_unflatten_traced``), and whether
#: the class owns the linecache entry (compiled for it alone; dropped by :func:`release`).
_Entry = tuple[str, dict[str, CodeType], frozenset[str], frozenset[str], bool]


class Generated:
    """One class's generated sources, each compiled once, ready to be bound per registry."""

    __slots__ = ("_canonical", "_code", "_globals", "_lock", "info")

    def __init__(self, info: ClassInfo, globals_: dict[str, Any]) -> None:
        self.info = info
        self._globals = globals_
        self._code: dict[Family, _Entry] = {}
        self._lock = allocate_lock()
        self._canonical: _Canonical | None = None

    def filename(self, family: Family | None = None) -> str | None:
        """The :mod:`linecache` filename of a family's source, once it has been compiled."""
        entry = self._code.get(CORE if family is None else family)
        return None if entry is None else entry[0]

    def source(self, family: Family | None = None) -> str:
        """A family's source text (the core family's by default)."""
        return (CORE if family is None else family).write(self.info)

    def compile(self, family: Family) -> CodeType:
        """A family's whole code object (its functions' code as bound), made when asked for.

        Binding uses the functions' code only (kept, see :func:`_code`); this is for tests
        and tools.
        """
        filename, codes, _, _, _ = self._entry(family)
        canonical = self._canonical
        if canonical is None:
            return compile(self.source(family), filename, "exec")
        shape, names = canonical
        template, _ = _template(family, self.info, shape)
        code = _rename(template, _names_of(shape, names), filename)
        # The functions' code is the one bound, not a copy of it.
        consts = tuple([codes[c.co_name] if type(c) is CodeType else c for c in code.co_consts])
        return code.replace(co_consts=consts)

    def _entry(self, family: Family) -> _Entry:
        """A family's filename, functions' code by name, the functions reading keys, ..."""
        entry = self._code.get(family)
        if entry is None:
            with self._lock:
                entry = self._code.get(family)
                if entry is None:
                    tag = f" [{family.tag}]" if family.tag else ""
                    if self._canonical is None and _TEMPLATES_ON:
                        self._canonical = _canonical(self.info)
                    entry = _code(self.info, family, tag, self._canonical)
                    self._code[family] = entry
        return entry

    def rebuild_function(
        self, what: str, head: list[str], value_of: dict[str, str], namespace: dict[str, Any]
    ) -> Callable[..., Any]:
        """Compile a function that ends by building an instance the way ``unflatten`` does.

        ``head``: the function's ``def`` line and first lines, which set the locals that
        ``value_of`` names (every field's value); the instance is then made and each field
        restored exactly as ``unflatten`` does (the same lines; not its Dynamo-traceable
        variant), and returned. ``namespace``: further globals. Each call compiles a new
        function with its own :mod:`linecache` entry (see :func:`compile_function`): callers
        compile once per class.
        """
        info = self.info
        lines = [*head, *_rebuild(info, value_of), f"{_I}return obj"]
        ns: dict[str, Any] = dict(self._globals)
        ns.update(namespace)
        func = head[0][len("def ") : head[0].index("(")]
        return compile_function(info.cls, what, "\n".join(lines) + "\n", ns, func)

    def bind(
        self,
        tag: str,
        *,
        key: Callable[[str], Any],
        family: Family | None = None,
        functions: Collection[str] | None = None,
        in_class_globals: bool = False,
        **extra: Any,
    ) -> dict[str, Callable[..., Any]]:
        """A family's functions, bound to a registry's helpers.

        Each function object is made from the family's code for this class (no ``exec``); the
        registry's key objects are made only when a function that reads them is bound.

        Args:
            tag: the registry's name, shown in the functions' qualified names (``""`` for the
                embedded registry).
            key: makes the registry's key object for a field name (``GetAttrKey``).
            family: the family to bind (:data:`CORE` by default).
            functions: the functions wanted (all of the family's by default); the helpers they
                call (names starting with ``_``) are bound with them.
            in_class_globals: bind into the class's own namespace (which registries with
                nothing of their own share, and :meth:`rebuild_function` starts from) rather
                than a copy of it: for the embedded registry, once per class (no dict of its
                own per class).
            **extra: further globals: ``_nt``, ``_leaf_types`` and ``_mixed`` (the embedded
                registry's fast path), ``_check_aux`` (JAX's explanation of an unhashable
                static value), ``_tracing`` (see :func:`set_tracing_check`).
        """
        family = CORE if family is None else family
        wanted = family.functions if functions is None else functions
        _, codes, keyed, called, _ = self._entry(family)
        keys = bool(keyed) and not keyed.isdisjoint(wanted)
        ns: dict[str, Any]
        if in_class_globals or keys or extra or called:
            ns = self._globals if in_class_globals else self._globals.copy()
            if keys:
                _keys(key, self.info.data_fields, ns)
            ns.update(extra)
        else:
            # Nothing of the registry's own: the class's globals, shared.
            ns = self._globals
        cls = self.info.cls
        qualname = cls.__qualname__
        module = cls.__module__
        suffix = f"[{tag}]" if tag else ""
        out: dict[str, Callable[..., Any]] = {}
        for func, code in codes.items():
            if func in wanted:
                fn = FunctionType(code, ns)
                fn.__qualname__ = f"{qualname}.<treeclass {func}{suffix}>"
                fn.__module__ = module
                fn.__doc__ = _doc(func)
                out[func] = fn
                if func in called:
                    ns[func] = fn
            elif func in called:  # a helper of the functions (_unflatten_traced)
                ns[func] = FunctionType(code, ns)
        return out


#: ``(key maker, field name) -> key``: a registry's key objects are immutable values, shared
#: by every class with a field of that name.
_KEYS: dict[tuple[Callable[[str], Any], str], Any] = {}
#: Every set of key-reading functions (:meth:`Generated._entry`), kept once.
_KEYED: dict[frozenset[str], frozenset[str]] = {}


def _keys(key: Callable[[str], Any], names: tuple[str, ...], ns: dict[str, Any]) -> None:
    """Set the key globals ``_k0``, ... of fields ``names`` in ``ns`` (``key(name)`` each)."""
    keys = _KEYS
    for i, name in enumerate(names):
        made = keys.get((key, name))
        if made is None:
            made = keys.setdefault((key, name), key(name))
        ns[_KEY_NAMES[i] if i < len(_KEY_NAMES) else f"_k{i}"] = made


_KEY_NAMES: Final = tuple([f"_k{i}" for i in range(64)])


def _doc(func: str) -> str:
    """The docstring of a generated function (one string per function name)."""
    doc = _DOCS.get(func)
    if doc is None:
        doc = _DOCS.setdefault(func, f"Generated by treeclass: {func} (see its __qualname__).")
    return doc


_DOCS: dict[str, str] = {}

#: How the filename of every generated source starts.
_FILENAME: Final = "<treeclass generated "


# --- templates: one compile per shape -----------------------------------------------------------
#
# Compiling is most of what registering a class costs, and most classes have one of few shapes
# (how many data and static fields, how they are stored). A family's source is written once for
# a *canonical* class of that shape, whose field names are placeholders (``_tcf0_``, aliases
# ``_tca0_``), and compiled once. A class gets the template's code with the placeholders
# replaced by its names, in the code objects' names and constants -- exactly what compiling its
# own source gives. Classes of the same shape *and field names* have the same source, and share
# its code: one code object per function, whatever the number of such classes (HuggingFace-style
# outputs repeat a few sets of fields many times). Its filename names those fields
# (``<treeclass generated fields a, b; static tag>``), not one class, and its linecache entry
# is the template's source with the same replacement, so tracebacks and ``inspect.getsource``
# show the source that ran; each class's function objects keep its own ``__qualname__``,
# ``__module__`` and globals (``_cls``: see :func:`class_in_traceback`).
# Column positions (the carets under a line in a traceback) would be the template's, so the
# code carries line numbers only, as with ``python -X no_debug_ranges``. Where the code format
# is not known (other Python versions), every class's source is compiled, under the class's
# own filename (``<treeclass generated pkg.mod.Point>``).

#: Whether templates are used: CPython 3.10 (line numbers only) to 3.14 (the location table
#: format of 3.11 on); ``TREECLASS_NO_TEMPLATES=1`` compiles every class's own source.
_TEMPLATES_ON: Final = (
    sys.implementation.name == "cpython"
    and (3, 10) <= sys.version_info[:2] <= (3, 14)
    and not os.environ.get("TREECLASS_NO_TEMPLATES")
)
#: Check every template-made source against the class's own (tests set it; costs a write).
_CHECK: Final = bool(os.environ.get("TREECLASS_CHECK_TEMPLATES"))
_PLACEHOLDER: Final = re.compile(r"_tc[fa][0-9]+_")
_TEMPLATE_FILENAME: Final = "<treeclass template>"
#: ``(family, shape) -> (code, source)``; entries are never dropped (one per shape).
_TEMPLATES: dict[tuple[Family, tuple[Any, ...]], tuple[CodeType, str]] = {}
_TEMPLATES_LOCK: Final = allocate_lock()
#: ``(family, shape, names) -> entry``: the code of every class of that shape and names (the
#: names in placeholder order, see :func:`_canonical`); at most :data:`_NAMED_MAX` entries,
#: none dropped (a class beyond gets code of its own).
_NAMED: dict[tuple[Family, tuple[Any, ...], tuple[str, ...]], _Entry] = {}
_NAMED_MAX: Final = 4096
#: Every shape seen (:func:`_canonical`) -> its placeholders in order, kept once; at most
#: :data:`_NAMED_MAX`. Every tuple of names seen, kept once (the same bound).
_SHAPES: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[str, ...]]] = {}
_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}
#: Every line of a generated source, kept once: sources share most of their lines.
_LINES: dict[str, str] = {}
#: The linecache entry of each source in :data:`_NAMED`, by filename: put back for the next
#: class that shares it if linecache was cleared since (``linecache.clearcache()``).
_SOURCES: dict[str, tuple[int, None, list[str], str]] = {}


#: A class's shape and its names in the order of the shape's placeholders.
_Canonical = tuple[tuple[Any, ...], tuple[str, ...]]


def _placeholder(i: int) -> str:
    return _PLACEHOLDERS[i] if i < len(_PLACEHOLDERS) else f"_tcf{i}_"


_PLACEHOLDERS: Final = tuple([f"_tcf{i}_" for i in range(64)])


def _canonical(info: ClassInfo) -> _Canonical:
    """``info``'s shape and its names (in the order of the shape's placeholders).

    Cheap: the class of that shape with placeholder names is made only to compile a new
    template (:func:`_canonical_info`). The shape holds everything a family writes its source
    from except the names; which of it a family reads is the family's business, and
    ``TREECLASS_CHECK_TEMPLATES`` checks that the source made from the template is the class's
    own.
    """
    names: list[str] = []
    placeholders: list[str] = []
    to_placeholder: dict[str, str] = {}
    shape: list[Any] = [info.kind]
    for i, f in enumerate(info.fields):
        placeholder = _placeholder(i)
        name = f.name
        placeholders.append(placeholder)
        names.append(name)
        to_placeholder[name] = placeholder
        if f.alias != name:
            placeholders.append(f"_tca{i}_")
            names.append(f.alias)
            shape.append((f.static, f.init, f.kw_only, True))
        else:
            shape.append((f.static, f.init, f.kw_only, False))
    plan = info.plan
    get = to_placeholder.get
    stores = tuple([(get(n, n), how) for n, how in plan.stores])
    slots = tuple([get(n, n) for n in plan.slots]) if plan.slots else ()
    shape += [plan.mode, plan.mapping, stores, plan.reset, slots]
    made = tuple(shape)
    named = tuple(names)
    # One object per shape and per tuple of names, kept by every class that has it.
    known = _SHAPES.get(made)
    if known is None and len(_SHAPES) < _NAMED_MAX:
        known = _SHAPES.setdefault(made, (made, tuple(placeholders)))
    same = _NAMES.get(named)
    if same is None and len(_NAMES) < _NAMED_MAX:
        same = _NAMES.setdefault(named, named)
    return made if known is None else known[0], named if same is None else same


def _names_of(shape: tuple[Any, ...], names: tuple[str, ...]) -> dict[str, str]:
    """Placeholder -> name, for a shape and its names (see :func:`_canonical`)."""
    known = _SHAPES.get(shape)
    if known is not None:
        return dict(zip(known[1], names))
    placeholders: list[str] = []
    for i, field in enumerate(shape[1:]):
        if type(field) is not tuple:  # the fields end where the plan's mode (a str) starts
            break
        placeholders.append(_placeholder(i))
        if field[3]:
            placeholders.append(f"_tca{i}_")
    return dict(zip(placeholders, names))


def _canonical_info(info: ClassInfo) -> ClassInfo:
    """The class of ``info``'s shape with placeholder names: what a template is written from.

    Its fields are ``_tcf0_``, ... (aliases ``_tca0_``, ...).
    """
    to_placeholder: dict[str, str] = {}
    fields: list[FieldInfo] = []
    for i, f in enumerate(info.fields):
        placeholder = _placeholder(i)
        to_placeholder[f.name] = placeholder
        fields.append(
            FieldInfo(
                placeholder,
                static=f.static,
                default=f.default,
                default_factory=f.default_factory,
                init=f.init,
                kw_only=f.kw_only,
                alias=placeholder if f.alias == f.name else f"_tca{i}_",
            )
        )
    plan = info.plan
    stores: tuple[tuple[str, Store], ...] = tuple(
        [(to_placeholder.get(n, n), how) for n, how in plan.stores]
    )
    slots = {to_placeholder.get(n, n): d for n, d in plan.slots.items()}
    canonical_plan = RebuildPlan(plan.mode, plan.new, stores, slots, plan.mapping, plan.reset)
    return ClassInfo(info.cls, info.kind, tuple(fields), canonical_plan, info.evolution)


def _template(family: Family, info: ClassInfo, shape: tuple[Any, ...]) -> tuple[CodeType, str]:
    """The compiled template of ``info``'s shape (:func:`_canonical`) and its source."""
    key = (family, shape)
    entry = _TEMPLATES.get(key)
    if entry is None:
        source = family.write(_canonical_info(info))
        code = _lines_only(compile(source, _TEMPLATE_FILENAME, "exec"))
        with _TEMPLATES_LOCK:
            entry = _TEMPLATES.setdefault(key, (code, source))
    return entry


def _code(info: ClassInfo, family: Family, tag: str, canonical: _Canonical | None) -> _Entry:
    """A family's code for ``info``'s class, under the linecache filename of its source.

    From a template (``canonical``, see "templates" above), the code every class of the same
    shape and names shares; otherwise the class's own source, compiled.
    """
    if canonical is None:
        source = family.write(info)
        filename = _reserve(info.cls, source, tag)
        try:
            code = compile(source, filename, "exec")
        except BaseException:  # pragma: no cover - the source is ours
            linecache.cache.pop(filename, None)
            raise
        return _entry_of([c for c in code.co_consts if type(c) is CodeType], filename, True)
    shape, names = canonical
    key = (family, shape, names)
    entry = _NAMED.get(key)
    if entry is not None:
        filename = entry[0]
        if filename not in linecache.cache:  # cleared since: the source is put back
            linecache.cache.setdefault(filename, _SOURCES[filename])
        if _CHECK:
            _check(info, family, "".join(linecache.getlines(entry[0])))
        return entry
    # The first class of this shape and names: the code, kept for the next ones.
    template, text = _template(family, info, shape)
    placeholders = _names_of(shape, names)
    source = _PLACEHOLDER.sub(lambda m: placeholders[m.group()], text)
    _check(info, family, source)
    lines = [_LINES.setdefault(line, line) for line in source.splitlines(keepends=True)]
    own = len(_NAMED) >= _NAMED_MAX
    filename = _reserve_lines(_fields_label(info), lines, len(source), tag)
    functions = [
        _rename(c, placeholders, filename) for c in template.co_consts if type(c) is CodeType
    ]
    entry = _entry_of(functions, filename, own)
    if own:
        return entry
    _SOURCES[filename] = (len(source), None, lines, filename)  # (as _reserve_lines put it)
    kept = _NAMED.setdefault(key, entry)
    if kept is not entry:  # another thread made it first
        linecache.cache.pop(filename, None)
        del _SOURCES[filename]
    return kept


def _entry_of(functions: list[CodeType], filename: str, own: bool) -> _Entry:
    """A family's entry (:data:`_Entry`) from its functions' code."""
    codes = {c.co_name: c for c in functions}
    keyed = frozenset([n for n, c in codes.items() if "_k0" in c.co_names])
    keyed = _KEYED.setdefault(keyed, keyed)
    called = frozenset([n for c in functions for n in c.co_names if n in codes])
    called = _KEYED.setdefault(called, called)
    return (filename, codes, keyed, called, own)


def _fields_label(info: ClassInfo) -> str:
    """What the filename of a source shared by classes with ``info``'s fields names."""
    label = f"fields {', '.join(info.data_fields)}"
    if info.static_fields:
        label += f"; static {', '.join(info.static_fields)}"
    return label if len(label) <= _LABEL_MAX else f"{label[: _LABEL_MAX - 3]}..."


#: The longest field list a generated source's filename shows.
_LABEL_MAX: Final = 160


def _check(info: ClassInfo, family: Family, source: str) -> None:
    """With ``TREECLASS_CHECK_TEMPLATES``: ``source`` is what ``family`` writes for ``info``."""
    if _CHECK and source != family.write(info):
        raise AssertionError(  # pragma: no cover - a family reads what the shape lacks
            f"the {family!r} template of {info.qualname} does not give its source"
        )


def _renamed(value: Any, names: dict[str, str], filename: str) -> Any:
    """A constant of a template's code with its placeholders named (keyword names, ...)."""
    kind = cast("type[object]", type(value))
    if kind is str:
        return names.get(value, value)
    if kind is tuple or kind is frozenset:
        renamed = [_renamed(v, names, filename) for v in cast("tuple[Any, ...]", value)]
        return tuple(renamed) if kind is tuple else frozenset(renamed)
    if kind is CodeType:
        return _rename(value, names, filename)
    return value


def _rename(code: CodeType, names: dict[str, str], filename: str) -> CodeType:
    """``code`` (and the code it holds) with its placeholders named and ``filename``."""
    return code.replace(
        co_names=_same(code.co_names, [names.get(n, n) for n in code.co_names]),
        co_varnames=_same(code.co_varnames, [names.get(n, n) for n in code.co_varnames]),
        co_consts=_same(code.co_consts, [_renamed(c, names, filename) for c in code.co_consts]),
        co_filename=filename,
    )


def _same(old: tuple[Any, ...], new: list[Any]) -> tuple[Any, ...]:
    """``new`` as a tuple: ``old`` itself when every item is the same object (nothing named)."""
    if all(map(operator.is_, old, new)):
        return old
    return tuple(new)


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x40:
        out.append(0x40 | (value & 0x3F))
        value >>= 6
    out.append(value)


def _lines_only(code: CodeType) -> CodeType:
    """``code`` (and the code it holds) with line numbers but no column positions.

    CPython 3.11+'s location table (``Objects/locations.md``): entries of up to 8 code units,
    ``0x80 | kind << 3 | (units - 1)``; kind 13 (line only) takes the line's signed delta,
    kind 15 (no location) nothing. The result is checked: same lines, or ``code`` unchanged.
    """
    consts = tuple([_lines_only(c) if type(c) is CodeType else c for c in code.co_consts])
    code = code.replace(co_consts=consts)
    if sys.version_info < (3, 11):
        return code  # line numbers only already
    positions = list(code.co_positions())
    lines = [p[0] for p in positions]
    table = bytearray()
    previous = code.co_firstlineno
    i = 0
    while i < len(lines):
        line = lines[i]
        n = 1
        while n < 8 and i + n < len(lines) and lines[i + n] == line:
            n += 1
        if line is None:
            table.append(0x80 | 15 << 3 | (n - 1))
        else:
            table.append(0x80 | 13 << 3 | (n - 1))
            delta = line - previous
            _varint(-delta << 1 | 1 if delta < 0 else delta << 1, table)
            previous = line
        i += n
    stripped = code.replace(co_linetable=bytes(table))
    if [p[0] for p in stripped.co_positions()] != lines:  # pragma: no cover - format changed
        return code
    return stripped


def _reserve(cls: type, source: str, tag: str) -> str:
    """Put ``source`` (``cls``'s own) into :mod:`linecache` under a filename no other has."""
    label = f"{cls.__module__}.{cls.__qualname__}"
    return _reserve_lines(label, source.splitlines(keepends=True), len(source), tag)


def _reserve_lines(label: str, lines: list[str], size: int, tag: str) -> str:
    """Put a source's ``lines`` into :mod:`linecache` under a filename no other source has.

    ``lines`` may be shared by the entries of other sources (never changed).
    """
    base = f"{_FILENAME}{label}{tag}"
    entry = (size, None, lines)
    n = 1
    while True:
        filename = f"{base}>" if n == 1 else f"{base} #{n}>"
        value = (*entry, filename)
        # setdefault is atomic: two threads never get the same filename (as attrs does it).
        if linecache.cache.setdefault(filename, value) is value:
            return filename
        n += 1


def class_in_traceback(e: BaseException) -> type | None:
    """The class whose generated code ran innermost when ``e`` was raised, if any."""
    found: type | None = None
    tb = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.startswith(_FILENAME):
            cls = frame.f_globals.get("_cls")
            if isinstance(cls, type):
                found = cls
        tb = tb.tb_next
    return found


def compile_function(
    cls: type, what: str, source: str, namespace: dict[str, Any], func: str
) -> Callable[..., Any]:
    """Compile a small generated function of ``cls`` (one source, its own linecache entry)."""
    filename = _reserve(cls, source, f" [{what}]")
    try:
        exec(compile(source, filename, "exec"), namespace)
    except BaseException:  # pragma: no cover - the source is ours
        linecache.cache.pop(filename, None)
        raise
    fn: Callable[..., Any] = namespace[func]
    fn.__qualname__ = f"{cls.__qualname__}.<treeclass {what}>"
    fn.__module__ = cls.__module__
    return fn


def set_tracing_check(unflatten: Callable[..., Any], check: Callable[[], bool] | None) -> None:
    """Set the check that sends a generated ``unflatten`` down its traceable path.

    ``check`` returns ``False`` when called and ``True`` to the tracer (an adapter's choice;
    ``None``: never). Functions with a single path (their stores trace already) are left as
    they are.
    """
    namespace = getattr(unflatten, "__globals__", {})
    if "_unflatten_traced" in namespace:
        namespace["_tracing"] = check


def release(generated: Generated) -> None:
    """Drop ``generated``'s own sources from :mod:`linecache` (its registration was refused).

    Sources shared with other classes (see "templates") stay.
    """
    for filename, _, _, _, own in generated._code.values():
        if own:
            linecache.cache.pop(filename, None)


def _rebuild_failed(label: str) -> Callable[[BaseException], Exception]:
    """Make the error for a class whose own ``__setattr__`` refused a field during unflatten."""

    def error(cause: BaseException) -> Exception:
        return RebuildError(
            f"{label} could not be rebuilt without __init__: its own __setattr__ (or "
            f"__setitem__) raised {type(cause).__name__}: {cause}; register it with "
            "unflatten_calls_init=True to rebuild it through __init__, or let its __setattr__ "
            "accept field assignment."
        )

    return error


# --- source builders ----------------------------------------------------------------------------


def tuple_display(items: list[str]) -> str:
    """A tuple display: ``()``, ``(a,)``, ``(a, b)``."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


_tuple = tuple_display


def _statics(info: ClassInfo) -> str:
    """The static values' tuple: ``(obj.a, obj.b)``."""
    return _tuple([f"obj.{s}" for s in info.static_fields])


def flatten_lines(
    info: ClassInfo,
    head: str,
    child: Callable[[int, str], str],
    tail: str,
    *,
    as_list: bool = False,
) -> list[str]:
    """A flatten-like function returning ``(children, statics{tail})``; every field a child.

    ``child(i, v)`` is the child of the ``i``-th data field, read into the local ``v``. The
    children are a tuple, or a list ``as_list``.
    """
    local = [f"v{i}" for i in range(len(info.data_fields))]
    lines = [head]
    lines += [f"{_I}{v} = obj.{name}" for v, name in zip(local, info.data_fields)]
    items = [child(i, v) for i, v in enumerate(local)]
    children = f"[{', '.join(items)}]" if as_list else _tuple(items)
    lines.append(f"{_I}return {children}, {_statics(info)}{tail}")
    return lines


def _flatten_into(info: ClassInfo, nodes: tuple[int, ...] = ()) -> list[str]:
    """The embedded registry's fast path ``flatten_into(obj, leaves, entries, depth)``.

    Reads every field once. When the data fields at the positions ``nodes`` hold nodes (and
    ``depth`` allows recursing into them) and every other one holds a value of a type known
    to be a leaf, it adds the node's entry and its leaves straight to the walker's lists,
    calling the node children's fast paths in field order. Otherwise it hands the children
    and the statics to the walker's loop, ``_mixed`` (:func:`treeclass._core.tree._walk`),
    which decides each child. ``nodes`` is ``()`` for the class's own fast path, or the
    positions a walk found nodes at, for one shaped to them.
    """
    local = [f"v{i}" for i in range(len(info.data_fields))]
    lines = ["def flatten_into(obj, leaves, entries, depth):"]
    lines += [f"{_I}{v} = obj.{name}" for v, name in zip(local, info.data_fields)]
    checks = ["depth"] if nodes else []
    checks += [f"_type({v}) in _leaf_types" for i, v in enumerate(local) if i not in nodes]
    checks += [f"(n{i} := _get(_type(v{i}))) is not None" for i in nodes]
    lines.append(f"{_I}if {' and '.join(checks) or 'True'}:")
    lines.append(f"{_I * 2}entries.append((_nt, {_statics(info)}, {len(local)}, {not nodes}))")
    run: list[str] = []  # leaf values not added yet
    for i in range(len(local) + 1):
        if i < len(local) and i not in nodes:
            run.append(local[i])
            continue
        if run:
            lines.append(f"{_I * 2}leaves += {_tuple(run)}")
            if nodes:
                lines.append(f"{_I * 2}entries += {_tuple(['None'] * len(run))}")
            run = []
        if i < len(local):
            lines.append(f"{_I * 2}n{i}.flatten_into(v{i}, leaves, entries, depth - 1)")
    lines.append(f"{_I * 2}return None")
    statics = _statics(info)
    lines.append(f"{_I}return _mixed(_nt, {_tuple(local)}, {statics}, leaves, entries, depth)")
    return lines


def _store(how: str, name: str, value: str, slot_index: dict[str, int]) -> str:
    if how == "attr":
        return f"{_I}obj.{name} = {value}"
    if how == "slot":
        return f"{_I}_slot{slot_index[name]}(obj, {value})"
    if how == "dict":
        return f"{_I}_inst_dict[{name!r}] = {value}"
    return f"{_I}_osetattr(obj, {name!r}, {value})"


def _rebuild(info: ClassInfo, value_of: dict[str, str]) -> list[str]:
    """Lines that make ``obj`` and restore every field from ``value_of``."""
    plan = info.plan
    out: list[str] = []
    if plan.mode == "init":
        init_args = ", ".join(f"{f.alias}={value_of[f.name]}" for f in info.fields if f.init)
        out.append(f"{_I}obj = _cls({init_args})")
        out += [
            f"{_I}_osetattr(obj, {f.name!r}, {value_of[f.name]})" for f in info.fields if not f.init
        ]
        return out
    out.append(f"{_I}obj = _new(_cls)")
    if plan.mode == "protocol":
        # The class's own __setattr__ may refuse: report that as a treeclass error naming the
        # class and the way out, not as a bare error from inside a framework.
        out.append(f"{_I}try:")
        out += [f"{_I * 2}obj.{f.name} = {value_of[f.name]}" for f in info.fields]
        if plan.mapping:
            # Mapping-based outputs (HuggingFace ModelOutput) expose non-None fields as items
            # too, in field order, the way their __post_init__ does.
            for f in info.fields:
                v = value_of[f.name]
                out.append(f"{_I * 2}if {v} is not None:")
                out.append(f"{_I * 3}obj[{f.name!r}] = {v}")
        out.append(f"{_I}except Exception as e:")
        out.append(f"{_I * 2}raise _rebuild_failed(e) from e")
        return out
    slot_index = {name: i for i, name in enumerate(plan.slots)}
    stores = [*plan.stores, *plan.reset]
    values = {**value_of, **{name: "None" for name, _ in plan.reset}}
    if any(how == "dict" for _, how in stores):
        out.append(f"{_I}_inst_dict = obj.__dict__")
    out += [_store(how, name, values[name], slot_index) for name, how in stores]
    return out


def _traceable(info: ClassInfo) -> bool:
    """Whether a tracer that follows only plain stores traces the stores of ``info``'s class.

    Such a tracer (the check an adapter sets with :func:`set_tracing_check` says when one
    runs) may refuse a descriptor's ``__set__`` called directly (the member descriptors of
    slots) and ``object.__setattr__`` bound to a global beforehand, while it follows plain
    attribute stores, stores into the instance ``__dict__``, and ``object.__setattr__(obj,
    name, value)`` looked up at the call (what frozen dataclasses' ``__init__`` does) -- which
    costs about twice a direct store, hence a second path.
    """
    plan = info.plan
    return plan.mode != "direct" or all(
        how in ("attr", "dict") for _, how in (*plan.stores, *plan.reset)
    )


def _traced_stores(info: ClassInfo, value_of: dict[str, str]) -> list[str]:
    """The stores of the path taken while tracing: ``object.__setattr__`` by name."""
    out = [f"{_I}obj = _new(_cls)"]
    out += [f"{_I}object.__setattr__(obj, {f.name!r}, {value_of[f.name]})" for f in info.fields]
    out += [f"{_I}object.__setattr__(obj, {name!r}, None)" for name, _ in info.plan.reset]
    return out


def unpack_lines(local: list[str], pad: str = "") -> list[str]:
    """``v0, v1 = children``: the data fields' values, one child each (``pad``: extra indent)."""
    if len(local) == 1:
        return [f"{pad}{_I}{local[0]}, = children"]
    if local:
        return [f"{pad}{_I}{', '.join(local)} = children"]
    return []


#: ``(info, locals) -> lines`` reading the data fields' values into ``locals`` from
#: ``children`` (and ``aux``), for an auxdata whose static values do not start at ``aux[0]``.
Unpack = Callable[[ClassInfo, list[str]], list[str]]


def _unflatten(
    info: ClassInfo,
    head: str,
    *,
    first_static: int = 0,
    unpack: Unpack | None = None,
    hashed: bool = False,
    traced: bool = False,
) -> list[str]:
    """An unflatten function ``head`` (its parameters name ``aux`` and ``children``).

    The auxdata holds the static values from ``aux[first_static]`` on; ``unpack`` reads the
    data fields' values (by default one child each, :func:`unpack_lines`). With ``traced`` it
    is the path a tracer takes (see :func:`_traceable`); otherwise, for a class whose stores
    such a tracer cannot follow, it starts with ``if _tracing is not None and _tracing():``
    and defers to ``_unflatten_traced`` (``_tracing`` is the check an adapter binds, see
    :func:`set_tracing_check`).
    """
    data = info.data_fields
    value_of = {name: f"v{i}" for i, name in enumerate(data)}
    value_of.update({name: f"aux[{i}]" for i, name in enumerate(info.static_fields, first_static)})
    local = [value_of[n] for n in data]
    lines = [head]
    if hashed and info.static_fields:
        lines.append(f"{_I}try:")
        lines.append(f"{_I * 2}hash(aux)")
        lines.append(f"{_I}except TypeError:")
        lines.append(f"{_I * 2}_check_aux(aux)")
        lines.append(f"{_I * 2}raise")
    if not traced and not hashed and not _traceable(info):
        params = head[head.index("(") : head.index(")") + 1]
        lines.append(f"{_I}if _tracing is not None and _tracing():")
        lines.append(f"{_I * 2}return _unflatten_traced{params}")
    lines += unpack_lines(local) if unpack is None else unpack(info, local)
    if traced:
        lines += _traced_stores(info, value_of)
    else:
        lines += _rebuild(info, value_of)
    lines.append(f"{_I}return obj")
    return lines


def unflatten_blocks(
    info: ClassInfo, head: str, *, first_static: int = 0, unpack: Unpack | None = None
) -> list[list[str]]:
    """The unflatten function ``head`` and, when it needs one, its traced twin.

    ``head`` is ``def unflatten(aux, children):`` or ``def unflatten(children, aux):``; the
    twin is ``_unflatten_traced`` with the same parameters, for a class whose stores a tracer
    cannot follow (see :func:`_traceable`). ``first_static`` and ``unpack``: see
    :func:`_unflatten`.
    """
    blocks = [_unflatten(info, head, first_static=first_static, unpack=unpack)]
    if not _traceable(info):
        traced = head.replace("def unflatten", "def _unflatten_traced")
        blocks.append(
            _unflatten(info, traced, first_static=first_static, unpack=unpack, traced=True)
        )
    return blocks


def join_blocks(blocks: list[list[str]]) -> str:
    """A source text made of functions' lines."""
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def _core_source(info: ClassInfo) -> str:
    blocks = [
        flatten_lines(info, "def flatten(obj):", lambda i, v: v, ""),
        flatten_lines(info, "def flatten_with_keys(obj):", lambda i, v: f"(_k{i}, {v})", ""),
        flatten_lines(info, "def flatten_entries(obj):", lambda i, v: v, ", _names"),
        _flatten_into(info),
        _unflatten(info, "def unflatten_hashed(aux, children):", hashed=True),
    ]
    unflatten, *traced = unflatten_blocks(info, "def unflatten(aux, children):")
    return join_blocks([*blocks[:4], unflatten, blocks[4], *traced])


#: The core family: the embedded registry's, JAX's and optree's functions.
CORE: Final = Family(
    "",
    (
        "flatten",
        "flatten_with_keys",
        "flatten_entries",
        "flatten_into",
        "unflatten",
        "unflatten_hashed",
    ),
    _core_source,
)


def generate(info: ClassInfo) -> Generated:
    """Write and compile the core source of ``info``'s class (other families when bound)."""
    plan = info.plan
    # No "__name__": a tracer inlining these functions may import the module it names.
    globals_: dict[str, Any] = {
        "_cls": info.cls,
        "_new": plan.new,
        "_osetattr": object.__setattr__,
        "_rebuild_failed": _rebuild_failed(info.qualname),
        "_names": info.data_fields,
        "_type": type,
        "_nt": None,
        "_leaf_types": frozenset(),
        "_mixed": None,
        "_check_aux": None,
        "_tracing": None,
        "__builtins__": builtins.__dict__,  # what exec would add
    }
    globals_.update({f"_slot{i}": plan.slots[name].__set__ for i, name in enumerate(plan.slots)})
    generated = Generated(info, globals_)
    generated._entry(CORE)
    return generated
