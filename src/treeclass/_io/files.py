"""Portable pytree files: :func:`save` and :func:`load` (one safetensors file per tree).

The format is ``docs/files.md``'s. Loading never unpickles and never imports (classes by
registered name, through :func:`treeclass.treespec_loads`); the header
(:mod:`treeclass._io.safetensors`), the structure, the leaf list and the tensors are checked
against each other before the selected leaves' bytes are read. numpy (and ml_dtypes) is
imported only for array leaves; jax and torch only to make their arrays.
"""

from __future__ import annotations

import mmap
import os
import re
import sys
from bisect import bisect_right
from itertools import chain, compress, count, groupby, repeat
from operator import attrgetter, is_, itemgetter, ne, sub
from typing import TYPE_CHECKING

from .._backends.activation import module_installed
from .._core.json import census, loads_checked
from .._core.names import DICT
from .._core.tree import tree_flatten
from .._errors import (
    FileLoadError,
    FileSaveError,
    MissingDependencyError,
    TreeclassError,
    TreeclassTypeError,
    TreespecLoadError,
    UnregisteredNameError,
    install_hint,
    missing_framework,
    qualname,
)
from .._treespec.format import FORMAT_ID, dumps_nodes, loads_spec, spec_to_nodes
from .._treespec.treedoc import child_entries, current_child_entries, leaf_paths, walk
from .dtypes import DTYPES, FILE_DTYPES, max_dims, numpy_dtype, torch_dtype
from .safetensors import EXTENT, MAX_HEADER_BYTES, Header, TensorInfo, read_header, write_file
from .scalars import (
    ScalarDecodeError,
    decode_scalars,
    encode_scalars,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence
    from io import BufferedReader
    from typing import Any, Final, Literal, TypeAlias

    Target: TypeAlias = Literal["numpy", "jax", "torch"]
    PathSelection: TypeAlias = "Collection[str] | Callable[[str], bool] | None"
    _Leaves: TypeAlias = tuple[list[str], list[Any]]  # each leaf's type; value (arrays: None)

__all__ = [
    "ARRAY_LETTERS",
    "FILE_FORMAT",
    "FILE_KEY",
    "FILE_VERSION",
    "LEAF_KINDS",
    "SPEC_KEY",
    "is_ours",
    "load",
    "load_metadata",
    "save",
    "tensor_names",
    "user_metadata",
]

#: The ``"format"`` of the ``"treeclass.file"`` metadata entry.
FILE_FORMAT: Final = "treeclass.file"
#: The version of that entry this release writes (and the only one it reads): see
#: ``docs/files.md``.
FILE_VERSION: Final = 2
#: The metadata keys of the leaf list and of the structure.
FILE_KEY: Final = "treeclass.file"
SPEC_KEY: Final = "treeclass.treespec"
_RESERVED: Final = "treeclass."
_TARGETS: Final = ("numpy", "jax", "torch")
#: The leaf types stored as tensors (each one tensor); the others go into ``"values"``.
_ARRAY_TYPES: Final = frozenset(("numpy", "numpy-scalar", "jax", "torch"))
FILE_KEYS: Final = frozenset(("format", "version", "kinds", "values"))
#: The letter for each leaf type (``"kinds"``: one letter per leaf).
_KIND_LETTERS: Final = {
    "numpy": "n",
    "numpy-scalar": "N",
    "jax": "j",
    "torch": "t",
    "bool": "b",
    "int": "i",
    "float": "f",
    "complex": "c",
    "str": "s",
}
#: The leaf type of each letter of ``"kinds"``.
LEAF_KINDS: Final = {letter: kind for kind, letter in _KIND_LETTERS.items()}
_LETTER_SET: Final = frozenset(LEAF_KINDS)
#: The letters of ``"kinds"`` that stand for array leaves (each one tensor).
ARRAY_LETTERS: Final = frozenset(_KIND_LETTERS[k] for k in _ARRAY_TYPES)
_SCALAR_LETTERS: Final = _LETTER_SET - ARRAY_LETTERS
# A plain safetensors file's "format" metadata (Hugging Face's convention) -> framework.
_PLAIN_FORMATS: Final = {
    "pt": "torch",
    "torch": "torch",
    "np": "numpy",
    "numpy": "numpy",
    "flax": "jax",
    "jax": "jax",
}

_NUMPY_CODES: Final = {np_name: code for code, (np_name, _) in FILE_DTYPES.items()}
_TORCH_CODES: Final = {f"torch.{t_name}": code for code, (_, t_name) in FILE_DTYPES.items()}
_MAX_SHAPE_DIM: Final = (1 << 63) - 1  # numpy and torch sizes are signed 64-bit
_PLAIN_DTYPES: Final = frozenset(FILE_DTYPES) - {"F4"}  # loadable with no further check
_LITTLE: Final = sys.byteorder == "little"
#: safetensors code -> numpy dtype, for the plain dtypes numpy itself has (filled on use).
_PLAIN_NUMPY: dict[str, Any] = {}
_NUMPY_NAMES: Final = frozenset(name for name, ml, *_ in DTYPES if not ml)

_EXTRA_HINT: Final = f"install it with {install_hint('files')}"


# --- optional dependencies --------------------------------------------------------------------


def _module(name: str) -> Any:
    """Import an optional dependency (typed ``Any``: none of them is needed to type-check)."""
    import importlib

    return importlib.import_module(name)


def _numpy() -> Any:
    try:
        return _module("numpy")
    except ImportError as e:
        raise MissingDependencyError(
            f"treeclass.save / treeclass.load need numpy for array leaves; {_EXTRA_HINT}."
        ) from e


# Byte orders written as they are: little-endian, or native on a little-endian machine.
_NATIVE_ORDERS: Final = ("<", "|", "=") if sys.byteorder == "little" else ("<", "|")
_CODES: dict[Any, str | None] = {}  # numpy dtype -> safetensors code (None: none), on first use


def _np_dtype(name: str) -> Any:
    try:
        return numpy_dtype(name)
    except ImportError as e:
        raise MissingDependencyError(
            f"numpy arrays of dtype {name} need the ml_dtypes package ({e}); {_EXTRA_HINT}."
        ) from e


_C_CONTIGUOUS: Final[Callable[[Any], bool]] = attrgetter("flags.c_contiguous")
_DTYPE_OF: Final[Callable[[Any], Any]] = attrgetter("dtype")
_SHAPE_OF: Final[Callable[[Any], tuple[int, ...]]] = attrgetter("shape")


def _code_of(dtype: Any) -> str | None:
    try:
        return _CODES[dtype]
    except KeyError:
        code = None if dtype.fields is not None else _NUMPY_CODES.get(dtype.name)
        _CODES[dtype] = code
        return code


def _framework(name: str) -> Any:
    try:
        return _module("torch" if name == "torch" else "jax.numpy")
    except ImportError as e:
        raise missing_framework(f'treeclass.load(..., to="{name}")', name, e) from e


# --- saving -----------------------------------------------------------------------------------


def _leaf_kind(leaf: Any) -> str | None:
    """``"numpy"``, ``"numpy-scalar"``, ``"jax"``, ``"torch"`` or ``None`` (not an array)."""
    # Only types of modules already imported can be leaves' types. A module another thread is
    # still importing may lack the attribute yet: getattr, never a half-imported module's error.
    kinds = (
        ("numpy", "ndarray", "numpy"),
        ("numpy", "generic", "numpy-scalar"),
        ("torch", "Tensor", "torch"),
        ("jax", "Array", "jax"),
    )
    for module, attribute, kind in kinds:
        t = getattr(sys.modules.get(module), attribute, None)
        if isinstance(t, type) and isinstance(leaf, t):
            return kind
    return None


def _numpy_payload(np: Any, arr: Any, where: str) -> tuple[str, list[int], Any]:
    """``(dtype code, header shape, its bytes as a buffer)`` of a numpy array."""
    if arr.__class__ is np.ndarray and arr.flags.c_contiguous:  # the usual array: as it is
        code = _CODES.get(arr.dtype)
        if code is not None and code != "F4" and arr.dtype.byteorder in _NATIVE_ORDERS:
            direct = arr if arr.dtype.isbuiltin == 1 else arr.reshape(-1).view(np.uint8)
            return code, list(arr.shape), direct
    if isinstance(arr, np.ma.MaskedArray):
        raise TreeclassTypeError(
            f"the leaf at {where} is a numpy masked array, whose mask a safetensors file cannot "
            "hold; save its .data and .mask as two leaves."
        )
    arr = np.asarray(arr)
    code = _code_of(arr.dtype)
    if code is None:
        raise TreeclassTypeError(
            f"the leaf at {where} is an array of dtype {arr.dtype}, which safetensors cannot "
            f"hold; it holds {', '.join(sorted(_NUMPY_CODES))}. Convert it first."
        )
    shape = list(arr.shape)
    order = arr.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        arr = arr.byteswap()  # safetensors is little-endian; only the bytes are used below
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    if code == "F4":
        if not shape or shape[-1] % 2:
            raise FileSaveError(
                f"the leaf at {where} is a float4_e2m1fn array of shape {tuple(shape)}; "
                "safetensors packs two float4 values a byte along the last axis, so the last "
                "dimension must be even."
            )
        flat = flat[0::2] | (flat[1::2] << 4)  # element 2i in the low nibble (as torch packs)
    return code, shape, flat


def _payload(np: Any, kind: str, leaf: Any, where: str) -> tuple[str, Sequence[int], Any]:
    """``(dtype code, header shape, its bytes as a buffer)`` of an array leaf of ``kind``."""
    if kind == "torch":
        return _torch_payload(leaf, where)
    if kind == "jax":
        try:
            host = np.asarray(leaf)
        except Exception as e:
            raise TreeclassTypeError(
                f"the JAX array at {where} could not be copied to the host ({e}); save "
                "concrete arrays, not traced values."
            ) from e
        return _numpy_payload(np, host, where)
    return _numpy_payload(np, leaf, where)


def _usual_numpy_tensors(
    np: Any, names: list[str], arrays: list[Any], kinds: list[str]
) -> list[tuple[str, str, Sequence[int], Any]] | None:
    """``(name, code, shape, data)`` of each array, when all are usual numpy arrays; else None.

    Usual: what :func:`_numpy_payload` writes as it is (its first branch, checked in bulk).
    """
    if not arrays or set(kinds) != {"numpy"} or set(map(type, arrays)) != {np.ndarray}:
        return None
    if not all(map(_C_CONTIGUOUS, arrays)):
        return None
    codes: dict[Any, str] = {}
    for dtype in set(map(_DTYPE_OF, arrays)):
        code = _code_of(dtype)
        if code is None or code == "F4" or dtype.isbuiltin != 1:
            return None
        if dtype.byteorder not in _NATIVE_ORDERS:
            return None
        codes[dtype] = code
    dtype_codes = map(codes.__getitem__, map(_DTYPE_OF, arrays))
    return list(zip(names, dtype_codes, map(_SHAPE_OF, arrays), arrays))


def _torch_payload(leaf: Any, where: str) -> tuple[str, list[int], Any]:
    torch = _module("torch")
    t = leaf.detach()
    if t.layout is not torch.strided:
        raise TreeclassTypeError(
            f"the leaf at {where} is a {t.layout} tensor; safetensors holds dense tensors only. "
            "Save t.to_dense() instead."
        )
    if t.device.type == "meta":
        raise TreeclassTypeError(
            f"the leaf at {where} is a tensor on the meta device, which has no data to save."
        )
    code = _TORCH_CODES.get(str(t.dtype))
    if code is None:
        raise TreeclassTypeError(
            f"the leaf at {where} is a tensor of dtype {t.dtype}, which safetensors cannot hold; "
            "convert it first."
        )
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.cpu().contiguous()
    shape = list(t.shape)
    if code == "F4":
        if not shape:
            raise FileSaveError(
                f"the leaf at {where} is a 0-d float4_e2m1fn_x2 tensor, which has no shape in "
                "safetensors (two values a byte along the last axis); give it one axis."
            )
        shape[-1] *= 2  # safetensors records the logical (unpacked) shape
    return code, shape, t.reshape(-1).view(torch.uint8).numpy()


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) and not hasattr(metadata, "items"):
        raise TreeclassTypeError(
            f"metadata= must be a dict of str to str, got {type(metadata).__name__}."
        )
    out: dict[str, str] = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TreeclassTypeError(
                f"metadata= must map str to str (as safetensors requires), got the item "
                f"{k!r:.60}: {v!r:.60}; convert values with str() or json.dumps()."
            )
        if k.startswith(_RESERVED):
            raise FileSaveError(
                f"the metadata key {k!r:.80} starts with {_RESERVED!r}, which treeclass "
                "reserves for its own entries; use another key."
            )
        out[k] = v
    return out


