"""Objects of an R lazy-load database (a package's ``data/Rdata.rdb`` and ``Rdata.rdx``),
read without R.

R writes each object in its serialisation format (XDR, versions 2 and 3: "R Internals",
section 1.8) and compresses it. The ``.rdx`` index is a gzip-compressed serialised list
``(variables, references, compressed)``: ``variables`` names each object and gives its
``(offset, length)`` in the ``.rdb``; there each object is a 4-byte big-endian length of
its serialisation, then (compression 1) a zlib stream, or (2 and 3) one byte naming the
compression (``Z`` zlib, ``2`` bzip2, ``X`` xz, ``0`` none) and that stream.

``unserialize`` reads the types data sets are made of: NULL, character, logical, integer
and double vectors, lists and their attributes (pairlists with symbol tags); any other
type is a ``ValueError`` naming it. A vector is returned as an ``RVector`` of its values
and attributes (NA strings as None). ``lazy_load`` refuses a damaged database (not
compressed as it says, cut short, garbage) in one ``ValueError`` naming the file.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

_NIL, _SYMBOL, _PAIRLIST, _CHAR, _REF = 254, 1, 2, 9, 255
_ATTRIBUTE_PAIRLIST = 239
_VECTORS = {10: "i", 13: "i", 14: "d"}  # logical, integer, double: fixed-size XDR
_LISTS = (16, 19, 20)  # character vector, list, expression list
_ENVIRONMENTS = (241, 242, 250, 251, 252, 253)  # the base, empty, global ... environments
_DECOMPRESS: dict[bytes, Callable[[bytes], bytes]] = {
    b"Z": zlib.decompress,
    b"2": bz2.decompress,
    b"X": lzma.decompress,
}
DAMAGED = (
    ValueError,
    EOFError,
    OSError,
    KeyError,
    IndexError,
    AttributeError,
    TypeError,
    struct.error,
    zlib.error,
    lzma.LZMAError,
    RecursionError,
)
"""What decoding damaged bytes raises: the decompressors' errors (gzip's ``BadGzipFile`` and
bz2's are ``OSError``, a cut stream ``EOFError``), and this module's own reading of objects
that are not what the format says (a list too short, a name that is no string)."""


class RVector(NamedTuple):
    """An R vector: its values (a list) and its attributes (name -> object; empty: none)."""

    values: list
    attributes: dict


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0
        self.symbols: list = []  # the symbols read so far, which a reference gives by number

    def take(self, size: int) -> bytes:
        chunk = self.data[self.at : self.at + size]
        if len(chunk) < size:
            raise ValueError("the R serialisation ends before its last object")
        self.at += size
        return chunk

    def integer(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def item(self):
        flags = self.integer()
        kind, has_attributes, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == _NIL or kind in _ENVIRONMENTS:
            return None
        if kind == _REF:
            return self.symbols[(flags >> 8) - 1]
        if kind == _SYMBOL:
            self.symbols.append(self.item())
            return self.symbols[-1]
        if kind == _CHAR:
            size = self.integer()
            return None if size == -1 else self.take(size).decode("utf-8", errors="replace")
        if kind in (_PAIRLIST, _ATTRIBUTE_PAIRLIST):
            if has_attributes:
                self.item()
            tag = self.item() if has_tag else None
            head, tail = self.item(), self.item()
            return {tag: head, **(tail or {})}
        if kind in _LISTS:
            values = [self.item() for _ in range(self.integer())]
        elif kind in _VECTORS:
            size = self.integer()
            code = _VECTORS[kind]
            values = list(struct.unpack(f">{size}{code}", self.take(size * struct.calcsize(code))))
        else:
            raise ValueError(f"R object of type {kind} is not read here (only data vectors)")
        return RVector(values, self.item() if has_attributes else {})


def unserialize(data: bytes):
    """The object of R's XDR serialisation ``data`` (versions 2 and 3)."""
    reader = _Reader(data)
    if reader.take(2) != b"X\n":
        raise ValueError("not an R XDR serialisation (it must start with 'X\\n')")
    version = reader.integer()
    reader.take(8)  # the writer's and the oldest reader's R versions
    if version == 3:
        reader.take(reader.integer())  # the native encoding's name
    return reader.item()


def _entry(blob: bytes, compression: int) -> bytes:
    size = struct.unpack(">i", blob[:4])[0]
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, body = blob[4:5], blob[5:]
        data = body if kind == b"0" else _DECOMPRESS[kind](body)
    if len(data) != size:
        raise ValueError(f"an R lazy-load entry holds {len(data)} bytes, its header says {size}")
    return data


def _index(data: bytes) -> tuple[list[tuple[str, int, int]], int]:
    """The objects an ``.rdx`` file lists, each ``(name, offset, length)`` in the ``.rdb``,
    and their compression."""
    index = unserialize(gzip.decompress(data)).values
    variables, compression = index[0], int(index[2].values[0])
    names = variables.attributes["names"].values
    places = [tuple(int(x) for x in where.values) for where in variables.values]
    listed = [
        (str(name), offset, length) for name, (offset, length) in zip(names, places, strict=True)
    ]
    return listed, compression


def _decoded(path: Path, decode, *args):
    """``decode(*args)``, the bytes of the file at ``path``; ``ValueError`` (one line) naming
    the file when they are damaged (``DAMAGED``)."""
    try:
        return decode(*args)
    except DAMAGED as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise ValueError(f"{path} is no readable R lazy-load file ({reason})") from None


def lazy_load(path: str | Path) -> dict[str, object]:
    """Every object of the lazy-load database ``path`` (``<path>.rdx`` and ``<path>.rdb``,
    e.g. ``data/Rdata``): name -> object, in the index's order.

    Raises ``OSError`` when a file cannot be read and ``ValueError`` (one line naming the
    file) when one is damaged.
    """
    index, database = Path(path).with_suffix(".rdx"), Path(path).with_suffix(".rdb")
    objects, compression = _decoded(index, _index, index.read_bytes())
    data = database.read_bytes()
    return {
        name: _decoded(database, _object, data[offset : offset + length], compression)
        for name, offset, length in objects
    }


def _object(blob: bytes, compression: int):
    """The object of one entry of the ``.rdb`` file."""
    return unserialize(_entry(blob, compression))
