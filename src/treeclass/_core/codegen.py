"""Generate a class's pytree functions as Python source, compile it once, bind it per registry.

A class's functions come in families (:class:`Family`), each one source text written from its
:class:`~treeclass._core.fields.ClassInfo` (one line per field, no loops). Registering a class
compiles none of its source (a family's stubs are compiled once, for every class): each
registry binds function objects of its own (:meth:`Generated.bind`,
with its key type, node type or hash check in their namespace) whose code is a stub with the
function's parameters. The first call of any of them writes the family's source, compiles it
(once for every class with the same source text: HuggingFace-style outputs repeat a few sets of
fields), puts it into :mod:`linecache` as ``<treeclass generated fields a, b; static tag>``
(``... [tag]>`` for another family), so that tracebacks and ``inspect.getsource`` show it, and
gives every function bound from it the compiled code. A tracer that inlines a stub runs
:func:`first_call` rather than tracing it (the torch adapter marks it so for Dynamo).

The core family (:data:`CORE`: embedded registry, JAX, optree) has every data field a child,
``None`` included, and the tuple of static values as auxdata; an adapter whose framework needs
another form defines its own :class:`Family` from the builders below. Nothing here looks at
the class itself: its rebuild plan (:class:`~treeclass._core.fields.RebuildPlan`) says how.
"""

from __future__ import annotations

import builtins
import linecache
import re
from _thread import RLock
from collections.abc import Callable, Collection, Mapping
from types import CodeType, FunctionType
from typing import Any, Final

from .._errors import RebuildError, qualname
from .fields import ClassInfo