def tensor_names(paths: Sequence[str]) -> list[str]:
    """The array leaves' tensor names, given their key paths in leaf order.

    The key path, or ``path#2``, ``path#3``... when it is taken already (by an earlier leaf).
    """
    if len(set(paths)) == len(paths):
        return list(paths)
    used: set[str] = set()
    following: dict[str, int] = {}
    out: list[str] = []
    for p in paths:
        name = p
        if name in used:
            n = following.get(p, 2)
            while f"{p}#{n}" in used:
                n += 1
            following[p] = n + 1
            name = f"{p}#{n}"
        used.add(name)
        out.append(name)
    return out


def save(
    path: str | os.PathLike[str], tree: Any, *, metadata: Mapping[str, str] | None = None
) -> None:
    """Save ``tree`` -- its arrays, Python scalars and structure -- to one safetensors file.

    Each array leaf (numpy, JAX or torch; any dtype safetensors holds, bfloat16 and the
    float8 / float4 types included) becomes one tensor named by the leaf's key path
    (``.encoder.weight``, ``['step']``); the structure (as :func:`treespec_dumps` writes it)
    and the ``bool`` / ``int`` / ``float`` / ``complex`` / ``str`` leaves go into the header's
    metadata, exactly (ints of up to 4,300 digits; floats with ``-0.0``, ``inf`` and ``nan``).
    The file loads with :func:`load` in any process where the classes' names are registered,
    and with any safetensors reader as a flat dict of tensors. It is written to a temporary
    file first and renamed over ``path`` once complete.

    Args:
        path: the file to write (conventionally ``*.safetensors``).
        tree: the tree; every class in it needs a registered ``name=``.
        metadata: your own ``str -> str`` entries for the header (keys starting with
            ``"treeclass."`` are reserved); read them back with :func:`load_metadata`.

    Raises:
        UnnamedClassError: a class in the tree has no registered name.
        UnserializableStaticError: a static value has no JSON form.
        TreeclassTypeError: a leaf is neither an array nor a ``bool`` / ``int`` / ``float`` /
            ``complex`` / ``str`` (``None`` is never a leaf: it is kept in the structure), an
            int of more than 4,300 digits, or an array of a dtype safetensors cannot hold;
            ``metadata`` is not ``str -> str``.
        FileSaveError: a reserved metadata key, a key path that is not valid Unicode, a
            float4 array with an odd last axis, or a header larger than safetensors reads.
        MissingDependencyError: numpy is not installed and the tree has array leaves.

    Example:
        >>> import numpy as np, treeclass as tc
        >>> @tc.pytree_dataclass(name="docs.files.Output")
        ... class Output:
        ...     logits: np.ndarray
        ...     loss: float | None = None
        ...     step: int = 0
        >>> tc.save(tmp / "out.safetensors", Output(np.ones((2, 3), np.float32), step=7))
        >>> tc.load(tmp / "out.safetensors")
        Output(logits=array([[1., 1., 1.],
               [1., 1., 1.]], dtype=float32), loss=None, step=7)

    .. versionadded:: 0.1.0
    """
    user = _check_metadata(metadata)
    flat, spec = tree_flatten(tree)
    nodes = spec_to_nodes(spec)
    document = dumps_nodes(nodes)
    # The key paths (what keystr gives for each leaf) as tc.load computes them, from the
    # document's nodes: only when needed (tensor names, messages), all at once.
    key_paths: list[str] = []

    def path_of(i: int) -> str:
        if not key_paths and flat:
            try:
                found = leaf_paths(nodes, child_entries(nodes))
            except (ValueError, TreeclassError) as e:
                raise FileSaveError(
                    f"a key of the tree cannot be written as text ({e}); use simpler dict keys."
                ) from None
            key_paths.extend(found)
        return key_paths[i]

    # The leaf list: one kind letter per leaf, the scalars' values in one JSON array.
    encoded = encode_scalars(flat, path_of)
    values = [s[1] for s in encoded if s is not None]  # canonical JSON texts of the scalars
    if len(values) == len(encoded):  # scalars only: every leaf in one go
        at: list[int] = []
        tags: list[Any] = [s[0] for s in encoded if s is not None]  # (always)
    else:
        at = list(compress(count(), map(is_, encoded, repeat(None))))  # the other leaves
        tags = [None if s is None else s[0] for s in encoded]  # (arrays: below)
    arrays = list(map(flat.__getitem__, at))
    classes: dict[type, Any] = dict(zip(map(type, arrays), arrays))  # a leaf of each class
    seen: dict[type, Any] = {cls: _leaf_kind(leaf) for cls, leaf in classes.items()}
    if None in seen.values():
        i = next(i for i in at if seen[type(flat[i])] is None)
        raise TreeclassTypeError(
            f"the leaf at {path_of(i) or 'the root'} is a {qualname(flat[i].__class__)}; "
            "treeclass.save stores numpy, JAX and torch arrays and Python bool, int, float, "
            "complex and str leaves. If it is an object holding arrays (a model, an "
            "equinox.Module), register its class with a name (tc.register_dataclass(cls, "
            "name=...)) so that it is structure, not a leaf; convert any other value to one of "
            "those leaves, or keep it out of the tree."
        )
    array_kinds: list[str] = list(map(seen.__getitem__, map(type, arrays)))
    for i, kind in zip(at, array_kinds):
        tags[i] = kind
    kinds = "".join(map(_KIND_LETTERS.__getitem__, tags))
    if at:
        path_of(0)  # (every leaf's key path, at once)
    names = tensor_names(list(map(key_paths.__getitem__, at)))
    np: Any = _numpy() if arrays else None
    tensors = _usual_numpy_tensors(np, names, arrays, array_kinds)
    if tensors is None:
        tensors = [
            (name, *_payload(np, kind, leaf, key_paths[i] or "the root"))
            for name, i, kind, leaf in zip(names, at, array_kinds, arrays)
        ]

    # Canonical JSON (sorted keys, compact, ASCII), written directly.
    ours = (
        f'{{"format":"{FILE_FORMAT}","kinds":"{kinds}",'
        f'"values":[{",".join(values)}],"version":{FILE_VERSION}}}'
    )

    write_file(path, tensors, {**user, FILE_KEY: ours, SPEC_KEY: document})


