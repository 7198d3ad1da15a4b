# Partial stub of orbax.checkpoint.args (see __init__.pyi).
import abc
from collections.abc import Mapping
from typing import Any

from _typeshed import Incomplete

class CheckpointArgs: ...

class Composite(metaclass=abc.ABCMeta):
    def __init__(self, **items: Any) -> None: ...
    def __getitem__(self, key: str) -> Any: ...

class JsonSave(CheckpointArgs):
    item: Mapping[str, Any]
    def __init__(self, item: Mapping[str, Any]) -> None: ...

class JsonRestore(CheckpointArgs):
    def __init__(self, item: bytes | None = None) -> None: ...

class PyTreeSave(CheckpointArgs):
    def __init__(
        self,
        item: Any,
        save_args: Any | None = None,
        ocdbt_target_data_file_size: int | None = None,
        custom_metadata: Any = None,
    ) -> None: ...

class PyTreeRestore(CheckpointArgs):
    def __init__(
        self,
        item: Any | None = None,
        restore_args: Any | None = None,
        transforms: Any | None = None,
        transforms_default_to_original: bool = True,
        legacy_transform_fn: Any | None = None,
        partial_restore: bool = False,
    ) -> None: ...

def __getattr__(name: str) -> Incomplete: ...
