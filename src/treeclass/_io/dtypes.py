"""Every array dtype treeclass writes or reads, in one table, and the lookups made from it.

Every writer and reader (safetensors, ``tc.save`` / ``tc.load``, :mod:`treeclass.orbax`,
``treeclass inspect``) takes its dtypes from :data:`DTYPES`. Nothing is imported at import
time; :func:`numpy_dtype` imports numpy (and ml_dtypes) on first use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "DTYPES",
    "FILE_DTYPES",
    "ORBAX_DTYPES",
    "ORBAX_REFUSED",
    "SAFETENSORS_BITS",
    "SAFETENSORS_NAMES",
    "max_dims",
    "numpy_dtype",
    "torch_dtype",
]

#: ``(numpy name, from ml_dtypes, safetensors code, bits, torch name, stored by orbax)``, a
#: code or torch name ``None`` where there is none; safetensors' dtypes (0.8) first, in its
#: alignment order (the order its writer sorts tensors by). torch packs float4 two values a
#: byte (``float4_e2m1fn_x2``), as safetensors does; ml_dtypes one a byte. orbax (0.12.8,
#: tensorstore 0.1.86) cannot write float6, float8_e4m3, uint2 or uint4.
DTYPES: Final[tuple[tuple[str, bool, str | None, int, str | None, bool], ...]] = (
    ("bool", False, "BOOL", 8, "bool", True),
    ("float4_e2m1fn", True, "F4", 4, "float4_e2m1fn_x2", True),
    ("float6_e2m3fn", True, "F6_E2M3", 6, None, False),
    ("float6_e3m2fn", True, "F6_E3M2", 6, None, False),
    ("uint8", False, "U8", 8, "uint8", True),
    ("int8", False, "I8", 8, "int8", True),
    ("float8_e5m2", True, "F8_E5M2", 8, "float8_e5m2", True),
    ("float8_e4m3fn", True, "F8_E4M3", 8, "float8_e4m3fn", True),
    ("float8_e8m0fnu", True, "F8_E8M0", 8, "float8_e8m0fnu", True),
    ("float8_e4m3fnuz", True, "F8_E4M3FNUZ", 8, "float8_e4m3fnuz", True),
    ("float8_e5m2fnuz", True, "F8_E5M2FNUZ", 8, "float8_e5m2fnuz", True),
    ("int16", False, "I16", 16, "int16", True),
    ("uint16", False, "U16", 16, "uint16", True),
    ("float16", False, "F16", 16, "float16", True),
    ("bfloat16", True, "BF16", 16, "bfloat16", True),
    ("int32", False, "I32", 32, "int32", True),
    ("uint32", False, "U32", 32, "uint32", True),
    ("float32", False, "F32", 32, "float32", True),
    ("complex64", False, "C64", 64, "complex64", True),
    ("float64", False, "F64", 64, "float64", True),
    ("int64", False, "I64", 64, "int64", True),
    ("uint64", False, "U64", 64, "uint64", True),
    # Not in safetensors.
    ("complex128", False, None, 128, "complex128", True),
    ("float8_e3m4", True, None, 8, None, True),
    ("float8_e4m3", True, None, 8, None, False),
    ("float8_e4m3b11fnuz", True, None, 8, None, True),
    ("int2", True, None, 2, None, True),
    ("int4", True, None, 4, None, True),
    ("uint2", True, None, 2, None, False),
    ("uint4", True, None, 4, None, False),
)

#: safetensors code -> element size in bits, in safetensors' alignment order.
SAFETENSORS_BITS: Final = {code: bits for _, _, code, bits, _, _ in DTYPES if code is not None}
#: safetensors code -> numpy name.
SAFETENSORS_NAMES: Final = {code: name for name, _, code, _, _, _ in DTYPES if code is not None}
#: safetensors code -> ``(numpy name, torch name)``: the dtypes :func:`treeclass.save` writes
#: and :func:`treeclass.load` reads (those numpy, JAX and torch all hold).
FILE_DTYPES: Final = {
    code: (name, torch)
    for name, _, code, _, torch, _ in DTYPES
    if code is not None and torch is not None
}
#: The numpy names of the dtypes :mod:`treeclass.orbax` stores (numeric only: no object,
#: string, void, structured or datetime dtype, which could hold Python objects).
ORBAX_DTYPES: Final = frozenset(name for name, _, _, _, _, orbax in DTYPES if orbax)
#: The numpy names of the table's dtypes :mod:`treeclass.orbax` refuses (sorted): orbax's
#: tensorstore cannot write them.
ORBAX_REFUSED: Final = tuple(sorted(name for name, _, _, _, _, orbax in DTYPES if not orbax))
_ML: Final = frozenset(name for name, ml, _, _, _, _ in DTYPES if ml)

_MADE: dict[str, Any] = {}  # name -> numpy dtype, made on first use


def numpy_dtype(name: str) -> Any:
    """The numpy dtype of the table's dtype ``name`` (numpy is imported; ml_dtypes if needed).

    Raises:
        ImportError: the dtype comes from ml_dtypes, which is not installed or lacks it.

    Example:
        >>> from treeclass._io.dtypes import numpy_dtype
        >>> numpy_dtype("bfloat16").itemsize
        2
    """
    dtype = _MADE.get(name)
    if dtype is not None:
        return dtype
    import importlib

    np: Any = importlib.import_module("numpy")
    if name not in _ML:
        dtype = np.dtype(name)
    else:
        ml_dtypes: Any = importlib.import_module("ml_dtypes")
        found = getattr(ml_dtypes, name, None)
        if found is None:
            version = getattr(ml_dtypes, "__version__", "?")
            raise ImportError(f"ml_dtypes {version} has no dtype {name}; upgrade ml_dtypes.")
        dtype = np.dtype(found)
    _MADE[name] = dtype
    return dtype


def torch_dtype(torch: Any, name: str) -> Any:
    """The dtype ``torch.<name>`` of the table's torch name ``name``, from the module ``torch``.

    Raises:
        ImportError: this torch release lacks it (``float4_e2m1fn_x2`` is new in torch 2.8).

    Example:
        >>> import types
        >>> old_torch = types.SimpleNamespace(__version__="2.7.0")  # what it lacks, as a module
        >>> torch_dtype(old_torch, "float4_e2m1fn_x2")
        Traceback (most recent call last):
        ...
        ImportError: torch 2.7.0 has no dtype float4_e2m1fn_x2
    """
    found = getattr(torch, name, None)
    if found is None:
        version = getattr(torch, "__version__", "?")
        raise ImportError(f"torch {version} has no dtype {name}")
    return found


@functools.cache
def max_dims() -> int:
    """The most dimensions a numpy array may have here (``NPY_MAXDIMS``: 32 before numpy 2, 64).

    The one answer for every reader that makes arrays (``tc.load``, :mod:`treeclass.orbax`).
    """
    import importlib

    np: Any = importlib.import_module("numpy")
    try:
        np.empty((0,) * 64)
    except ValueError:
        return 32
    return 64