# --- loading ----------------------------------------------------------------------------------


#: The first bytes of a zip archive (a torch.export ``.pt2`` archive, a ``torch.save`` file).
ZIP_MAGIC: Final = b"PK\x03\x04"
#: The first bytes of MLIR bytecode, which every ``jax.export`` blob holds (its module).
_MLIR_MAGIC: Final = b"ML\xefR"
#: The start of a treespec document as treespec_dumps writes it (its first member, by key order).
_TREESPEC_START: Final = re.compile(
    rb'\s*\{\s*"format"\s*:\s*' + re.escape(f'"{FORMAT_ID}"'.encode())
)


def _read_header(f: BufferedReader, path: str | os.PathLike[str], source: str) -> Header:
    """:func:`read_header`, whose error names the loader of a file of another kind."""
    try:
        return read_header(f, source)
    except FileLoadError:
        other = _other_kind(f, str(path), source)
        if other is None:
            raise
        raise other from None


def _other_kind(f: BufferedReader, path: str, source: str) -> FileLoadError | None:
    """The error of a file that is not safetensors at all, saying what reads it (else ``None``).

    Recognised by its first bytes (a treespec document by its leading ``"format"`` member, as
    treespec_dumps writes it), a ``jax.export`` blob by the MLIR bytecode it holds, searched in
    place (``mmap``: no copy; files past ``MAX_HEADER_BYTES`` and pipes are not searched);
    ``treeclass inspect`` reads each kind fully.
    """
    if not f.seekable():
        return None
    f.seek(0)
    head = f.read(64)
    if head[8:9] == b"{":  # a safetensors file, however broken: its own error says what
        return None
    if head.startswith(ZIP_MAGIC):
        if path.lower().endswith(".pt2"):
            kind = "torch.export archive (.pt2)"
            loader = "treeclass.torch.load (or torch.export.load)"
        else:
            kind = "zip archive"
            loader = "torch.load (a torch.save file) or treeclass.torch.load (a .pt2 archive)"
    elif _TREESPEC_START.match(head):
        kind, loader = "treespec document", "treeclass.treespec_loads"
    else:
        size = os.fstat(f.fileno()).st_size
        if not 4 < size <= MAX_HEADER_BYTES or int.from_bytes(head[:4], "little") >= size:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data.find(_MLIR_MAGIC) < 0:
                return None
        kind, loader = "jax.export blob", "jax.export.deserialize"
    return FileLoadError(
        f"{source} is a {kind}, not a safetensors file (what treeclass.save writes): load it "
        f"with {loader}."
    )


