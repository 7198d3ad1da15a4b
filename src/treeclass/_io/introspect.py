"""The few internal lookups the ``treeclass`` command line and files need, in one place.

Everything else in ``_files``, ``_artifacts`` and ``_cli`` uses the public API. These
functions reach into the registry, the format and the static-value codec; when those
modules move (issue 9), only this file changes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ClassRecord",
    "current_child_entries",
    "document_nodes",
    "registered_classes",
    "static_name_registered",
    "static_problem",
]


class ClassRecord:
    """What ``treeclass check`` shows about one registered class."""

    __slots__ = ("aliases", "cls", "data", "kind", "name", "static_defaults")

    cls: type
    name: str | None
    kind: str
    data: tuple[str, ...]
    #: Each static field with its default: ``(name, has_default, default value)``.
    static_defaults: tuple[tuple[str, bool, Any], ...]
    aliases: tuple[str, ...]

    def __init__(
        self,
        cls: type,
        name: str | None,
        kind: str,
        data: tuple[str, ...],
        static_defaults: tuple[tuple[str, bool, Any], ...],
        aliases: tuple[str, ...],
    ) -> None:
        self.cls = cls
        self.name = name
        self.kind = kind
        self.data = data
        self.static_defaults = static_defaults
        self.aliases = aliases


def registered_classes() -> list[ClassRecord]:
    """Every class registered with treeclass, in registration order."""
    from .._core.registry import registered_nodes

    out: list[ClassRecord] = []
    for node in registered_nodes():
        statics: list[tuple[str, bool, Any]] = []
        if node.info is None:  # pragma: no cover - registered classes are described
            continue
        for f in node.info.fields:
            if f.static:
                has = f.has_default
                try:
                    value = f.make_default() if has else None
                except Exception as e:  # a default_factory that fails is worth showing
                    value = e
                statics.append((f.name, has, value))
        out.append(
            ClassRecord(
                node.type, node.name, node.kind, node.info.data_fields, tuple(statics), node.aliases
            )
        )
    return out


def static_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a serialized static value, or ``None`` if it can."""
    from .._core.statics import Unencodable, encode_static

    try:
        encode_static(value)
    except Unencodable as e:
        return e.problem
    except RecursionError:
        return "it nests too deeply"
    return None


def static_name_registered(name: str) -> bool:
    """Whether a static type (``tc.register_static``) is registered under ``name``."""
    from .._core.statics import static_for_name

    return static_for_name(name) is not None


def current_child_entries(
    nodes: list[Any], entries: list[list[str] | None]
) -> list[list[str] | None] | None:
    """The key entries of each node's children by the names its class's fields have today.

    ``entries`` are the key entries as the document writes them
    (:func:`treeclass._treespec.treedoc.child_entries`). A class that renamed fields (``aliases=``,
    or a ``migrate=`` hook) names some of its children differently today; returns a copy of
    ``entries`` with those, or ``None`` when every node's are as written (the usual case).
    Only classes that declare how they evolved are looked at.
    """
    from .._core.registry import node_for_name
    from .._errors import TreeclassError

    out: list[list[str] | None] | None = None
    found: dict[str, Any] = {}
    for i, item in enumerate(nodes):
        if item is None:
            continue
        name = item[0]
        child_names = found.get(name, found)
        if child_names is found:
            node = node_for_name(name)
            codec = None if node is None else node.codec
            child_names = found[name] = None if codec is None else codec.child_names
        if child_names is None:
            continue
        try:
            names = child_names(item[1])
        except TreeclassError:  # pragma: no cover - the document loaded, so its states do
            continue
        if names is None or len(names) != item[2]:
            continue  # pragma: no cover - as above
        renamed = [f".{n}" for n in names]
        if renamed != entries[i]:
            if out is None:
                out = list(entries)
            out[i] = renamed
    return out


def document_nodes(text: str | bytes) -> list[Any]:
    """A treespec document's checked node list, without looking any name up.

    Raises:
        TreespecLoadError: the text is not a well-formed document.
    """
    from .._treespec.format import loads_nodes

    return loads_nodes(text)