__all__ = [
    "CORE",
    "INDENT",
    "Family",
    "Generated",
    "class_in_traceback",
    "compile_function",
    "first_call",
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
        tag: shown in the :mod:`linecache` filename, ``<treeclass generated fields a, b
            [tag]>`` (``""``: no suffix, the core family).
        functions: the names of the functions the source defines that :meth:`Generated.bind`
            returns (the source may define helpers too, named ``_...``).
        write: ``info -> source`` of a class.
        keyed: the functions that read the registry's key objects (``_k0``, ...).
    """

    __slots__ = ("functions", "keyed", "serial", "stubs", "tag", "write")

    def __init__(
        self,
        tag: str,
        functions: tuple[str, ...],
        write: Callable[[ClassInfo], str],
        keyed: tuple[str, ...] = ("flatten_with_keys",),
    ) -> None:
        self.tag = tag
        self.functions = functions
        self.write = write
        self.keyed = frozenset(keyed)
        with _LOCK:
            self.serial = len(_FAMILIES)
            _FAMILIES.append(self)
        #: The stub code of each function, made when first bound.
        self.stubs: dict[str, CodeType] = {}

    def stub(self, func: str, info: ClassInfo) -> CodeType:
        """The code a function bound from this family runs until the family is compiled.

        A stub takes the function's parameters (read once per family from ``info``'s source:
        a family's ``def`` lines are the same for every class) and calls :func:`first_call`,
        which compiles the family for the stub's class and gives every function bound from it
        the compiled code, then calls the compiled function (``_c{serial}_{func}``).
        """
        code = self.stubs.get(func)
        if code is None:
            with _LOCK:
                self.stubs.update(_stubs(self, info))
            code = self.stubs[func]
        return code

    def __repr__(self) -> str:
        return f"<treeclass codegen family {self.tag or 'core'!r}>"


#: Every family, by serial number (its stubs name it by that).
_FAMILIES: list[Family] = []
_LOCK: Final = RLock()
_HEAD: Final = re.compile(r"^def (\w+)\(([\w, ]*)\):$", re.MULTILINE)


def _stubs(family: Family, info: ClassInfo) -> dict[str, CodeType]:
    """Every function's stub (see :meth:`Family.stub`), compiled once per family."""
    n = family.serial
    blocks = [
        f"def {func}({params}):\n{_I}_first_call(_generated, {n})\n"
        f"{_I}return _c{n}_{func}({params})\n"
        for func, params in _HEAD.findall(family.write(info))
    ]
    source = "\n".join(blocks)
    filename = f"{_FILENAME}stubs{f' [{family.tag}]' if family.tag else ''} #{n}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return _functions(compile(source, filename, "exec"))


def first_call(generated: Generated, serial: int) -> bool:
    """A stub's first call: compile its family for its class; bound functions get the code.

    Run, not traced, by a tracer that inlines the stub (the torch adapter marks it so for
    Dynamo); the stub then calls the compiled function, which has the stub's parameters.
    """
    generated.compiled(_FAMILIES[serial])
    return True


def _functions(module: CodeType) -> dict[str, CodeType]:
    """The code of every function a compiled source defines, by name."""
    namespace: dict[str, Any] = {"__builtins__": builtins.__dict__}
    exec(module, namespace)  # defines the functions, runs none
    return {k: v.__code__ for k, v in namespace.items() if type(v) is FunctionType}


class _Compiled:
    """A family's compiled source: its linecache filename and functions' code by name."""

    __slots__ = ("codes", "entry", "filename", "own")

    def __init__(self, source: str, filename: str, own: bool) -> None:
        self.filename = filename
        self.codes = _functions(compile(source, filename, "exec"))
        self.entry = linecache.cache[filename]
        #: Compiled for one class alone (dropped from linecache by :func:`release`).
        self.own = own

    def show(self) -> None:
        """Put the source back into linecache if it was cleared since."""
        if self.filename not in linecache.cache:
            linecache.cache.setdefault(self.filename, self.entry)


#: ``(family tag, source text) -> compiled``: every class whose source is the same shares its
#: code; at most :data:`_SHARED_MAX` entries, none dropped (a class beyond gets code of its own).
_SHARED: dict[tuple[str, str], _Compiled] = {}
_SHARED_MAX: Final = 4096


class Generated:
    """One class's generated sources, each compiled when first needed, bound per registry."""

    __slots__ = ("_code", "_globals", "_pending", "info")

    def __init__(self, info: ClassInfo, globals_: dict[str, Any]) -> None:
        self.info = info
        self._globals = globals_
        self._code: dict[Family, _Compiled] = {}
        #: The functions bound from a family not compiled yet.
        self._pending: dict[Family, list[FunctionType]] = {}

    def filename(self, family: Family | None = None) -> str | None:
        """The :mod:`linecache` filename of a family's source, once it has been compiled."""
        compiled = self._code.get(CORE if family is None else family)
        return None if compiled is None else compiled.filename

    def compiled(self, family: Family) -> dict[str, CodeType]:
        """A family's functions' code, compiled now if it was not; bound functions get it."""
        with _LOCK:
            compiled = self._code.get(family)
            if compiled is None:
                compiled = self._code[family] = _compile(self.info, family)
            pending = self._pending.get(family, ())
            for fn in pending:
                _finish(compiled.codes, family, fn)
            self._pending.pop(family, None)  # (only once every one has its code)
        compiled.show()
        return compiled.codes

    def rebuild_function(
        self, what: str, head: list[str], value_of: dict[str, str], namespace: dict[str, Any]
    ) -> Callable[..., Any]:
        """Compile a function that ends by building an instance the way ``unflatten`` does.

        ``head``: the ``def`` line and first lines, which set the locals ``value_of`` names
        (every field's value); the instance is then made as ``unflatten`` does (the same
        lines) and returned. ``namespace``: further globals. Each call compiles (see
        :func:`compile_function`): callers compile once per class.
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

        Each function object gets the family's code for this class once it is compiled (on the
        first call of any function bound from it); the registry's key objects are made only
        when a function that reads them is bound.

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
        keys = not family.keyed.isdisjoint(wanted)
        ns: dict[str, Any]
        if in_class_globals or keys or extra:
            ns = self._globals if in_class_globals else self._globals.copy()
            if keys:
                _keys(key, self.info.data_fields, ns)
            ns.update(extra)
        else:
            # Nothing of the registry's own: the class's globals, shared.
            ns = self._globals
        compiled = self._code.get(family)
        codes = None if compiled is None else compiled.codes
        cls = self.info.cls
        short = cls.__qualname__
        module = cls.__module__
        suffix = f"[{tag}]" if tag else ""
        made: list[FunctionType] = []
        for func in wanted:
            fn = FunctionType(family.stub(func, self.info) if codes is None else codes[func], ns)
            fn.__qualname__ = f"{short}.<treeclass {func}{suffix}>"
            fn.__module__ = module
            fn.__doc__ = _DOCS.setdefault(func, f"Generated by treeclass: {func}.")
            made.append(fn)
        with _LOCK:
            compiled = self._code.get(family)
            if compiled is None:
                self._pending.setdefault(family, []).extend(made)
            else:  # compiled (maybe by another thread meanwhile)
                for fn in made:
                    _finish(compiled.codes, family, fn)
        return {fn.__name__: fn for fn in made}


def _finish(codes: dict[str, CodeType], family: Family, fn: FunctionType) -> None:
    """Give ``fn`` its compiled code, and its namespace the family's helpers."""
    name = fn.__name__
    code, stub = codes[name], fn.__code__
    if code.co_varnames[: code.co_argcount] != stub.co_varnames[: stub.co_argcount]:
        raise AssertionError(f"{family!r} wrote {name} with other parameters for another class")
    ns = fn.__globals__
    # Helpers and the name its stub calls first, the code last: another thread may call fn
    # the moment it has its code.
    for helper, helper_code in codes.items():
        if helper not in family.functions:  # ``_unflatten_traced``
            known = ns.get(helper)
            if type(known) is not FunctionType or known.__code__ is not helper_code:
                ns[helper] = FunctionType(helper_code, ns)
    ns[f"_c{family.serial}_{name}"] = fn  # what its stub calls
    fn.__code__ = code


def _compile(info: ClassInfo, family: Family) -> _Compiled:
    """A family's code for ``info``'s class: shared with every class of the same source."""
    source = family.write(info)
    shared = _SHARED.get((family.tag, source))
    if shared is not None:
        return shared
    own = len(_SHARED) >= _SHARED_MAX
    label = qualname(info.cls) if own else _fields_label(info)
    tag = f" [{family.tag}]" if family.tag else ""
    filename = _reserve_lines(label, source.splitlines(keepends=True), len(source), tag)
    try:
        compiled = _Compiled(source, filename, own)
    except BaseException:
        linecache.cache.pop(filename, None)
        raise
    if not own:
        _SHARED[family.tag, source] = compiled
    return compiled


def _keys(key: Callable[[str], Any], names: tuple[str, ...], ns: dict[str, Any]) -> None:
    """Set the key globals ``_k0``, ... of fields ``names`` in ``ns`` (``key(name)`` each)."""
    keys = _KEYS
    for i, name in enumerate(names):
        made = keys.get((key, name))
        if made is None:
            made = keys.setdefault((key, name), key(name))
        ns[f"_k{i}"] = made


#: ``(key maker, field name) -> key``: a registry's key objects are immutable values, shared
#: by every class with a field of that name.
_KEYS: dict[tuple[Callable[[str], Any], str], Any] = {}


#: The docstring of each generated function (one string per function name).
_DOCS: dict[str, str] = {}

#: How the filename of every generated source starts.
_FILENAME: Final = "<treeclass generated "


def _fields_label(info: ClassInfo) -> str:
    """What the filename of a source shared by classes with ``info``'s fields names."""
    label = f"fields {', '.join(info.data_fields)}"
    if info.static_fields:
        label += f"; static {', '.join(info.static_fields)}"
    return label if len(label) <= 160 else f"{label[:157]}..."  # (at most 160 characters)


def _reserve_lines(label: str, lines: list[str], size: int, tag: str) -> str:
    """Put a source's ``lines`` into :mod:`linecache` under a filename no other source has."""
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
    filename = _reserve_lines(
        qualname(cls), source.splitlines(keepends=True), len(source), f" [{what}]"
    )
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
    ``None``: never). Functions with a single path (their stores trace already) never read
    it.
    """
    namespace = getattr(unflatten, "__globals__", {})
    if "_generated" in namespace:  # (read only by a source with a traceable path)
        namespace["_tracing"] = check


def release(generated: Generated) -> None:
    """Drop ``generated``'s own sources from linecache (its registration was refused)."""
    with _LOCK:  # (a first call may be compiling another family right now)
        made = list(generated._code.values())
    for compiled in made:
        if compiled.own:
            linecache.cache.pop(compiled.filename, None)