def _check_options(to: object, paths: object, mmap: object = False) -> None:
    if mmap is not True and mmap is not False:
        raise TreeclassTypeError(f"mmap= must be True or False, got {mmap!r:.60}.")
    if to is not None and to not in _TARGETS:
        raise FileLoadError(f'to= must be "numpy", "jax", "torch" or None, got {to!r:.60}.')
    if isinstance(paths, (str, bytes)):
        raise TreeclassTypeError(
            f"paths= takes a collection of key-path strings or a predicate, got the string "
            f"{paths!r:.80}; write paths=[{paths!r:.80}]."
        )
    if paths is not None and not callable(paths):
        try:
            bad = [p for p in paths if not isinstance(p, str)]  # type: ignore[attr-defined]
        except TypeError:
            raise TreeclassTypeError(
                f"paths= takes a collection of key-path strings or a predicate, got "
                f"{type(paths).__name__}."
            ) from None
        if bad:
            raise TreeclassTypeError(
                f"paths= must hold key-path strings (as treeclass.keystr writes them), got "
                f"{bad[0]!r:.60}."
            )


def _bad(source: str, message: str) -> FileLoadError:
    return FileLoadError(f"{source} is not a loadable treeclass file: {message}")


def is_ours(metadata: dict[str, str]) -> bool:
    """Whether a safetensors file's metadata has treeclass's entries (a file of :func:`save`)."""
    return any(k.startswith(_RESERVED) for k in metadata)


def user_metadata(metadata: dict[str, str]) -> dict[str, str]:
    """A safetensors file's metadata without treeclass's entries."""
    return {k: v for k, v in metadata.items() if not k.startswith(_RESERVED)}


def _parse_ours(source: str, metadata: dict[str, str]) -> tuple[_Leaves, str]:
    """The checked leaf list (types; values, ``None`` for arrays) and the treespec text."""
    extra = sorted(k for k in metadata if k.startswith(_RESERVED) and k not in (FILE_KEY, SPEC_KEY))
    if extra or FILE_KEY not in metadata or SPEC_KEY not in metadata:
        found = sorted(k for k in metadata if k.startswith(_RESERVED))
        raise _bad(
            source,
            f"its metadata has the treeclass entries {found!r:.200}; a treeclass file has "
            f"exactly {FILE_KEY!r} and {SPEC_KEY!r} (a newer treeclass may write more: "
            "upgrade treeclass if this file came from one).",
        )
    text = metadata[FILE_KEY]
    leaves = loads_checked(
        text,
        lambda doc: _check_leaf_list(source, doc),
        lambda e: _bad(source, f"its {FILE_KEY!r} entry is not valid JSON ({e!s:.200})."),
    )
    return leaves, metadata[SPEC_KEY]


