"""The safetensors file format, read and written in pure Python (nothing imported here).

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of UTF-8 JSON,
then the tensor data. The header maps each tensor name to ``{"dtype", "shape",
"data_offsets"}`` (offsets relative to the end of the header) and may hold ``"__metadata__"``,
a ``str -> str`` map.

:func:`read_header` treats the file as hostile and checks everything before anything else
looks at it, in an order that bounds memory and time by the file's size: the header length
against the file size and a cap before reading it; then strict JSON (no duplicate keys, no
``NaN``, no huge numbers); then each tensor's dtype, shape and byte count; then that the
tensors tile the data section exactly, with no gap and no overlap (as safetensors itself
requires). Every problem is a :class:`~treeclass.FileLoadError` naming the file.

:func:`write_file` writes what safetensors' own writer writes: tensors ordered by descending
dtype alignment, then name (so every tensor starts at a multiple of its item size), the header
padded with spaces to a multiple of 8 bytes, into a temporary file renamed over the target
only once complete.
"""

from __future__ import annotations

import os
from itertools import accumulate, chain, repeat
from math import prod
from operator import attrgetter, itemgetter, le, mul
from typing import TYPE_CHECKING, NamedTuple

from .._core.json import loads_checked
from .._errors import FileLoadError, FileSaveError
from .dtypes import SAFETENSORS_BITS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, BinaryIO, Final

    from typing_extensions import Buffer

__all__ = [
    "EXTENT",
    "MAX_HEADER_BYTES",
    "Header",
    "TensorInfo",
    "read_header",
    "write_file",
]

_RANK: Final[dict[str, int]] = {code: i for i, code in enumerate(SAFETENSORS_BITS)}

#: The largest header safetensors reads (its own ``MAX_HEADER_SIZE``).
MAX_HEADER_BYTES: Final = 100_000_000
_MAX_DIM: Final = 1 << 64
_INFO_KEYS: Final = frozenset(("dtype", "shape", "data_offsets"))
_INLINE_RANK: Final = 8  # shapes checked in bulk: their products stay small
_BITS_KEYS: Final = frozenset(SAFETENSORS_BITS)


class TensorInfo(NamedTuple):
    """One tensor of a header: its name, dtype code, shape and byte range in the data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """The tensor's size in bytes."""
        return self.end - self.begin


class Header(NamedTuple):
    """A checked header: tensors in file order, metadata, and where the data starts."""

    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    data_start: int
    file_size: int


def _bad(source: str, message: str) -> FileLoadError:
    return FileLoadError(f"{source} is not a loadable safetensors file: {message}")


def _where(name: str) -> str:
    return f"tensor {name[:200]!r}"


def _check_tensor(source: str, name: str, info: Any, data_size: int) -> TensorInfo:
    if info.__class__ is not dict or info.keys() != _INFO_KEYS:
        raise _bad(
            source,
            f'tensor {name[:200]!r} must be described by exactly "dtype", "shape" and '
            '"data_offsets".',
        )
    dtype = info["dtype"]
    shape = info["shape"]
    offsets = info["data_offsets"]
    if dtype.__class__ is not str or dtype not in SAFETENSORS_BITS:
        raise _bad(source, f"{_where(name)} has the unknown dtype {str(dtype)[:40]!r}.")
    if shape.__class__ is not list or not all(
        d.__class__ is int and 0 <= d < _MAX_DIM for d in shape
    ):
        raise _bad(
            source,
            f"{_where(name)} has a shape that is not a list of sizes: {str(shape)[:80]}.",
        )
    if (
        offsets.__class__ is not list
        or len(offsets) != 2
        or offsets[0].__class__ is not int
        or offsets[1].__class__ is not int
        or not 0 <= offsets[0] <= offsets[1] < _MAX_DIM
    ):
        raise _bad(
            source,
            f"{_where(name)} has data_offsets that are not [begin, end]: {offsets!r:.80}.",
        )
    begin, end = offsets
    if end > data_size:
        raise _bad(
            source,
            f"{_where(name)} ends at byte {end} of a data section of {data_size} bytes (the file "
            "is truncated or its header lies about offsets).",
        )
    bits = SAFETENSORS_BITS[dtype]
    # The element count, given up as soon as it exceeds what the byte range can hold.
    limit = (end - begin) * 8 // bits + 1
    numel = 0 if 0 in shape else 1
    for d in shape if numel else ():
        numel *= d
        if numel > limit:
            break
    if numel * bits != (end - begin) * 8:
        raise _bad(
            source,
            f"{_where(name)} is {dtype} with shape {shape!r:.80} but its data_offsets give "
            f"{end - begin} bytes.",
        )
    return TensorInfo(name, dtype, tuple(shape), begin, end)


