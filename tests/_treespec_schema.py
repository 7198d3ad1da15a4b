"""Validate treespec documents against the JSON Schema shipped inside the package."""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    text = (importlib.resources.files("treeclass") / "treespec.schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    if importlib.util.find_spec("referencing") is None:
        # jsonschema 4.17, the newest with no compiled dependency (CI's py314 job, on
        # WebAssembly): it joins a "#/$defs/..." reference to the "urn:" $id as the bare
        # fragment, so a reference inside a referenced definition is looked up under the
        # empty URI. The schema is that document too. (Later releases resolve with the
        # `referencing` package, and deprecate RefResolver.)
        resolver = jsonschema.RefResolver.from_schema(schema, store={"": schema})
        return jsonschema.Draft202012Validator(schema, resolver=resolver)
    return jsonschema.Draft202012Validator(schema)


def validate_document(text: str | bytes) -> Any:
    """Parse ``text`` and check it against the schema; return the parsed document."""
    doc = json.loads(text)
    validator().validate(doc)
    return doc


def is_valid_document(doc: Any) -> bool:
    return bool(validator().is_valid(doc))