def _check_leaf_list(source: str, doc: Any) -> tuple[_Leaves, int, int]:
    """The checked leaves of a parsed ``"treeclass.file"`` entry, with its census."""
    if doc.__class__ is not dict or doc.get("format") != FILE_FORMAT:
        raise _bad(
            source, f'its {FILE_KEY!r} entry is not an object with "format": {FILE_FORMAT!r}.'
        )
    version = doc.get("version")
    if version.__class__ is not int or version != FILE_VERSION:
        raise FileLoadError(
            f"{source} was written in treeclass file version {version!r:.40}; this release "
            f"reads version {FILE_VERSION}. Upgrade treeclass to load it."
        )
    if frozenset(doc) != FILE_KEYS:
        raise _bad(source, f"its {FILE_KEY!r} entry has the keys {sorted(doc)!r:.200}.")
    kinds = doc["kinds"]
    values = doc["values"]
    if kinds.__class__ is not str:
        raise _bad(source, '"kinds" is not a string.')
    if values.__class__ is not list:
        raise _bad(source, '"values" is not a list.')
    letters = set(kinds)
    if not letters <= _LETTER_SET:
        bad = next(c for c in kinds if c not in LEAF_KINDS)
        raise _bad(
            source,
            f'leaf {kinds.index(bad)} has the unknown kind {bad!r:.20} (in "kinds": one of '
            f"{''.join(LEAF_KINDS)!r} per leaf).",
        )
    types = list(map(LEAF_KINDS.__getitem__, kinds))
    at: list[int] = []  # the scalar leaves
    if not letters <= ARRAY_LETTERS:
        at = list(compress(count(), map(_SCALAR_LETTERS.__contains__, kinds)))
    if len(at) != len(values):
        raise _bad(
            source,
            f'"kinds" has {len(at)} Python scalar leaves but "values" has {len(values)} values.',
        )
    only = len(at) == len(kinds)  # scalars only
    try:
        out = decode_scalars(types if only else [types[i] for i in at], values)
    except ScalarDecodeError as e:
        i = at[e.index]
        raise _bad(source, f"leaf {i} is typed {types[i]!r}, but {e}.") from None
    if not only:
        decoded, out = out, [None] * len(kinds)
        for i, v in zip(at, decoded):
            out[i] = v
    members = len(doc)
    colons = "".join([v for v in values if v.__class__ is str]).count(":")
    for v in values:
        if v.__class__ is list or v.__class__ is dict:  # complex; (bad values fail above)
            m, c = census(v)
            members += m
            colons += c
    return (types, out), members, colons


def _target_of(kind: str, to: Target | None) -> str:
    if to is not None:
        return to
    if kind in ("numpy", "numpy-scalar"):
        return "numpy"
    return kind if module_installed(kind) else "numpy"


def _check_loadable(source: str, info: TensorInfo, target: str) -> None:
    if info.dtype not in FILE_DTYPES:
        raise FileLoadError(
            f"tensor {info.name!r:.200} of {source} has dtype {info.dtype}, which neither numpy "
            "(ml_dtypes), JAX nor torch can hold; it cannot be loaded."
        )
    if any(d > _MAX_SHAPE_DIM for d in info.shape):
        raise _bad(source, f"tensor {info.name!r:.200} has a dimension larger than 2**63 - 1.")
    if info.dtype == "F4" and target == "torch" and (not info.shape or info.shape[-1] % 2):
        raise FileLoadError(
            f"tensor {info.name!r:.200} of {source} is float4 with shape {list(info.shape)}; "
            "torch's float4_e2m1fn_x2 packs two values a byte along the last axis, so it needs "
            'an even last dimension. Load it with to="numpy" or to="jax".'
        )


def _unallocatable(source: str, info: TensorInfo, e: Exception) -> FileLoadError:
    return _bad(source, f"tensor {info.name!r:.200} cannot be allocated ({e}).")


def _read_exact(f: BufferedReader, offset: int, buf: Any, source: str) -> None:
    view = memoryview(buf).cast("B")
    f.seek(offset)
    got = 0
    total = view.nbytes
    while got < total:
        n = f.readinto(view[got:])
        if not n:
            raise _bad(source, "the file ended early (it changed while it was being read).")
        got += n


#: Tensors up to this size are read in runs (one read for many): loaded to numpy, views of
#: their run (each run its own buffer, shared by its arrays only); else copied out of it.
#: Larger ones are read straight into their arrays.
_SMALL: Final = 64 * 1024
#: The largest run: the most memory one small numpy array can keep alive (its run's).
_RUN: Final = 1024 * 1024
_NAME: Final[Callable[[TensorInfo], str]] = itemgetter(0)
_BEGIN: Final = itemgetter(3)
_END: Final = itemgetter(4)
_DTYPE: Final = itemgetter(1)
_INFO: Final = itemgetter(0)  # of a wanted tensor, (info, target)
_TARGET: Final = itemgetter(1)
_SHAPE: Final = itemgetter(2)
_CODE_SHAPE: Final = itemgetter(1, 2)  # a TensorInfo's dtype code and shape


