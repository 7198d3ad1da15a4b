# Partial stub of torch.export (torch 2.13.0): what treeclass.torch uses.
import os
from typing import IO, Any

from . import pt2_archive as pt2_archive

class ExportedProgram:
    example_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None
    def __init__(
        self,
        root: Any,
        graph: Any,
        graph_signature: Any,
        state_dict: Any,
        range_constraints: Any,
        module_call_graph: Any,
        example_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
        constants: Any = None,
        *,
        verifiers: Any = None,
    ) -> None: ...
    def module(self, check_guards: bool = True) -> Any: ...

def save(
    ep: ExportedProgram,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    opset_version: dict[str, int] | None = None,
    pickle_protocol: int = ...,
) -> None: ...
def load(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> ExportedProgram: ...
