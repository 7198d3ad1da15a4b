"""The few internal lookups the ``treeclass`` command line needs, in one place.

Everything else in ``_files``, ``_artifacts`` and ``_cli`` uses the public API. These four
functions reach into the registry, the format and the static-value codec; when those
modules move (issue 9), only this file changes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ClassRecord",
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
    from ._registry import registered_nodes

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
        aliases: tuple[str, ...] = tuple(getattr(node, "aliases", ()))  # issue 12, phase 2
        out.append(
            ClassRecord(
                node.type, node.name, node.kind, node.info.data_fields, tuple(statics), aliases
            )
        )
    return out


def static_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a serialized static value, or ``None`` if it can."""
    from ._statics import Unencodable, encode_static

    try:
        encode_static(value)
    except Unencodable as e:
        return e.problem
    except RecursionError:
        return "it nests too deeply"
    return None


def static_name_registered(name: str) -> bool:
    """Whether a static type (``tc.register_static``) is registered under ``name``."""
    from ._statics import static_for_name

    return static_for_name(name) is not None


def document_nodes(text: str | bytes) -> list[Any]:
    """A treespec document's checked node list, without looking any name up.

    Raises:
        TreespecLoadError: the text is not a well-formed document.
    """
    from ._format import loads_nodes

    return loads_nodes(text)