def _rebuild_failed(cls: type, cause: BaseException) -> Exception:
    """The error for a class whose own ``__setattr__`` refused a field during unflatten."""
    return RebuildError(
        f"{qualname(cls)} could not be rebuilt without __init__: its own "
        f"__setattr__ (or __setitem__) raised {type(cause).__name__}: {cause}; register it with "
        "unflatten_calls_init=True to rebuild it through __init__, or let its __setattr__ "
        "accept field assignment."
    )


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


def _flatten_into(
    info: ClassInfo, nodes: tuple[int, ...] = (), inline: Mapping[int, ClassInfo] | None = None
) -> list[str]:
    """The embedded registry's fast path ``flatten_into(obj, leaves, entries, depth)``.

    When the data fields at the positions ``nodes`` hold nodes (and ``depth`` allows recursing)
    and every other one a value of a known leaf type, it adds the entry and leaves itself;
    otherwise it hands the node to the walker's loop, ``_mixed``. ``nodes``: ``()`` for the
    class's own fast path, or the positions a walk found nodes at, for one shaped to them.
    ``inline``: positions among ``nodes`` that held a node of another class whose children
    were all leaves (its node type ``_c{i}``, its constant entry ``_ce{i}``): such a node is
    added in place, without a call, when it is of that class and its children are leaves.

    A shaped path walks a node of its own class in its last node field (a chain, a linked
    list) by a loop, not a call: the leaves after that field (``trailing``) come after the
    whole subtree, so they are kept (``trail``) and added, innermost first, when it ends.
    """
    inline = inline or {}
    local = [f"v{i}" for i in range(len(info.data_fields))]
    last = nodes[-1] if nodes else -1
    trailing = local[last + 1 :] if nodes else []
    p1, p2, p3 = (_I * 2, _I * 3, _I * 4) if nodes else (_I, _I * 2, _I * 3)
    lines = ["def flatten_into(obj, leaves, entries, depth):"]
    if nodes:
        if trailing:
            lines.append(f"{_I}trail = None")
        lines.append(f"{_I}while True:")
    lines += [f"{p1}{v} = obj.{name}" for v, name in zip(local, info.data_fields)]
    checks = ["depth"] if nodes else []
    checks += [f"_type({v}) in _leaf_types" for i, v in enumerate(local) if i not in nodes]
    checks += [f"(n{i} := _get(_type(v{i}))) is not None" for i in nodes]
    lines.append(f"{p1}if {' and '.join(checks) or 'True'}:")
    # The node's entry, then a None entry per leaf child before its first node child, added
    # at once; with no static values, that is one tuple made once per class and shape
    # (``_entries``: see :func:`flatten_into_entries`), not per node.
    head = nodes[0] if nodes else 0
    pending: list[str] = []  # entries not added yet
    if info.static_fields:
        pending.append(f"(_nt, {_statics(info)}, {len(local)}, {not nodes})")
    else:
        lines.append(f"{p2}entries += _entries")
    run: list[str] = []  # leaf values not added yet
    for i in range(len(local) + 1):
        if i < len(local) and i not in nodes:
            run.append(local[i])
            continue
        if run:
            one = len(run) == 1
            lines.append(f"{p2}leaves{f'.append({run[0]})' if one else f' += {_tuple(run)}'}")
            if nodes and (info.static_fields or i > head):
                pending += ["None"] * len(run)
            run = []
        if pending:
            one = len(pending) == 1
            more = f".append({pending[0]})" if one else f" += {_tuple(pending)}"
            lines.append(f"{p2}entries{more}")
            pending = []
        if i == len(local):
            break
        if i == last:
            lines.append(f"{p2}if n{i} is _nt:")
            if trailing:
                kept = _tuple(trailing)
                lines.append(f"{p3}if trail is None:")
                lines.append(f"{p3}{_I}trail = [{kept}]")
                lines.append(f"{p3}else:")
                lines.append(f"{p3}{_I}trail.append({kept})")
            lines.append(f"{p3}obj = v{i}")
            lines.append(f"{p3}continue")
        call = f"n{i}.flatten_into(v{i}, leaves, entries, depth - 1)"
        child = inline.get(i)
        if child is None:
            lines.append(f"{p2}{call}")
            continue
        inner = [f"w{i}_{j}" for j in range(len(child.data_fields))]
        same = [f"n{i} is _c{i}"]
        same += [
            f"_type({w} := v{i}.{name}) in _leaf_types" for w, name in zip(inner, child.data_fields)
        ]
        lines.append(f"{p2}if {' and '.join(same)}:")
        if inner:
            lines.append(f"{p3}leaves += {_tuple(inner)}")
        if child.static_fields:
            statics_of = _tuple([f"v{i}.{name}" for name in child.static_fields])
            lines.append(f"{p3}entries.append((_c{i}, {statics_of}, {len(inner)}, True))")
        else:
            lines.append(f"{p3}entries.append(_ce{i})")
        lines.append(f"{p2}else:")
        lines.append(f"{p3}{call}")
    statics = _statics(info)
    mixed = f"_mixed(_nt, {_tuple(local)}, {statics}, leaves, entries, depth)"
    if not nodes:
        lines.append(f"{p2}return None")
        lines.append(f"{p1}return {mixed}")
        return lines
    lines.append(f"{p2}break")
    lines.append(f"{p1}{mixed}")
    lines.append(f"{p1}break")
    if trailing:
        lines.append(f"{_I}if trail is not None:")
        lines.append(f"{_I * 2}for kept in reversed(trail):")
        lines.append(f"{_I * 3}leaves += kept")
        lines.append(f"{_I * 2}entries += {_tuple(['None'] * len(trailing))} * len(trail)")
    lines.append(f"{_I}return None")
    return lines


