"""Schema locks: ``treeclass schema dump`` and ``treeclass schema check``.

A lock (JSON, sorted keys, one block per class) records what the artifacts of a set of
classes hold: each class's stable name and aliases, kind, data fields (in order, with their
aliases and default kind), static fields (what they may hold: JSON kinds, registered static
type names, literal values; their default), ``removed_fields``, ``return_none_fields``,
``pickle_by_name``, whether a ``migrate`` hook exists, and the registered static types (an
enum's members). Nothing in it names a module: moving a class does not change its lock.

:func:`check` does not judge a change by a rule of its own. For each locked class it writes
what that class wrote (its state, made by the state codec of a stand-in class built from the
lock, with every kind of static value the lock says it may hold) and hands it to the loaders
of today's classes: ``treespec_loads`` (the ``objects`` family: ``treeclass.load`` and
``treeclass.orbax`` read the same document), :func:`~treeclass._pickle.rebuild_registered`
(pickles by name), the auxdata deserializer ``jax.export`` holds under the name, and torch's
``treespec_loads`` (``torch.export`` archives keep their structure as that text). What they
do is the verdict. ``forward`` turns it round: today's classes write, and the stand-in of the
locked class (its fields, defaults, aliases and removed fields; not its ``migrate`` hook, of
which the lock knows only that it exists) reads with treeclass's state codec; a compiled
program takes only a state whose children are one per data field
(:func:`~treeclass._core.state.fixed_children_error`), and torch rebuilds a namedtuple by
position (its own unflatten, given the stand-in). What the locked jax.export deserializer of a
namedtuple does (by keyword) is not run: its verdict is the state codec's, which is stricter
only for fields that kept their names but changed order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import typing
from collections import namedtuple
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, NamedTuple

from .._backends.activation import adapter, framework_named
from .._backends.serialize import treespec_loads
from .._core.fields import (
    ALIASES_KEY,
    ClassInfo,
    FieldInfo,
    Kind,
    RebuildPlan,
    check_field_names,
    describe,
    is_attrs_class,
    is_dataclass_class,
    is_namedtuple_class,
)
from .._core.json import dumps_canonical
from .._core.names import Origin
from .._core.nodes import NodeType
from .._core.registry import registered_nodes
from .._core.state import Layout, decode_for, fixed_children_error, make_state_codec
from .._core.statics import (
    _BY_NAME as _STATIC_TYPES,
)
from .._core.statics import (
    BadStatic,
    StaticType,
    Unencodable,
    _annotations,
    _kind_of,
    decode_static,
    encode_static,
    static_for_name,
    static_for_type,
)
from .._errors import (
    RegistrationError,
    RegistrationTypeError,
    SchemaLockError,
    TreeclassError,
    brief,
    unregistered_name,
)
from .._pickle import rebuild_registered
from .._treespec.format import dumps_nodes
from .artifacts import held_by_treeclass

__all__ = ["FAMILIES", "LOCK_FORMAT", "LOCK_VERSION", "Report", "check", "dumps_lock", "lock_of"]

LOCK_FORMAT: Final = "treeclass.schema-lock"
LOCK_VERSION: Final = 1
#: The loader families a verdict is given for.
FAMILIES: Final[tuple[str, ...]] = ("objects", "pickle", "jax.export", "torch.export")
MODES: Final[tuple[str, ...]] = ("backward", "forward", "full")

#: One value of each JSON kind a static field may hold (what a stand-in writes).
_KINDS: Final[dict[str, tuple[type, Any]]] = {
    "None": (type(None), None),
    "bool": (bool, False),
    "bytes": (bytes, b""),
    "dict": (dict, {}),
    "float": (float, 0.5),
    "frozenset": (frozenset, frozenset()),
    "int": (int, 0),
    "list": (list, []),
    "str": (str, ""),
    "tuple": (tuple, ()),
}
_KIND_OF_TYPE: Final = {t: k for k, (t, _) in _KINDS.items()}
_UNHASHABLE: Final = ("dict", "list")


class _Leaf:
    """The leaf placeholder the loaders are given (no loader looks at leaves)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<leaf>"


_LEAF: Final = _Leaf()
# (subscripted with tuples made at run time)
_LITERAL: Final[Any] = typing.Literal
_UNION: Final[Any] = typing.Union


# --- writing a lock -------------------------------------------------------------------------------