def read_header(f: BinaryIO, source: str) -> Header:
    """Read and check the header of the safetensors file open as ``f`` (at its start).

    Args:
        f: the file, opened for binary reading.
        source: how to name the file in messages.

    Returns:
        The header; its tensors tile the data section exactly.

    Raises:
        FileLoadError: anything at all is wrong with the header.
    """
    try:
        size = os.fstat(f.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        size = f.seek(0, os.SEEK_END)
        f.seek(0)
    first = f.read(8)
    if len(first) < 8:
        raise _bad(source, f"it is {size} bytes long; a safetensors file starts with 8 bytes.")
    n = int.from_bytes(first, "little")
    if n > MAX_HEADER_BYTES:
        raise _bad(
            source,
            f"its header length field says {n} bytes, more than the {MAX_HEADER_BYTES} bytes "
            "safetensors allows.",
        )
    if n > size - 8:
        raise _bad(
            source,
            f"its header length field says {n} bytes but only {size - 8} bytes follow (the file "
            "is truncated, or it is not a safetensors file).",
        )
    raw = f.read(n)
    if len(raw) != n:
        raise _bad(source, "the file changed size while it was being read.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(
            source, f"its header is not UTF-8 text ({e.reason} at byte {e.start})."
        ) from None
    del raw
    if not text.startswith("{"):
        raise _bad(source, "its header does not start with '{'.")
    return loads_checked(
        text,
        lambda doc: _check_header(source, doc, size, n),
        lambda e: _bad(source, f"its header is not valid JSON ({e!s:.200})."),
    )


def _check_header(source: str, doc: Any, size: int, n: int) -> tuple[Header, int, int]:
    """The checked header of a parsed header document, with its census (for loads_checked)."""
    if doc.__class__ is not dict:
        raise _bad(source, "its header is not a JSON object.")
    members = len(doc)
    raw_metadata: Any = doc.pop("__metadata__", None)
    metadata: dict[str, str] = {} if raw_metadata is None else raw_metadata
    if metadata.__class__ is not dict or not all(v.__class__ is str for v in metadata.values()):
        raise _bad(source, '"__metadata__" must map strings to strings.')
    members += len(metadata) + 3 * len(doc)  # each tensor's three, checked below
    string_colons = (
        "".join(metadata).count(":")
        + "".join(metadata.values()).count(":")
        + "".join(doc).count(":")  # the names; dtype codes have none
    )
    data_size = size - 8 - n
    tensors = _check_tensors_at_once(doc, data_size)
    if tensors is None:
        tensors = _check_tensors(source, doc, data_size)
    return (
        Header(dict(zip(map(_NAME, tensors), tensors)), metadata, 8 + n, size),
        members,
        string_colons,
    )


_NAME: Final = itemgetter(0)
_CODE: Final = itemgetter(1)  # (a TensorInfo's dtype; write_file's tensors' too)
_SHAPE: Final[Callable[[Any], Sequence[int]]] = itemgetter(2)
_DATA: Final = itemgetter(3)  # (write_file's tensors' data)
_NBYTES: Final[Callable[[memoryview], int]] = attrgetter("nbytes")
_BEGIN: Final = itemgetter(3)
_END: Final = itemgetter(4)
#: A :class:`TensorInfo`'s ``(begin, end)``: the sort key of a file's tensors by offset.
EXTENT: Final = itemgetter(3, 4)


def _check_tensors_at_once(doc: dict[str, Any], data_size: int) -> list[TensorInfo] | None:
    """The tensors of a header whose entries are all usual and right, checked in bulk.

    ``None`` when any entry is not (of rank above 8, or wrong in any way): the caller checks
    them one by one (:func:`_check_tensors`) for the message. The same checks, at C speed.
    """
    infos: list[Any] = list(doc.values())
    if not infos or set(map(type, infos)) != {dict} or set(map(len, infos)) != {3}:
        return None
    get: Any = getattr(dict, "get")  # noqa: B009 (typed Any)
    dtypes: list[Any] = list(map(get, infos, repeat("dtype")))
    shapes: list[Any] = list(map(get, infos, repeat("shape")))
    offsets: list[Any] = list(map(get, infos, repeat("data_offsets")))
    try:
        known = set(dtypes) <= _BITS_KEYS  # (only a str equals a str; a list is unhashable)
    except TypeError:
        return None
    if (
        not known
        or set(map(type, shapes)) != {list}
        or max(map(len, shapes)) > _INLINE_RANK
        or set(map(type, offsets)) != {list}
        or set(map(len, offsets)) != {2}
    ):
        return None
    dims = list(chain.from_iterable(shapes))
    flat = list(chain.from_iterable(offsets))
    if set(map(type, chain(dims, flat))) != {int}:
        return None
    if dims and (min(dims) < 0 or max(dims) >= _MAX_DIM):
        return None
    begins = flat[0::2]
    ends = flat[1::2]
    if min(begins) < 0 or max(ends) > data_size or not all(map(le, begins, ends)):
        return None
    bits = map(SAFETENSORS_BITS.__getitem__, dtypes)
    if list(map(mul, map(prod, shapes), bits)) != [8 * (e - b) for b, e in zip(begins, ends)]:
        return None
    make: Any = getattr(tuple, "__new__")  # noqa: B009 (TensorInfo(*fields), no Python call)
    dims_of: Any = map(tuple, shapes)  # pyright: ignore[reportUnknownArgumentType]
    fields: Any = zip(doc, dtypes, dims_of, begins, ends)
    tensors: list[TensorInfo] = list(map(make, repeat(TensorInfo), fields))
    if begins[0] == 0 and begins[1:] == ends[:-1] and ends[-1] == data_size:
        return tensors  # in file order already, tiling the data (as files are written)
    tensors.sort(key=EXTENT)
    starts = list(map(_BEGIN, tensors))
    stops = list(map(_END, tensors))
    if starts[0] != 0 or starts[1:] != stops[:-1] or stops[-1] != data_size:
        return None  # a gap or an overlap: said by the caller
    return tensors


def _check_tensors(source: str, doc: dict[str, Any], data_size: int) -> list[TensorInfo]:
    """The tensors of a header, checked one by one (for the message), sorted by their place."""
    tensors = [_check_tensor(source, name, info, data_size) for name, info in doc.items()]
    tensors.sort(key=EXTENT)
    at = 0
    for t in tensors:
        if t.begin != at:
            what = "overlaps the one before it" if t.begin < at else "leaves a gap before it"
            raise _bad(
                source,
                f"tensor {t.name[:200]!r} starts at byte {t.begin} and {what} (which ends at "
                f"byte {at}); tensors must tile the data section.",
            )
        at = t.end
    if at != data_size:
        raise _bad(
            source,
            f"its tensors cover {at} bytes but the data section has {data_size} bytes (the "
            "header lies about offsets, or the file has trailing data).",
        )
    return tensors


def write_file(
    path: str | os.PathLike[str],
    tensors: Iterable[tuple[str, str, Sequence[int], Buffer]],
    metadata: dict[str, str],
) -> None:
    """Write a safetensors file, atomically (a temporary file renamed over ``path``).

    Args:
        path: where to write.
        tensors: ``(name, dtype code, shape, data)`` for each tensor; ``data`` is a
            C-contiguous little-endian buffer of exactly the tensor's bytes; names are unique.
        metadata: the header's ``"__metadata__"``.

    Raises:
        FileSaveError: a name or metadata value cannot be written as UTF-8, or the header
            would exceed what safetensors reads.
    """
    from json.encoder import encode_basestring as text_of  # (C) as json.dumps writes strings

    items = list(tensors)
    if len(set(map(_CODE, items))) == 1:
        items.sort(key=_NAME)  # (one dtype: by name alone; names are unique)
    else:
        items.sort(key=lambda t: (-_RANK[t[1]], t[0]))
    view_of: Any = memoryview
    views: list[memoryview] = list(map(view_of, map(_DATA, items)))
    offsets = [0, *accumulate(map(_NBYTES, views))]
    shapes: list[tuple[int, ...]] = list(map(tuple, map(_SHAPE, items)))
    shape_texts = {shape: ",".join(map(str, shape)) for shape in set(shapes)}
    # The header's JSON text, written directly: what json.dumps(..., ensure_ascii=False,
    # separators=(",", ":")) writes of {"__metadata__": metadata, name: entry, ...}.
    parts: list[str] = []
    if metadata:
        pairs = ",".join([f"{text_of(k)}:{text_of(v)}" for k, v in metadata.items()])
        parts.append(f'"__metadata__":{{{pairs}}}')
    if items:
        fields = zip(
            map(text_of, map(_NAME, items)),
            map(_CODE, items),
            map(shape_texts.__getitem__, shapes),
            offsets,
            offsets[1:],
        )
        parts.append(
            ",".join(
                [
                    f'{n}:{{"dtype":"{c}","shape":[{s}],"data_offsets":[{b},{e}]}}'
                    for n, c, s, b, e in fields
                ]
            )
        )
    try:
        raw = f"{{{','.join(parts)}}}".encode()
    except UnicodeEncodeError as e:
        raise FileSaveError(
            f"a key path or metadata string holds {e.object[e.start : e.end]!r}, which is not "
            "valid Unicode text (a lone surrogate), so it cannot be written; use another key."
        ) from None
    raw += b" " * (-len(raw) % 8)
    if len(raw) > MAX_HEADER_BYTES:
        raise FileSaveError(
            f"the file's header would be {len(raw)} bytes, more than the {MAX_HEADER_BYTES} "
            "bytes safetensors reads; save fewer leaves per file (or shorter metadata)."
        )
    target = os.fspath(path)
    folder, base = os.path.split(target)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{id(items):x}.tmp")
    try:
        with open(tmp, "wb", buffering=0) as out:
            _write_all(out, [memoryview(len(raw).to_bytes(8, "little") + raw), *views])
        os.replace(tmp, target)
    except BaseException:
        import contextlib  # here: importing contextlib costs ~1 ms at ``import treeclass``

        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_IOV_MAX: Final = 1024  # buffers per writev call (POSIX's minimum IOV_MAX is 16; Linux 1024)


def _write_all(out: Any, buffers: list[memoryview]) -> None:
    """Write ``buffers`` (C-contiguous) to the unbuffered file ``out``, in few system calls."""
    writev = getattr(os, "writev", None)
    if writev is None:  # pragma: no cover - Windows
        for b in buffers:
            out.write(b)
        return
    try:
        limit = max(1, min(_IOV_MAX, os.sysconf("SC_IOV_MAX")))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - no such setting
        limit = 16
    fd = out.fileno()
    i = 0
    while i < len(buffers):
        chunk = buffers[i : i + limit]
        n = writev(fd, chunk)
        if not n and any(b.nbytes for b in chunk):  # pragma: no cover - the OS said nothing
            raise OSError("the file system accepted no bytes (writev returned 0)")
        for b in chunk:  # skip what was written; a partial buffer is written again from there
            size = b.nbytes
            if n < size:
                buffers[i] = b.cast("B")[n:]  # (size > 0: any shape casts to bytes)
                break
            n -= size
            i += 1