class _Reader:
    """Reads a file's tensors into arrays: one per load (numpy and dtypes looked up once)."""

    __slots__ = ("f", "header", "map", "np", "source", "torch")

    def __init__(self, f: BufferedReader, header: Header, source: str, mmap: bool) -> None:
        self.f = f
        self.header = header
        self.source = source
        self.np = _numpy()
        if not _PLAIN_NUMPY:
            _PLAIN_NUMPY.update(
                (code, self.np.dtype(np_name))
                for code, (np_name, _) in FILE_DTYPES.items()
                if code in _PLAIN_DTYPES and np_name in _NUMPY_NAMES
            )
        self.torch: Any = None
        self.map: Any = None  # the file's bytes (np.uint8, copy-on-write) when mmap=True
        if mmap:
            import mmap as mmap_module

            try:
                mapped = mmap_module.mmap(f.fileno(), 0, access=mmap_module.ACCESS_COPY)
            except (OSError, ValueError) as e:
                raise _bad(source, f"it cannot be memory-mapped ({e}).") from None
            if len(mapped) < header.file_size:
                raise _bad(source, "the file shrank while it was being read.")
            self.map = self.np.frombuffer(mapped, self.np.uint8)

    def read(self, wanted: list[tuple[TensorInfo, str]]) -> list[Any]:
        """``wanted``'s tensors (``(info, target)``) as arrays, in order, made in order.

        Small tensors' bytes are read first, in runs in file order; the arrays are then made
        in ``wanted``'s order (so warnings come in leaf order).
        """
        start = self.header.data_start
        raws: dict[str, Any] = {}  # name -> its bytes (np.uint8), or its plain numpy array
        if self.map is not None:
            for info, _ in wanted:
                raws[info.name] = self.map[start + info.begin : start + info.end]
        else:
            every = self.header.tensors.values()  # in file order
            sizes = map(sub, map(_END, every), map(_BEGIN, every))
            if len(wanted) == len(every) and max(sizes) <= _SMALL:
                small = list(every)  # (the usual file of small tensors, all loaded)
            else:
                small = sorted([info for info, _ in wanted if info.end - info.begin <= _SMALL],
                               key=EXTENT)  # fmt: skip
            self._read_small(small, raws)
        typed = self.map is None and _LITTLE  # raws of plain dtypes are their arrays
        if typed and len(raws) == len(wanted):  # all small; plain numpy ones are made already
            infos = list(map(_INFO, wanted))
            targets = set(map(_TARGET, wanted))
            if targets == {"numpy"} and set(map(_DTYPE, infos)) <= _PLAIN_NUMPY.keys():
                return list(map(raws.__getitem__, map(_NAME, infos)))
        out: list[Any] = []
        append = out.append
        make = self._make
        for info, target in wanted:  # a loop, not a comprehension: warnings' stacklevel
            raw = raws.get(info.name)
            if raw is not None and typed and info.dtype in _PLAIN_NUMPY:
                if target == "numpy":
                    append(raw)
                    continue
                raw = raw.reshape(-1).view(self.np.uint8).copy()  # (torch's own storage)
            append(make(info, target, raw))
        return out

    def _read_small(self, small: list[TensorInfo], raws: dict[str, Any]) -> None:
        """Read the bytes of ``small`` (sorted by place) in runs (:meth:`_read_run`)."""
        np = self.np
        uint8 = np.uint8
        begins = list(map(_BEGIN, small))
        ends = list(map(_END, small))
        # Where a tensor does not start where the one before it ends (found at C speed).
        gaps = [*compress(count(1), map(ne, begins[1:], ends)), len(small)]
        i = 0
        for gap in gaps:
            while i < gap:  # a run: next to each other, at most _RUN bytes (or one tensor)
                base = begins[i]
                j = max(i + 1, bisect_right(ends, base + _RUN, i, gap))
                self._read_run(small[i:j], np.empty(ends[j - 1] - base, uint8), raws)
                i = j

    def _read_run(self, run: list[TensorInfo], scratch: Any, raws: dict[str, Any]) -> None:
        """Read ``run`` (tensors next to each other) into ``scratch``, then split it up.

        On a little-endian machine a tensor of a dtype numpy has (:data:`_PLAIN_NUMPY`) at an
        offset aligned for it becomes its numpy array at once, a view of ``scratch`` (the
        tensors of one dtype and shape next to each other are the rows of one array, split at
        C speed); any other tensor's bytes are copied out as ``np.uint8``.
        """
        base = run[0].begin
        _read_exact(self.f, self.header.data_start + base, scratch, self.source)
        for (code, shape), group in groupby(run, _CODE_SHAPE):
            same = list(group)
            dtype = _PLAIN_NUMPY.get(code) if _LITTLE else None
            at = same[0].begin - base
            try:  # (a shape numpy cannot hold: too many dimensions, too big even if empty)
                if dtype is not None and at % dtype.alignment == 0:  # (then every one of same)
                    # The rows of one array (not of a 1-d array: they would be scalars).
                    if 0 < len(shape) < max_dims() and len(same) > 1:
                        rows = scratch[at : same[-1].end - base].view(dtype)
                        raws.update(zip(map(_NAME, same), rows.reshape((len(same), *shape))))
                        continue
                    for info in same:
                        raw = scratch[info.begin - base : info.end - base]
                        raws[info.name] = raw.view(dtype).reshape(shape)
                    continue
                for info in same:
                    raw = scratch[info.begin - base : info.end - base].copy()
                    raws[info.name] = raw if dtype is None else raw.view(dtype).reshape(shape)
            except ValueError as e:
                raise _unallocatable(self.source, same[0], e) from None

    def _fill(self, buf: Any, info: TensorInfo, raw: Any) -> None:
        """Put the bytes of ``info`` into ``buf``: ``raw`` if given, else read from the file."""
        if raw is None:
            _read_exact(self.f, self.header.data_start + info.begin, buf, self.source)
        else:
            buf[:] = raw

    def _make(self, info: TensorInfo, target: str, raw: Any) -> Any:
        """The tensor ``info`` as a ``target`` array: of ``raw`` (its bytes) if given, else read."""
        np = self.np
        source = self.source
        np_name, torch_name = FILE_DTYPES[info.dtype]
        if target == "torch":
            torch = self.torch
            if torch is None:
                torch = self.torch = _framework("torch")
            try:
                dtype = torch_dtype(torch, torch_name)
            except ImportError as e:
                raise MissingDependencyError(
                    f"tensor {info.name!r:.200} of {source} has dtype {info.dtype}, which needs "
                    f"a newer torch ({e}); upgrade it with {install_hint('torch')}."
                ) from e
            shape = list(info.shape)
            if info.dtype == "F4":
                shape[-1] //= 2
            aligned = (self.header.data_start + info.begin) % dtype.itemsize == 0
            if raw is not None and aligned and info.nbytes and sys.byteorder == "little":
                return torch.from_numpy(raw).view(dtype).reshape(shape)
            try:
                t = torch.empty(shape, dtype=dtype)
            except (RuntimeError, ValueError, OverflowError) as e:
                raise _unallocatable(source, info, e) from None
            if info.nbytes:
                self._fill(t.reshape(-1).view(torch.uint8).numpy(), info, raw)
            if sys.byteorder == "big":  # pragma: no cover - no big-endian machine in CI
                t = torch.from_numpy(t.numpy().byteswap())
            return t
        dtype = _np_dtype(np_name)
        try:
            if info.dtype == "F4":
                packed = raw
                if packed is None:
                    self._fill(packed := np.empty(info.nbytes, np.uint8), info, None)
                codes = np.empty(info.nbytes * 2, np.uint8)
                codes[0::2] = packed & 0x0F
                codes[1::2] = packed >> 4
                arr = codes.view(dtype).reshape(info.shape)
            elif raw is not None and (
                self.map is None or (self.header.data_start + info.begin) % dtype.alignment == 0
            ):  # a copy's memory is aligned; the map's page-aligned
                arr = raw.view(dtype).reshape(info.shape)
            else:
                arr = np.empty(info.shape, dtype)
                if arr.nbytes:
                    self._fill(arr.reshape(-1).view(np.uint8), info, raw)
        except (ValueError, OverflowError) as e:
            raise _unallocatable(source, info, e) from None
        if sys.byteorder == "big" and arr.dtype.itemsize > 1:  # pragma: no cover
            arr = arr.byteswap()
        if target == "jax":
            return _to_jax(np, arr, info, source)
        return arr