def registered_by(origin: Origin | None, cls: type, modules: Sequence[str]) -> bool:
    """Whether ``modules`` register ``cls`` (what ``treeclass check`` and ``schema`` take).

    The registering call ran in one of the modules or a submodule (a class defined elsewhere,
    such as a library's, registered with ``register_dataclass`` counts), or the class is
    defined in one of them. Classes registered by other code the modules import --
    treeclass's optax adapter naming optax's states, another library -- are left out.
    """
    caller = None if origin is None else origin.caller
    return any(
        isinstance(m, str) and any(m == x or m.startswith(f"{x}.") for x in modules)
        for m in (caller, getattr(cls, "__module__", None))
    )


def _default_kind(f: FieldInfo) -> str:
    if f.default is None:
        return "None"
    return "other" if f.has_default else "none"


def _holds(annotation: Any, hashable: bool) -> tuple[list[str], list[str], list[Any]]:
    """``(JSON kinds, registered static type names, literal values)`` a static field may hold."""
    kind = None if annotation is None else _kind_of(annotation)
    plain: Iterable[type] = [t for t, _ in _KINDS.values()] if kind is None else kind[0]
    literals: Iterable[Any] = () if kind is None or kind[1] is None else kind[1]
    kinds = sorted({_KIND_OF_TYPE[t] for t in plain if t in _KIND_OF_TYPE})
    if hashable:  # the class's instances are hashable: so are its static values
        kinds = [k for k in kinds if k not in _UNHASHABLE]
    types = sorted({st.name for t in plain if (st := static_for_type(t)) is not None})
    values: list[Any] = []
    for v in literals:
        try:
            values.append(encode_static(v))
        except (Unencodable, RecursionError):
            continue  # no artifact holds it
    values.sort(key=dumps_canonical)
    return kinds, types, values


def _class_entry(node: NodeType) -> dict[str, Any]:
    info = node.info
    assert info is not None  # a registered class
    evolution = info.evolution
    entry: dict[str, Any] = {
        "aliases": sorted(node.aliases),
        "kind": info.kind,
        "data": [
            {"name": f.name, "aliases": list(f.aliases), "default": _default_kind(f)}
            for f in info.fields
            if not f.static
        ],
        "removed_fields": sorted(evolution.removed) if evolution else [],
        "migrate": evolution is not None and evolution.migrate is not None,
    }
    if info.kind == "namedtuple":
        entry["pickle_by_name"] = node.pickle_by_name
        return entry
    hashable = getattr(info.cls, "__hash__", None) is not None
    annotations = _annotations(info.cls) if info.static_fields else {}
    static: list[dict[str, Any]] = []
    for f in info.fields:
        if not f.static:
            continue
        kinds, types, values = _holds(annotations.get(f.name), hashable)
        item: dict[str, Any] = {
            "name": f.name,
            "aliases": list(f.aliases),
            "default": _default_kind(f),
            "holds": {"kinds": kinds, "types": types, "values": values},
        }
        if f.has_default:
            # (a default with no JSON form: no artifact holds it, the writers refuse it)
            with contextlib.suppress(Unencodable, RecursionError):
                item["default_value"] = encode_static(f.make_default())
        static.append(item)
    entry["static"] = static
    entry["return_none_fields"] = node.return_none_fields
    entry["pickle_by_name"] = node.pickle_by_name
    return entry


def _static_type_entry(st: StaticType) -> dict[str, Any]:
    cls = st.cls
    if isinstance(cls, enum.EnumMeta):
        members: dict[str, Any] = {}
        for m in typing.cast("type[enum.Enum]", cls):
            try:
                members[m.name] = encode_static(m)
            except (Unencodable, RecursionError):
                continue
        return {"kind": "enum", "members": members}
    fields_of = getattr(st.from_json, "__qualname__", "").startswith("_fields_converters.")
    if fields_of and (is_dataclass_class(cls) or is_attrs_class(cls) or is_namedtuple_class(cls)):
        return {"kind": "fields", "fields": [f.name for f in describe(cls).fields if f.init]}
    return {"kind": "converters"}


def lock_of(modules: Sequence[str]) -> dict[str, Any]:
    """The lock of every named class the (imported) ``modules`` register, and their static types.

    A class counts when the registering call ran in one of the modules (or a submodule), or
    the class is defined there. Static types: those the modules register and those the
    classes' static fields name.
    """
    classes: dict[str, Any] = {}
    for node in registered_nodes():
        if (
            node.name is not None
            and node.info is not None
            and registered_by(node.origin, node.type, modules)
        ):
            classes[node.name] = _class_entry(node)
    named = {t for c in classes.values() for s in c.get("static", ()) for t in s["holds"]["types"]}
    types = {
        st.name: _static_type_entry(st)
        for st in list(_STATIC_TYPES.values())
        if st.name in named or registered_by(st.origin, st.cls, modules)
    }
    return {
        "format": LOCK_FORMAT,
        "version": LOCK_VERSION,
        "classes": classes,
        "static_types": types,
    }


