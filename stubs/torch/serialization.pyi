# Partial stub of torch.serialization (torch 2.13.0): what treeclass's archive checks use.
import os
from typing import IO, Any

def load(
    f: str | os.PathLike[str] | IO[bytes],
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any: ...