def _to_jax(np: Any, arr: Any, info: TensorInfo, source: str) -> Any:
    """A JAX array of ``arr``, saying so when JAX (without x64) narrows a 64-bit dtype."""
    jnp = _framework("jax")
    kind = arr.dtype.kind
    if arr.dtype.itemsize == 8 and kind in "iuf" and not _module("jax").config.jax_enable_x64:
        narrow = np.dtype(f"{kind}4")
        if kind in "iu" and arr.size:
            limits = np.iinfo(narrow)
            if arr.min() < limits.min or arr.max() > limits.max:
                raise FileLoadError(
                    f"tensor {info.name!r:.200} of {source} is {arr.dtype} with values outside "
                    f"{narrow}, and JAX holds 64-bit integers only with jax_enable_x64; enable it "
                    '(jax.config.update("jax_enable_x64", True)) or load with to="numpy".'
                )
        import warnings

        warnings.warn(
            f"tensor {info.name!r:.200} of {source} is {arr.dtype}; JAX without "
            f"jax_enable_x64 holds it as {narrow} (enable jax_enable_x64 to keep 64 bits).",
            UserWarning,
            stacklevel=6,  # tc.load's caller: _make, read, _load_tree / _load_plain, load
        )
        arr = arr.astype(narrow)
    try:
        return jnp.asarray(arr)
    except TypeError as e:  # a dtype this jax does not hold (float4 / float8_e8m0 before 0.6)
        raise FileLoadError(
            f"tensor {info.name!r:.200} of {source} is {arr.dtype}, which the installed jax "
            f"{_module('jax').__version__} cannot hold ({e}); upgrade jax "
            '(pip install -U jax jaxlib) or load with to="numpy".'
        ) from None


def _load_plain(
    f: BufferedReader,
    header: Header,
    source: str,
    to: Target | None,
    paths: PathSelection,
    mmap: bool,
) -> dict[str, Any]:
    """A file without treeclass metadata: a dict of arrays keyed by tensor name."""
    target = to or _PLAIN_FORMATS.get(header.metadata.get("format", ""), "numpy")
    if target != "numpy" and to is None and not module_installed(target):
        target = "numpy"
    names = sorted(header.tensors)
    for name in names:
        _check_loadable(source, header.tensors[name], target)
    chosen = [True] * len(names)
    if paths is not None:  # selected as the leaves of the tree {name: tensor} are
        nodes: list[Any] = [(DICT, names, len(names)), *[None] * len(names)]
        entries = child_entries(nodes)
        chosen = _select(source, nodes, entries, leaf_paths(nodes, entries), paths)
    wanted = [(header.tensors[name], target) for name, keep in zip(names, chosen) if keep]
    arrays = _Reader(f, header, source, mmap).read(wanted) if wanted else []
    got = {info.name: arr for (info, _), arr in zip(wanted, arrays)}
    return {name: got.get(name) for name in names}


def _load_tree(
    f: BufferedReader,
    header: Header,
    source: str,
    to: Target | None,
    paths: PathSelection,
    mmap: bool,
) -> Any:
    leaves, document = _parse_ours(source, header.metadata)
    try:
        nodes, spec = loads_spec(document)
    except UnregisteredNameError as e:
        raise UnregisteredNameError(f"{source}: {e}") from None
    except TreespecLoadError as e:
        raise _bad(source, f"its structure ({SPEC_KEY!r}) does not load: {e}") from None
    types, values = leaves  # (the arrays go into values once read)
    if len(types) != spec.num_leaves:
        raise _bad(
            source,
            f"its structure has {spec.num_leaves} leaves but its leaf list has {len(types)}.",
        )
    children = child_entries(nodes)  # (the document loaded: its keys decode)
    chosen: list[bool] | None = None  # None: every leaf
    at = list(compress(count(), map(_ARRAY_TYPES.__contains__, types)))  # the array leaves
    # The key paths are the structure's (needed with arrays or paths=).
    key_paths = leaf_paths(nodes, children) if at or paths is not None else []
    if paths is not None:
        chosen = _select(source, nodes, children, key_paths, paths)
    # Tensor names are the array leaves' key paths, made unique.
    names = tensor_names(list(map(key_paths.__getitem__, at)))
    tensors = header.tensors
    kinds = list(map(types.__getitem__, at))
    targets = {kind: _target_of(kind, to) for kind in set(kinds)}  # type -> target
    infos: list[Any] = list(map(tensors.get, names))
    if (
        None in infos
        or "numpy-scalar" in targets
        or not set(map(_DTYPE, infos)) <= _PLAIN_DTYPES
        or any(map(_MAX_SHAPE_DIM.__lt__, chain.from_iterable(map(_SHAPE, infos))))
    ):  # anything unusual: checked one leaf at a time, for the message
        for i, name, info in zip(at, names, infos):
            _check_array_leaf(source, key_paths[i], name, info, types[i], targets[types[i]])
    if chosen is None:
        wanted = list(zip(infos, map(targets.__getitem__, kinds)))
        slots = at  # the leaf index of each wanted tensor
    else:
        wanted = [(info, targets[types[i]]) for i, info in zip(at, infos) if chosen[i]]
        slots = [i for i in at if chosen[i]]
    if len(names) != len(tensors):
        extra = sorted(set(tensors) - set(names))
        raise _bad(
            source,
            f"it holds {len(tensors)} tensors but its structure has "
            f"{len(names)} array leaves (not in the structure: {extra[:5]!r:.200}).",
        )
    if wanted:
        arrays = _Reader(f, header, source, mmap).read(wanted)
        if "numpy-scalar" in targets:
            for i, (_, target), arr in zip(slots, wanted, arrays):
                scalar = target == "numpy" and types[i] == "numpy-scalar"
                values[i] = arr[()] if scalar else arr
        else:
            for i, arr in zip(slots, arrays):
                values[i] = arr
    if chosen is not None:
        values = [v if keep else None for v, keep in zip(values, chosen)]
    return spec.unflatten(values)