def _lines(value: Any, depth: int, pad: str) -> str:
    if depth >= 4 or value.__class__ not in (dict, list) or not value:
        return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(", ", ": "))
    inner = pad + "  "
    if value.__class__ is list:
        items = [inner + _lines(v, depth + 1, inner) for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    obj = typing.cast("dict[str, Any]", value)
    items = [
        f"{inner}{json.dumps(k, ensure_ascii=True)}: {_lines(obj[k], depth + 1, inner)}"
        for k in sorted(obj)
    ]
    return "{\n" + ",\n".join(items) + f"\n{pad}}}"


def dumps_lock(lock: dict[str, Any]) -> str:
    """The lock's text: sorted keys, a block per class, a line per field, ASCII."""
    return _lines(lock, 0, "") + "\n"


# --- reading a lock -------------------------------------------------------------------------------


def _bad(where: str, problem: str) -> SchemaLockError:
    return SchemaLockError(
        f"{where}: {problem}; write the lock again with `treeclass schema dump MODULE ... -o "
        "PATH` (from the commit whose classes it should hold)."
    )


def _shaped(value: Any, shape: Any, where: str) -> None:
    """Check ``value`` against ``shape``: a type, ``[item shape]`` or ``{key: shape}``."""
    if shape.__class__ is list:
        if value.__class__ is not list:
            raise _bad(where, f"expected a list, got {brief(value, 60)}")
        for i, v in enumerate(value):
            _shaped(v, shape[0], f"{where}[{i}]")
    elif shape.__class__ is dict:
        if value.__class__ is not dict:
            raise _bad(where, f"expected an object, got {brief(value, 60)}")
        keys = typing.cast("dict[str, Any]", shape)
        obj = typing.cast("dict[str, Any]", value)
        missing = sorted(k for k in keys if not k.endswith("?") and k not in obj)
        if missing:
            raise _bad(where, f"it lacks {missing!r}")
        for key, s in keys.items():
            k = key.rstrip("?")
            if k in obj:
                _shaped(obj[k], s, f"{where}.{k}")
    elif shape is not object and value.__class__ is not shape:
        raise _bad(where, f"expected a {shape.__name__}, got {brief(value, 60)}")


_FIELD: Final = {"name": str, "aliases": [str], "default": str}
_CLASS: Final = {
    "aliases": [str],
    "kind": str,
    "data": [_FIELD],
    "static?": [
        {
            **_FIELD,
            "holds": {"kinds": [str], "types": [str], "values": list},
            "default_value?": object,
        }
    ],
    "removed_fields": [str],
    "return_none_fields?": bool,
    "pickle_by_name": bool,
    "migrate": bool,
}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number")


def _check_class_entry(entry: dict[str, Any], where: str) -> None:
    """A class block's kind and names: what a class can have (the rules registration uses)."""
    kinds = typing.get_args(Kind)
    if entry["kind"] not in kinds:
        raise _bad(where, f"its kind {brief(entry['kind'], 40)} is not one of {kinds}")
    if entry["kind"] == "namedtuple" and entry.get("static"):
        raise _bad(where, "a namedtuple has no static fields")
    fields = [*entry["data"], *entry.get("static", ())]
    try:
        check_field_names([f["name"] for f in fields], "fields", where)
        for f in fields:
            check_field_names(f["aliases"], "aliases=", where)
        check_field_names(entry["removed_fields"], "removed_fields=", where)
    except (RegistrationError, RegistrationTypeError) as e:
        raise _bad(where, str(e).split(". ")[0].rstrip(".")) from None


def read_lock(text: str | bytes) -> dict[str, Any]:
    """Parse and check a lock's text.

    Raises:
        SchemaLockError: it is not a lock this version of treeclass writes.
    """
    try:
        lock = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise _bad("the lock", f"it is not JSON ({brief(str(e), 120)})") from None
    _shaped(lock, {"format": str, "version": int, "classes": dict, "static_types": dict}, "lock")
    if lock["format"] != LOCK_FORMAT or lock["version"] != LOCK_VERSION:
        raise _bad(
            "the lock",
            f"it is {lock['format']!r} version {lock['version']!r}, not {LOCK_FORMAT!r} "
            f"version {LOCK_VERSION}",
        )
    for name, entry in lock["classes"].items():
        where = f"lock.classes[{name!r}]"
        _shaped(entry, _CLASS, where)
        _check_class_entry(entry, where)
    for name, entry in lock["static_types"].items():
        _shaped(entry, {"kind": str, "members?": dict, "fields?": [str]}, f"static type {name!r}")
    return typing.cast("dict[str, Any]", lock)


# --- stand-ins of locked classes ------------------------------------------------------------------


class _Other:
    """The default of a stand-in's field whose default is neither absent nor ``None``."""

    def __repr__(self) -> str:
        return "<default>"


def _annotation(holds: dict[str, Any], types: dict[str, Any]) -> Any:
    """A stand-in field's annotation: what the locked field held, as today's types say it."""
    parts: list[Any] = [_KINDS[k][0] for k in holds["kinds"] if k in _KINDS]
    literal: list[Any] = []
    for v in holds["values"]:
        try:
            value = decode_static(v)
            hash(value)  # (a Literal's values; a static value is hashable)
        except (BadStatic, RecursionError, TypeError):
            continue
        literal.append(value)
    for name in holds["types"]:
        st = static_for_name(name)
        locked = types.get(name, {})
        if st is None:
            continue
        if isinstance(st.cls, enum.EnumMeta) and locked.get("kind") == "enum":
            known = [dumps_canonical(v) for v in locked.get("members", {}).values()]
            members = typing.cast("type[enum.Enum]", st.cls)
            literal += [m for m in members if dumps_canonical(encode_static(m)) in known]
        else:
            parts.append(st.cls)
    if literal:
        parts.append(_LITERAL[tuple(literal)])
    if not parts or set(holds["kinds"]) >= set(_KINDS) - set(_UNHASHABLE):
        return Any
    return _UNION[tuple(parts)] if len(parts) > 1 else parts[0]


class _Locked:
    """The class of a locked class's stand-in that only writes (it is never instantiated)."""


#: The rebuild plan of a stand-in that only writes (no loader rebuilds it).
_NO_PLAN: Final = RebuildPlan("init", object.__new__, (), {}, False, ())


def _writer(entry: dict[str, Any]) -> ClassInfo:
    """What the locked class writes: its data fields (its static values are the samples')."""
    kind: Kind = "namedtuple" if entry["kind"] == "namedtuple" else "dataclass"
    fields = tuple(FieldInfo(f["name"], False, f["name"]) for f in entry["data"])
    return ClassInfo(_Locked, kind, fields, _NO_PLAN)


def _stand_in(entry: dict[str, Any], types: dict[str, Any]) -> ClassInfo:
    """A class shaped as the locked one, its statics annotated as the lock says they were."""
    if entry["kind"] == "namedtuple":
        make: Any = namedtuple  # (its fields are the lock's, known at run time only)
        return describe(make("Locked", [f["name"] for f in entry["data"]]))
    other = _Other()
    spec: list[tuple[str, Any, Any]] = []
    static: list[str] = []
    for f in (*entry["data"], *entry.get("static", ())):
        kwargs: dict[str, Any] = {"metadata": {ALIASES_KEY: tuple(f["aliases"])}, "kw_only": True}
        if f["default"] == "None":
            kwargs["default"] = None
        elif f["default"] == "other":
            try:
                kwargs["default"] = decode_static(f["default_value"])
            except (KeyError, BadStatic, RecursionError):
                kwargs["default"] = other
        annotation: Any = Any
        if "holds" in f:
            static.append(f["name"])
            annotation = _annotation(f["holds"], types)
        spec.append((f["name"], annotation, dataclasses.field(**kwargs)))
    cls = dataclasses.make_dataclass("Locked", spec, frozen=True)
    return describe(cls, static=static, removed_fields=entry["removed_fields"])


def _samples(entry: dict[str, Any], types: dict[str, Any]) -> dict[str, list[Any]]:
    """Per static field, the encoded values the class may have written (its default first)."""
    out: dict[str, list[Any]] = {}
    for f in entry.get("static", ()):
        found: dict[str, Any] = {}
        if "default_value" in f:
            found[dumps_canonical(f["default_value"])] = f["default_value"]
        holds = f["holds"]
        for k in holds["kinds"]:
            if k in _KINDS:
                v = encode_static(_KINDS[k][1])
                found.setdefault(dumps_canonical(v), v)
        for v in holds["values"]:
            found.setdefault(dumps_canonical(v), v)
        for t in holds["types"]:
            for v in types.get(t, {}).get("members", {}).values():
                found.setdefault(dumps_canonical(v), v)
        out[f["name"]] = list(found.values()) or [None]
    return out


def _combinations(statics: Sequence[str], samples: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Encoded static values: each field's first sample, then each other sample in turn."""
    first = {s: samples[s][0] for s in statics}
    out = [first]
    for s in statics:
        out += [{**first, s: v} for v in samples[s][1:]]
    return out


# --- verdicts -------------------------------------------------------------------------------------


class Verdict(NamedTuple):
    """What one loader family does: ``loads`` (``None``: not checked here) and why."""

    loads: bool | None
    why: str = ""


_LOADS: Final = Verdict(True)


def _judge(load: Callable[[Any], Any], states: Iterable[Any]) -> Verdict:
    """What ``load`` does with each state: the first refusal, or that it loads them all."""
    for state in states:
        try:
            load(state)
        except TreeclassError as e:
            return Verdict(False, str(e))
        except Exception as e:  # a framework's own refusal (jax, torch)
            return Verdict(False, f"{type(e).__name__}: {brief(str(e), 300)}")
    return _LOADS


def _framework(name: str) -> Any | None:
    """The framework's adapter, active, or ``None`` where it is not installed."""
    framework = framework_named(name)
    if framework is None or not framework.installed():
        return None
    return adapter(framework)


def _backward(name: str, entry: dict[str, Any], types: dict[str, Any]) -> dict[str, Verdict]:
    """What today's loaders do with what the locked class wrote."""
    info = _writer(entry)
    base = make_state_codec(info).getstate(())
    namedtuple_kind = entry["kind"] == "namedtuple"
    statics = tuple(f["name"] for f in entry.get("static", ()))
    if namedtuple_kind:
        states = [base]
    else:
        combos = _combinations(statics, _samples(entry, types))
        states = [{**base, "static": combo} for combo in combos]
    data = info.data_fields
    k = len(data)
    leaves = [_LEAF] * k
    jax = _framework("jax")
    torch = _framework("torch")

    def objects(state: Any) -> None:
        treespec_loads(dumps_nodes([(name, state, k), *[None] * k]))

    def pickled(state: Any) -> None:
        fields = dict.fromkeys(data, _LEAF)
        written = None
        if statics:
            written = statics
            static = state["static"]
            fields |= {s: decode_for(name, f"static field {s!r}", static[s]) for s in statics}
        rebuild_registered(name, "", "", fields, written)

    def jax_export(state: Any) -> None:
        entry_ = jax._export_registries()[1].get(name) if jax is not None else None
        if entry_ is None or not held_by_treeclass(jax, name):
            raise unregistered_name(name, "jax.export (as a class treeclass registered)")
        aux_bytes = json.dumps(list(data)) if namedtuple_kind else dumps_canonical(state)
        aux = entry_[1](aux_bytes.encode("utf-8"))
        if namedtuple_kind:  # (jax's own rebuild of a namedtuple checks its fields)
            entry_[2](aux, leaves)

    def torch_export(state: Any) -> None:
        if not held_by_treeclass(torch, name):
            raise unregistered_name(name, "torch (as a class treeclass registered)")
        pytree: Any = getattr(torch, "pytree", None)
        leaf: dict[str, Any] = {"type": None, "context": None, "children_spec": []}
        if namedtuple_kind:
            node = {"type": "collections.namedtuple", "context": name}
        else:
            node = {"type": name, "context": dumps_canonical(state)}
        spec = pytree.treespec_loads(json.dumps([1, {**node, "children_spec": [leaf] * k}]))
        if namedtuple_kind:  # (torch rebuilds a namedtuple by position)
            pytree.tree_unflatten(leaves, spec)

    out = {
        "objects": _judge(objects, states),
        "pickle": (
            _judge(pickled, states)
            if entry["pickle_by_name"]
            else Verdict(None, "pickled by module path (pickle_by_name=False): not checked")
        ),
    }
    for family, fw, run in (
        ("jax.export", jax, jax_export),
        ("torch.export", torch, torch_export),
    ):
        if fw is None:
            out[family] = Verdict(None, f"{family.split('.')[0]} is not installed here")
        else:
            out[family] = _judge(run, states)
    return out


def _forward(
    entry: dict[str, Any], node: NodeType, today: dict[str, Any], types: dict[str, Any]
) -> dict[str, Verdict]:
    """What the locked class (its stand-in) does with what today's class writes."""
    info = _stand_in(entry, types)
    reader = make_state_codec(info)
    codec = node.codec
    assert codec is not None and node.info is not None
    states: list[Any] = []
    if node.kind == "namedtuple":
        states.append(codec.getstate(None))
    else:
        current = {n: _static_type_entry(st) for n, st in list(_STATIC_TYPES.items())}
        for combo in _combinations(node.static_fields, _samples(today, current)):
            try:  # what today's class writes (its own check first)
                values = tuple(decode_static(combo[s]) for s in node.static_fields)
                states.append(codec.getstate(values))
            except (TreeclassError, BadStatic):
                continue

    def objects(state: Any, fixed: bool = False) -> None:
        _, plan = reader.load(state)
        if fixed and isinstance(plan, Layout):
            what = "an artifact written by today's class"
            raise fixed_children_error("the locked class", plan.dropped, plan.filled, what)

    def pickled(state: Any) -> None:
        if reader.from_fields is None:
            reader.load(state)
            return
        fields = dict.fromkeys(node.data_fields, _LEAF)
        fields |= {s: decode_static(state["static"][s]) for s in node.static_fields}
        reader.from_fields(fields, node.static_fields or None)

    fixed = _judge(functools.partial(objects, fixed=True), states)
    torch_export = fixed
    if node.kind == "namedtuple":  # torch rebuilds a namedtuple by position: its own rule
        torch = _framework("torch")
        if torch is None:
            torch_export = Verdict(None, "torch is not installed here")
        else:
            pytree: Any = getattr(torch, "pytree", None)
            k = len(node.data_fields)
            spec = pytree.TreeSpec(namedtuple, info.cls, [pytree.treespec_leaf()] * k)
            torch_export = _judge(lambda _: pytree.tree_unflatten([_LEAF] * k, spec), [None])
    return {
        "objects": _judge(objects, states),
        "pickle": (
            _judge(pickled, states)
            if node.pickle_by_name
            else Verdict(None, "pickled by module path (pickle_by_name=False): not checked")
        ),
        "jax.export": fixed,
        "torch.export": torch_export,
    }


# --- what changed (for people: the verdicts above decide) -----------------------------------------


def _by_name(fields: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in fields}


def _field_changes(kind: str, old: list[Any], new: list[Any], removed: list[str]) -> list[str]:
    out: list[str] = []
    now = _by_name(new)
    renamed = {a: f["name"] for f in new for a in f["aliases"]}
    for f in old:
        n = f["name"]
        g = now.get(n)
        if g is None and n in renamed:
            g = now[renamed[n]]
            out.append(f"{kind} field {n!r} renamed to {g['name']!r} (aliases={g['aliases']!r})")
        elif g is None:
            listed = " (listed in removed_fields=)" if n in removed else ""
            out.append(f"{kind} field {n!r} removed{listed}")
            continue
        if g["default"] != f["default"]:
            out.append(f"{kind} field {g['name']!r}: default {f['default']} -> {g['default']}")
        if f.get("holds") != g.get("holds") and "holds" in f:
            was, now_ = _shown(f["holds"]), _shown(g["holds"])
            out.append(f"static field {g['name']!r} holds {was} -> {now_}")
    known = {f["name"] for f in old}
    for g in new:
        if g["name"] not in known and not known & set(g["aliases"]):
            out.append(f"new {kind} field {g['name']!r} (default: {g['default']})")
    kept = [renamed.get(f["name"], f["name"]) for f in old]
    if [n for n in kept if n in now] != [f["name"] for f in new if f["name"] in kept]:
        out.append(f"{kind} fields reordered")
    return out


def _shown(holds: dict[str, Any]) -> str:
    """What a static field may hold, for people: ``int | str | 'a' | evo.Act``."""
    parts = [*holds["kinds"], *map(dumps_canonical, holds["values"]), *holds["types"]]
    return " | ".join(parts) or "nothing"


def _changes(old: dict[str, Any], new: dict[str, Any], name: str, today: str) -> list[str]:
    out: list[str] = []
    if today != name:
        out.append(f"class renamed to {today!r} ({name!r} kept as an alias)")
    if old["kind"] != new["kind"]:
        out.append(f"kind {old['kind']} -> {new['kind']}")
    removed = new["removed_fields"]
    out += _field_changes("data", old["data"], new["data"], removed)
    out += _field_changes("static", old.get("static", []), new.get("static", []), removed)
    for key in ("return_none_fields", "pickle_by_name", "migrate"):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    return out


def _type_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, t in old.items():
        now = new.get(name)
        if now is None:
            out[name] = f"static type {name!r} is no longer registered"
        elif t != now:
            gone = sorted(set(t.get("members", {})) - set(now.get("members", {})))
            what = f"members {gone!r} removed" if gone else "changed"
            out[name] = f"static type {name!r}: {what}"
    return out


def _fix(change: str, namedtuple_kind: bool, programs_break: bool) -> str | None:
    """What to do about one change of a class that some loader no longer loads."""
    if change.startswith("class renamed"):
        return None
    if change.startswith("class ") and "is gone" in change:
        return "give today's class aliases=(<this name>,) (or register it again under it)"
    if namedtuple_kind:
        return (
            "a namedtuple's fields cannot change between saving and loading: keep them, or "
            "make it a dataclass (whose aliases=, removed_fields= and defaults apply)"
        )
    if change.startswith("new data field") and change.endswith("(default: other)"):
        if not programs_break:
            return None
        return (
            "give the new data field the default None (a compiled program's inputs are "
            "fixed), or export the programs again"
        )
    if change.endswith("(default: none)"):
        return "give the new field a default"
    if change.endswith("(listed in removed_fields=)"):
        if not programs_break:
            return None
        return "a compiled program takes every data field as input: export it again"
    if " removed" in change and "field" in change:
        return (
            "if it was renamed, give the new field aliases=(<old name>,); if it was dropped, "
            "list it in removed_fields="
        )
    if "members" in change and "removed" in change:
        return "keep the enum member (or add a migrate= hook that maps states holding it)"
    if "no longer registered" in change:
        return "keep the static type registered under its name"
    if " holds " in change:
        return "keep the field's annotation accepting what it held (or add a migrate= hook)"
    if change.endswith("reordered"):
        return "keep the data fields in their order"
    if change.startswith(("kind ", "return_none_fields", "pickle_by_name")):
        return f"undo the change ({change})"
    return None


def _fixes(changes: list[str], namedtuple_kind: bool, verdicts: dict[str, Verdict]) -> list[str]:
    programs = any(verdicts[f].loads is False for f in ("jax.export", "torch.export"))
    out = [
        f"{change}: {fix}"
        for change in changes
        if (fix := _fix(change, namedtuple_kind, programs)) is not None
    ]
    return out or [
        "add a migrate= hook that turns the saved state into one the class loads, or re-save"
    ]


# --- the report -----------------------------------------------------------------------------------


class Row(NamedTuple):
    """One class of the lock (or of today) and what its changes do to each loader family."""

    name: str
    changes: list[str]
    verdicts: dict[str, Verdict]
    fixes: list[str]

    @property
    def breaks(self) -> bool:
        return any(v.loads is False for v in self.verdicts.values())


class Report(NamedTuple):
    """The result of :func:`check`."""

    mode: str
    rows: list[Row]
    checked: int

    @property
    def compatible(self) -> bool:
        """Whether every locked class's artifacts still load in the mode."""
        return not any(r.breaks for r in self.rows)

    def as_json(self) -> dict[str, Any]:
        """The report for machines (``--json``)."""
        return {
            "mode": self.mode,
            "compatible": self.compatible,
            "classes_checked": self.checked,
            "changes": [
                {
                    "class": r.name,
                    "changes": r.changes,
                    "verdicts": {
                        f: {"loads": v.loads, "why": v.why} for f, v in r.verdicts.items()
                    },
                    "fixes": r.fixes if r.breaks else [],
                }
                for r in self.rows
            ],
        }

    def text(self) -> str:
        """The report for people: the verdict table, then why each breaking one breaks."""
        head = f"treeclass schema check ({self.mode}): {self.checked} locked classes"
        if not self.rows:
            return f"{head}; no changes.\n"
        cell = {True: "loads", False: "BREAKS", None: "-"}
        table = [["class", "change", *FAMILIES]]
        for r in self.rows:
            for i, change in enumerate(r.changes or ["(no change seen)"]):
                verdicts = [cell[r.verdicts[f].loads] if i == 0 else "" for f in FAMILIES]
                table.append([r.name if i == 0 else "", change, *verdicts])
        widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]
        lines = [head, ""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        for r in self.rows:
            if not r.breaks:
                continue
            lines += ["", f"{r.name}:"]
            for f in FAMILIES:
                v = r.verdicts[f]
                if v.loads is False:
                    lines.append(f"  {f} does not load it: {v.why}")
            lines += [f"  fix: {fix}" for fix in r.fixes]
        verdict = "compatible" if self.compatible else "NOT compatible"
        lines += ["", f"{verdict} ({self.mode})."]
        return "\n".join(lines) + "\n"


def _worst(a: dict[str, Verdict], b: dict[str, Verdict], tag: str) -> dict[str, Verdict]:
    out = dict(a)
    for f, v in b.items():
        if v.loads is False and out[f].loads is not False:
            out[f] = Verdict(False, f"({tag}) {v.why}")
    return out


def check(lock: dict[str, Any], modules: Sequence[str], mode: str = "backward") -> Report:
    """Compare the classes ``modules`` register today with ``lock`` (:func:`read_lock`'s).

    Raises:
        SchemaLockError: ``mode`` is not ``"backward"``, ``"forward"`` or ``"full"``.
    """
    if mode not in MODES:
        raise SchemaLockError(f"mode={mode!r} is not one of {list(MODES)!r}.")
    now = lock_of(modules)
    locked_types: dict[str, Any] = lock["static_types"]
    type_changes = _type_changes(locked_types, now["static_types"])
    nodes = {n.name: n for n in registered_nodes() if n.name is not None}
    by_alias = {a: n for n in nodes.values() for a in n.aliases}
    rows: list[Row] = []
    seen: set[str] = set()
    for name, entry in sorted(lock["classes"].items()):
        node = nodes.get(name) or by_alias.get(name)
        today_name = None if node is None else node.name
        today = None
        if node is not None and today_name is not None:  # (maybe moved to another module)
            today = now["classes"].get(today_name) or _class_entry(node)
        if today_name is not None:
            seen.add(today_name)
        if node is None or today is None:
            changes = [f"class {name!r} is gone (no class of these modules has the name or alias)"]
        else:
            assert today_name is not None
            changes = _changes(entry, today, name, today_name)
        named = {t for s in entry.get("static", ()) for t in s["holds"]["types"]}
        changes += [text for t, text in type_changes.items() if t in named]
        if not changes and not entry["migrate"]:
            continue
        verdicts: dict[str, Verdict] = dict.fromkeys(FAMILIES, _LOADS)
        if mode != "forward":
            verdicts = _backward(name, entry, locked_types)
        if mode != "backward":
            forward: dict[str, Verdict]
            if node is None or today is None:
                why = (
                    f"no class of today's writes the name {name!r}: if the class was renamed, "
                    "the locked classes do not know the name it writes now"
                )
                forward = dict.fromkeys(FAMILIES, Verdict(False, why))
            elif today_name == name or today_name in entry["aliases"]:
                forward = _forward(entry, node, today, locked_types)
            else:
                why = f"the locked classes know no class named {today_name!r}"
                forward = dict.fromkeys(FAMILIES, Verdict(False, why))
            verdicts = _worst(verdicts, forward, "forward") if mode == "full" else forward
        if not changes and all(v.loads is not False for v in verdicts.values()):
            continue
        row = Row(name, changes, verdicts, [])
        if row.breaks:
            row = row._replace(fixes=_fixes(changes, entry["kind"] == "namedtuple", verdicts))
        rows.append(row)
    for name in sorted(set(now["classes"]) - seen - set(lock["classes"])):
        rows.append(Row(name, ["new class"], dict.fromkeys(FAMILIES, _LOADS), []))
    return Report(mode, rows, len(lock["classes"]))


# --- the command line -----------------------------------------------------------------------------


def dump_command(modules: Sequence[str], output: str | None, out: typing.IO[str]) -> int:
    """``treeclass schema dump``: write the lock to ``output`` (``None``: to ``out``)."""
    text = dumps_lock(lock_of(modules))
    if output is None:
        out.write(text)
    else:
        with open(output, "w", encoding="ascii", newline="\n") as f:
            f.write(text)
    return 0


def read_lock_file(path: str) -> dict[str, Any]:
    """:func:`read_lock` of a file.

    Raises:
        SchemaLockError: the file cannot be read, or is not a lock.
    """
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise SchemaLockError(
            f"cannot read the lock {path!r}: {e.strerror or e}; pass the path of a file "
            "written by `treeclass schema dump`."
        ) from None
    return read_lock(text)


def check_command(
    lock: dict[str, Any], modules: Sequence[str], mode: str, as_json: bool, out: typing.IO[str]
) -> int:
    """``treeclass schema check``: 0 compatible, 1 not."""
    report = check(lock, modules, mode)
    if as_json:
        out.write(json.dumps(report.as_json(), indent=2, sort_keys=True) + "\n")
    else:
        out.write(report.text())
    return 0 if report.compatible else 1
