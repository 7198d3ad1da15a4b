# Partial stub of torch.serialization (torch 2.13.0): the weights-only allow-list, which the
# torch adapter puts treeclass's by-name rebuild global on (treeclass.torch.allow_weights_only).
from collections.abc import Callable
from typing import Any

def add_safe_globals(
    safe_globals: list[Callable[..., Any] | tuple[Callable[..., Any], str]],
) -> None: ...
def get_safe_globals() -> list[Callable[..., Any] | tuple[Callable[..., Any], str]]: ...
