from collections.abc import Callable
from typing import Any

default_collate_fn_map: dict[type | tuple[type, ...], Callable[..., Any]]

def collate(
    batch: Any, *, collate_fn_map: dict[type | tuple[type, ...], Callable[..., Any]] | None = None
) -> Any: ...
