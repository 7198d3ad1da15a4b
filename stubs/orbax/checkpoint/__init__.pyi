# Partial stubs for orbax.checkpoint: only what treeclass.orbax uses, so that `mypy --strict
# src/` and pyright check it with or without orbax installed (orbax ships no type
# information). Everything else is Any. tests/test_stubs.py runs mypy's stubtest against the
# installed orbax-checkpoint (checked: 0.12.8).
import abc
import os
from typing import Any

from _typeshed import Incomplete

from . import args as args

class CheckpointHandler(metaclass=abc.ABCMeta): ...

class CompositeCheckpointHandler(CheckpointHandler):
    def __init__(
        self,
        *item_names: str,
        composite_options: Any = ...,
        handler_registry: Any | None = None,
        **items_and_handlers: CheckpointHandler,
    ) -> None: ...

class JsonCheckpointHandler(CheckpointHandler):
    def __init__(
        self, filename: str | None = None, *, multiprocessing_options: Any = ...
    ) -> None: ...

class PyTreeCheckpointHandler(CheckpointHandler):
    def __init__(
        self,
        aggregate_filename: str | None = None,
        *,
        save_concurrent_gb: int | None = None,
        restore_concurrent_gb: int | None = None,
        save_device_host_concurrent_gb: int | str | None = None,
        memory_limit_options: Any = None,
        use_ocdbt: bool = True,
        use_zarr3: bool = False,
        use_compression: bool = True,
        multiprocessing_options: Any = ...,
        type_handler_registry: Any = ...,
        handler_impl: Any = None,
        pytree_metadata_options: Any = ...,
        array_metadata_validator: Any = ...,
        enable_pinned_host_transfer: bool | None = None,
        is_prioritized_key_fn: Any = None,
    ) -> None: ...

class Checkpointer(metaclass=abc.ABCMeta):
    def __init__(
        self,
        handler: CheckpointHandler,
        *,
        multiprocessing_options: Any = ...,
        file_options: Any = ...,
        atomicity_options: Any = None,
        checkpoint_metadata_store: Any = None,
        temporary_path_class: Any = None,
    ) -> None: ...
    def save(
        self,
        directory: str | os.PathLike[str],
        *args: Any,
        force: bool = False,
        custom_metadata: dict[str, Any] | None = None,
        save_context: Any = None,
        **kwargs: Any,
    ) -> None: ...
    def restore(self, directory: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any: ...
    def metadata(self, directory: str | os.PathLike[str]) -> Any: ...
    def close(self) -> None: ...

class RestoreArgs:
    restore_type: Any
    dtype: Any
    def __init__(self, restore_type: Any | None = None, dtype: Any | None = None) -> None: ...

class ArrayRestoreArgs(RestoreArgs):
    def __init__(
        self,
        restore_type: Any | None = ...,
        dtype: Any | None = None,
        mesh: Any = None,
        mesh_axes: Any = None,
        sharding: Any = None,
        global_shape: tuple[int, ...] | None = None,
        shape: tuple[int, ...] | None = None,
        strict: bool = True,
    ) -> None: ...

def __getattr__(name: str) -> Incomplete: ...