def _check_array_leaf(
    source: str, where: str, name: str, info: TensorInfo | None, kind: str, target: str
) -> None:
    """That the array leaf at ``where`` has its tensor ``name``, and that it loads."""
    if info is None:
        raise _bad(source, f"the leaf at {where!r:.200} has no tensor {name!r:.200}.")
    if kind == "numpy-scalar" and info.shape:
        raise _bad(source, f"the numpy scalar at {where!r:.200} has the shape {list(info.shape)}.")
    _check_loadable(source, info, target)


def _select(
    source: str,
    nodes: list[Any],
    children: list[list[str] | None],
    key_paths: list[str],
    paths: Collection[str] | Callable[[str], bool],
) -> list[bool]:
    """Which leaves ``paths=`` selects: a node's path selects every leaf under it."""
    # Key paths are as the document writes them; paths= selects by the names fields
    # have today (a renamed field's aliases, a migrate hook), where those differ.
    current = current_child_entries(nodes, children)
    if current is not None:
        key_paths = leaf_paths(nodes, current)
        children = current
    if callable(paths):
        return [bool(paths(p)) for p in key_paths]
    wanted = frozenset(paths)
    lengths = frozenset(map(len, wanted))  # (most nodes' paths are not joined at all)
    matched: set[str] = set()
    selecting: int | None = None  # the depth of the selected node being walked
    chosen: list[bool] = []
    for i, parts, length in walk(nodes, children):
        if selecting is not None and len(parts) <= selecting:
            selecting = None
        if selecting is None and length in lengths and (text := "".join(parts)) in wanted:
            selecting = len(parts)
            matched.add(text)
        if nodes[i] is None:
            chosen.append(selecting is not None)
    if wanted - matched:
        missing = ", ".join(repr(p) for p in sorted(wanted - matched)[:5])
        sample = ", ".join(repr(p) for p in key_paths[:5])
        raise FileLoadError(
            f"paths= names {missing}, which is not the key path of any node in {source}; key "
            f"paths look like {sample} (as treeclass.keystr writes them; a node's path selects "
            "all the leaves under it)."
        )
    return chosen


def load(
    path: str | os.PathLike[str],
    *,
    to: Target | None = None,
    paths: PathSelection = None,
    mmap: bool = False,
) -> Any:
    """Load a tree saved by :func:`save`, in its own classes; never unpickles or imports.

    Classes are found by their registered names (import the modules that define them
    first). A safetensors file written by anything else (a flat ``dict`` of tensors) loads
    as a ``dict`` of arrays keyed by tensor name.

    Args:
        path: the file.
        to: the array type of the array leaves: ``"numpy"``, ``"jax"``, ``"torch"``, or
            ``None`` for what each leaf was saved as (numpy where that framework is not
            installed; for a plain safetensors file, its ``"format"`` metadata ``"pt"`` /
            ``"np"`` / ``"flax"``). Python scalar leaves stay Python scalars.
        paths: load only some leaves: key-path strings as :func:`keystr` writes them (a
            node's path selects every leaf under it; an unknown path is an error), or a
            predicate called with each leaf's key-path string. Only the selected leaves'
            bytes are read; the others come back as ``None``, in the same classes.
        mmap: memory-map the file (copy-on-write) and return numpy and torch arrays that
            share its pages instead of reading them into new memory: loading costs no copy,
            and only the pages touched are read. Writing to such an array changes this
            process's private copy of the page, never the file; a change made to the file by
            anyone else may show in arrays whose pages this process has not written; the file
            must not be truncated while they live (reading a page past its new end kills the
            process with ``SIGBUS``). JAX arrays, float4 leaves loaded to numpy or JAX, numpy
            scalars and tensors at an offset not aligned to their item size are copied as
            without ``mmap``.

    Returns:
        The tree. Its numpy arrays are writable and never overlap; small ones (up to 64 KiB,
        read together) are views of one buffer of up to 1 MiB shared with their neighbours in
        the file, which stays alive as long as any of them does: ``.copy()`` one to keep only
        its own bytes. torch and JAX arrays hold their own memory (without ``mmap``).

    Raises:
        UnregisteredNameError: the file names a class that is not registered here.
        FileLoadError: the file is malformed or hostile (truncated, a header that lies about
            sizes, offsets, dtypes or shapes, tensors that disagree with the structure,
            metadata that is not treeclass's...), ``paths`` names no node, ``to`` is unknown;
            for a file of another kind (a zip such as a ``.pt2`` archive, a ``jax.export``
            blob, a treespec document) the message names the loader that reads it.
        MissingDependencyError: numpy (or the framework ``to`` names) is not installed.

    Example:
        >>> import numpy as np, treeclass as tc
        >>> tc.save(tmp / "pair.safetensors", {"w": np.zeros(3), "b": np.ones(1), "n": 2})
        >>> tc.load(tmp / "pair.safetensors", paths=["['w']"])
        {'b': None, 'n': None, 'w': array([0., 0., 0.])}

    .. versionadded:: 0.1.0
    """
    _check_options(to, paths, mmap)
    source = repr(str(path))
    with open(path, "rb") as f:
        header = _read_header(f, path, source)
        if is_ours(header.metadata):
            return _load_tree(f, header, source, to, paths, mmap)
        return _load_plain(f, header, source, to, paths, mmap)


def load_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The user's ``metadata`` of a file from :func:`save` (any safetensors file's metadata).

    Only the header is read (and checked); treeclass's own entries are left out.

    Raises:
        FileLoadError: the file is not a well-formed safetensors file.

    Example:
        >>> import treeclass as tc
        >>> tc.save(tmp / "meta.safetensors", {"x": 1}, metadata={"run": "a1"})
        >>> tc.load_metadata(tmp / "meta.safetensors")
        {'run': 'a1'}

    .. versionadded:: 0.1.0
    """
    source = repr(str(path))
    with open(path, "rb") as f:
        header = _read_header(f, path, source)
    return user_metadata(header.metadata)


# Public under the package name, where users find them.
save.__module__ = "treeclass"
load.__module__ = "treeclass"
load_metadata.__module__ = "treeclass"