def flatten_into_entries(nt: Any, n_data: int, nodes: tuple[int, ...] = ()) -> tuple[Any, ...]:
    """``_entries`` of :func:`_flatten_into` for a class with no static fields.

    The entry of a node of ``nt`` (``n_data`` children; leafy unless ``nodes``), and a ``None``
    entry for each leaf child before the first node child.
    """
    head = nodes[0] if nodes else 0
    return ((nt, (), n_data, not nodes), *(None,) * head)


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
        out.append(f"{_I * 2}raise _rebuild_failed(_cls, e) from e")
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

    Such a tracer (see :func:`set_tracing_check`) may refuse a slot descriptor's ``__set__``
    and a prebound ``object.__setattr__``, but follows attribute and ``__dict__`` stores and
    ``object.__setattr__`` looked up at the call, which costs twice a direct store: hence a
    second path for the other classes.
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

    The static values are ``aux[first_static:]``; ``unpack`` reads the data fields' values
    (default: :func:`unpack_lines`). ``traced``: the path a tracer takes (:func:`_traceable`);
    otherwise a class whose stores a tracer cannot follow defers to ``_unflatten_traced``
    while ``_tracing()`` says so (:func:`set_tracing_check`).
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

    The twin is ``_unflatten_traced`` with the same parameters (see :func:`_traceable`);
    ``first_static`` and ``unpack``: see :func:`_unflatten`.
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
_CORE_FUNCTIONS: Final = "flatten flatten_with_keys flatten_entries flatten_into unflatten"
CORE: Final = Family("", (*_CORE_FUNCTIONS.split(), "unflatten_hashed"), _core_source)


def generate(info: ClassInfo) -> Generated:
    """The generated functions of ``info``'s class, ready to be bound (nothing compiled yet)."""
    plan = info.plan
    # No "__name__": a tracer inlining these functions may import the module it names.
    globals_: dict[str, Any] = {
        "_cls": info.cls,
        "_new": plan.new,
        "_osetattr": object.__setattr__,
        "_rebuild_failed": _rebuild_failed,
        "_names": info.data_fields,
        "_type": type,
        "_nt": None,
        "_leaf_types": frozenset(),
        "_mixed": None,
        "_check_aux": None,
        "_tracing": None,
        "_generated": None,
        "_first_call": first_call,
        "__builtins__": builtins.__dict__,  # what exec would add
    }
    globals_.update({f"_slot{i}": plan.slots[name].__set__ for i, name in enumerate(plan.slots)})
    generated = globals_["_generated"] = Generated(info, globals_)
    return generated
