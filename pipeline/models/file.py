"""An HMM of your own from an ``.npz`` archive: the model family ``file``.

``build_model("file", n, path=...)`` reads the arrays

- ``prior`` (n_states,): ``P(S_0 = i)``;
- ``transition`` (n_states, n_states): ``P(S_{t+1} = j | S_t = i)``, rows summing to 1;
- ``emission`` (n_states, n_observations): ``P(O_t = o | S_t = i)``, rows summing to 1;

from one archive, each either a dense array under its own name or a ``scipy.sparse``
matrix stored as the arrays ``scipy.sparse.save_npz`` writes, each prefixed with the
matrix's name and an underscore: ``transition_data``, ``transition_indices``,
``transition_indptr``, ``transition_shape`` and ``transition_format`` for CSR (the same for
CSC and BSR; ``_row`` and ``_col`` instead of the indices for COO, ``_offsets`` for DIA).
Nothing is trusted: the path must be a regular file (not a FIFO or a device); each
array's header is read first, and an array that declares more bytes than the archive holds
for it (a truncated or forged file) is refused before anything is allocated; a sparse
matrix's index arrays are checked in full before anything reads its entries
(``pipeline.operators.check_structure``); the ``HMM`` container then validates the values
(float32 and float16 arrays within their precision, then read as float64: ``HMM``).
Every problem is a one-line ``ParameterError`` at ``path`` naming the file, the array and
what is allowed. A sparse matrix is kept sparse (as CSR), so every method runs on it in its
own cost.

A categorical HMM fitted with hmmlearn exports in three lines::

    import numpy as np

    # model: a fitted hmmlearn.hmm.CategoricalHMM
    np.savez(path, prior=model.startprob_, transition=model.transmat_, emission=model.emissionprob_)

``save`` writes the format, sparse matrices included::

    import scipy.sparse as sp
    from pipeline.models import file

    file.save("mine.npz", prior, sp.csr_array(transition), emission)

``n_states`` must be the file's (``size`` reads it from the prior's header without
loading the matrices). ``verify`` reads and validates the whole model, ``model_bytes``
estimates its memory from the headers and ``fingerprint`` hashes the file's contents: what
a sweep checks before any cluster starts and keeps in its store's identity. The family has
no randomness: ``seed`` is ignored.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import stat
import zipfile
import zlib
from typing import Any

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError

ARRAYS = ("prior", "transition", "emission")
"""The arrays of the format, in the order of ``HMM``'s arguments."""

SPARSE_PARTS = {
    "csr": ("indices", "indptr"),
    "csc": ("indices", "indptr"),
    "bsr": ("indices", "indptr"),
    "coo": ("row", "col"),
    "dia": ("offsets",),
}
"""The sparse formats read, and the arrays (beside ``data``, ``shape`` and ``format``) each
stores: those of ``scipy.sparse.save_npz``."""

SEEDED = False
"""The model is the file's: every seed gives the same HMM."""

GAMMA_EXACT_MAX_STATES = float("inf")
"""No limit of the family's own: the matrices are dense or CSR, whose exact minimal mixing
rate reads them as they are stored, materialising nothing (unlike a ``LowRank``, see
``pipeline.models.kernel``). The sweep's ``gamma_exact_max_states`` bounds its time."""

READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)
"""What reading a damaged archive or member raises (numpy's and zipfile's errors differ)."""

HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
"""The ``.npy`` header versions read (``numpy.savez`` writes 1.0, and 2.0 for huge headers)."""


def _error(path, message: str) -> ParameterError:
    return ParameterError("path", f"{str(path)!r}: {message}")


def _open(path: str | os.PathLike | None) -> np.lib.npyio.NpzFile:
    """The archive at ``path``; ``ParameterError("path", ...)`` when it is unset, missing, no
    regular file (a FIFO or a device would block or never end) or no ``.npz`` archive."""
    if path is None:
        raise ParameterError(
            "path", "the file family needs path= an .npz archive of prior, transition, emission"
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ParameterError(
            "path", f"the file family's path {str(path)!r} does not exist"
        ) from None
    except OSError as error:
        raise _error(path, f"cannot be read ({error.strerror or type(error).__name__})") from None
    if not stat.S_ISREG(mode):
        raise _error(path, "is not a regular file; the file family needs an .npz archive")
    try:
        archive = np.load(path, allow_pickle=False)
    except READ_ERRORS as error:
        raise ParameterError(
            "path",
            f"the file family cannot read {str(path)!r} as an .npz archive "
            f"({type(error).__name__})",
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ParameterError(
            "path",
            f"{str(path)!r} is a single .npy array; the file family needs an .npz archive "
            "of prior, transition, emission",
        )
    return archive


def _header(archive: np.lib.npyio.NpzFile, key: str, path) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype the array ``key`` declares, read from its header alone; refused
    when it is no ``.npy`` array, holds objects, or declares more bytes than the archive
    holds for it (a truncated or forged member that would allocate them)."""
    members = archive.zip
    assert members is not None, "an open archive has its zip file"
    member = f"{key}.npy" if f"{key}.npy" in members.namelist() else key
    try:
        size = members.getinfo(member).file_size
        with members.open(member) as stream:
            version = np.lib.format.read_magic(stream)
            if version not in HEADERS:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = HEADERS[version](stream)
            size -= stream.tell()
    except READ_ERRORS as error:
        raise _error(path, f"{key} is no readable .npy array ({error})") from None
    if dtype.hasobject:
        raise _error(path, f"{key} holds Python objects; allowed: numeric arrays")
    declared = math.prod(shape) * dtype.itemsize
    if declared > size:
        raise _error(
            path,
            f"{key} declares shape {shape} of {dtype} ({declared:,} bytes) but holds "
            f"{size:,}; the archive is truncated or damaged",
        )
    return shape, dtype


def _read(archive: np.lib.npyio.NpzFile, key: str, path) -> np.ndarray:
    """The array ``key``, once its header passed ``_header``."""
    _header(archive, key, path)
    try:
        return archive[key]
    except READ_ERRORS as error:
        raise _error(path, f"{key} cannot be read ({type(error).__name__}: {error})") from None


def _sparse_format(archive: np.lib.npyio.NpzFile, name: str, path) -> str | None:
    """The format of the sparse matrix ``name`` in ``archive``, or None if stored dense."""
    if f"{name}_format" not in archive.files:
        return None
    found = _read(archive, f"{name}_format", path)
    if found.size != 1 or found.dtype.kind not in "SU":
        raise _error(path, f"{name}_format must be one string; allowed: {', '.join(SPARSE_PARTS)}")
    found = found.item()
    return found.decode("ascii", "replace") if isinstance(found, bytes) else str(found)


def _sparse_parts(archive: np.lib.npyio.NpzFile, name: str, kind: str) -> list[str]:
    """The arrays a sparse matrix ``name`` of format ``kind`` is stored as."""
    if kind == "coo" and f"{name}_coords" in archive.files:
        return ["data", "shape", "coords"]
    return ["data", "shape", *SPARSE_PARTS[kind]]


def _missing(archive: np.lib.npyio.NpzFile, name: str, path) -> str | None:
    """Why ``archive`` holds no matrix ``name`` in the format, or None if it does."""
    if name in archive.files:
        return None
    kind = _sparse_format(archive, name, path)
    if kind is None:
        return (
            f"has no array {name!r} (dense, or a scipy.sparse matrix as {name}_data, "
            f"{name}_format, ...)"
        )
    if kind not in SPARSE_PARTS:
        return f"stores {name!r} as {kind!r}; allowed: {', '.join(SPARSE_PARTS)}"
    parts = _sparse_parts(archive, name, kind)
    absent = [f"{name}_{part}" for part in parts if f"{name}_{part}" not in archive.files]
    return f"stores {name!r} as {kind} without {', '.join(absent)}" if absent else None


def _check_arrays(archive: np.lib.npyio.NpzFile, path) -> None:
    for name in ARRAYS:
        why = _missing(archive, name, path)
        if why is not None:
            raise ParameterError("path", f"{str(path)!r} {why}")


def _shape(archive: np.lib.npyio.NpzFile, name: str, path) -> tuple[int, ...]:
    """The shape a sparse matrix ``name`` declares (``<name>_shape``): 2 integers >= 0."""
    shape = _read(archive, f"{name}_shape", path)
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise _error(
            path, f"{name}_shape is {shape.tolist()}; allowed: two integers >= 0 (rows, columns)"
        )
    return int(shape[0]), int(shape[1])


def _headers(archive: np.lib.npyio.NpzFile, path) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Each array of the format's declared shape (a sparse matrix's: its values') and whether
    it is stored dense, from the headers alone, each passed by ``_header``."""
    found = {}
    for name in ARRAYS:
        dense = name in archive.files
        shape, _ = _header(archive, name if dense else f"{name}_data", path)
        found[name] = shape, dense
    return found


def _read_size(path: str | os.PathLike | None) -> int:
    """The number of states of the archive at ``path``, from the prior's header;
    ``ParameterError("path", ...)`` when it is unset, missing, unreadable, lacks an array or
    an array's header fails ``_header``. Every header is read, as ``model_bytes`` reads them:
    a file that passed ``check`` cannot fail the sweep's memory estimate, which runs before
    ``verify`` reads the values."""
    with _open(path) as archive:
        _check_arrays(archive, path)
        shape, dense = _headers(archive, path)["prior"]
        if not dense:
            return _shape(archive, "prior", path)[-1]
    if len(shape) != 1:
        raise ParameterError(
            "path", f"{str(path)!r}: prior has shape {shape}; it must be (n_states,)"
        )
    return shape[0]


def size(*, path: str | None = None) -> int:
    """The number of states of the HMM stored at ``path``, from the prior's header (the
    matrices are not read)."""
    return _read_size(path)


def check(n_states: int, *, path: str | None = None) -> None:
    """Raise ``ParameterError`` unless ``path`` is an archive of the format holding an HMM of
    ``n_states`` states whose arrays' headers are sound. Cheap: only the headers and the
    prior's shape are read, not the matrices (``verify`` reads them)."""
    held = _read_size(path)
    if held != n_states:
        raise ParameterError(
            "n_states", f"{str(path)!r} holds an HMM of {held} states, not n_states={n_states}"
        )


def _matrix(archive: np.lib.npyio.NpzFile, name: str, path):
    """The array ``name``: dense, or the scipy.sparse array its parts make (its structure
    unchecked yet: ``HMM`` checks it before anything reads its entries)."""
    kind = _sparse_format(archive, name, path)
    if kind is None:
        return _read(archive, name, path)
    parts = _sparse_parts(archive, name, kind)
    part = {key: _read(archive, f"{name}_{key}", path) for key in parts if key != "shape"}
    shape = _shape(archive, name, path)
    for key, values in part.items():  # scipy would cast them, fractions and NaN included
        if key != "data" and values.dtype.kind not in "iu":
            raise _error(path, f"{name}_{key} is {values.dtype}; allowed: integers")
    try:
        if kind == "coo":
            coords = part["coords"] if "coords" in part else (part["row"], part["col"])
            return sp.coo_array((part["data"], tuple(coords)), shape=shape)
        if kind == "dia":
            return sp.dia_array((part["data"], part["offsets"]), shape=shape)
        cls = {"csr": sp.csr_array, "csc": sp.csc_array, "bsr": sp.bsr_array}[kind]
        return cls((part["data"], part["indices"], part["indptr"]), shape=shape)
    except (ValueError, TypeError) as error:  # scipy's own checks of lengths and shapes
        raise _error(path, f"{name} is no valid {kind.upper()} matrix ({error})") from None


def build(n_states: int, seed: int = 0, *, path: str | None = None) -> HMM:
    """The HMM stored at ``path`` (see the module docstring; ``seed`` is ignored)."""
    check(n_states, path=path)
    with _open(path) as archive:
        prior, transition, emission = (_matrix(archive, name, path) for name in ARRAYS)
    try:
        if sp.issparse(prior):
            if prior.ndim != 1 and prior.shape[0] != 1:
                raise ValueError(f"prior has shape {prior.shape}; it must be (n_states,)")
            prior = prior.toarray().ravel()
        return HMM(prior, transition, emission)
    except (ValueError, TypeError, MemoryError) as error:
        raise _error(path, str(error).splitlines()[0]) from None


def verify(n_states: int, *, path: str | None = None) -> None:
    """Raise ``ParameterError`` unless ``build`` makes a valid HMM of the file: everything
    read and checked, as a sweep does once before any cluster starts."""
    build(n_states, path=path)


def model_bytes(*, path: str | None = None) -> int:
    """The bytes the HMM at ``path`` takes in a worker, from the arrays' headers alone: 8 a
    value of a dense array, 16 a stored value of a sparse one (the value, its index, and
    what the compiled layout keeps beside them), the transition counted twice (the matrix
    and its layout)."""
    with _open(path) as archive:
        _check_arrays(archive, path)
        headers = _headers(archive, path)
    return sum(
        times * math.prod(shape) * (8 if dense else 16)
        for (shape, dense), times in zip(headers.values(), (1, 2, 1), strict=True)
    )


def fingerprint(*, path: str | None = None) -> str:
    """The SHA-256 of the file at ``path``: a store's identity holds it, so a file replaced
    between a run and its resume is refused rather than mixed into one store. Hashed once
    per process while the file keeps its inode, size and modification time."""
    _open(path).close()
    assert path is not None, "_open refuses a missing path"
    found = os.stat(path)
    return _sha256(os.path.realpath(path), found.st_ino, found.st_size, found.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, inode: int, size: int, modified: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(2**24):
            digest.update(chunk)
    return digest.hexdigest()


def save(path: str | os.PathLike, prior, transition, emission, *, compressed: bool = False) -> None:
    """Write an HMM's arrays to ``path`` in the format (``numpy.savez`` adds ``.npz`` to a
    name without it): dense arrays under their names, ``scipy.sparse`` matrices as their
    parts (CSR, CSC, BSR, COO and DIA as they are, other formats as CSR). ``compressed``
    zips the arrays: a smaller file, slower to read."""
    arrays: dict[str, Any] = {}  # ndarrays, and a sparse matrix's format as a str
    for name, matrix in zip(ARRAYS, (prior, transition, emission), strict=True):
        if not sp.issparse(matrix):
            arrays[name] = np.asarray(matrix)
            continue
        if matrix.format not in SPARSE_PARTS:
            matrix = matrix.tocsr()
        parts = {"data": matrix.data, "shape": np.array(matrix.shape), "format": matrix.format}
        parts.update({part: getattr(matrix, part) for part in SPARSE_PARTS[matrix.format]})
        arrays.update({f"{name}_{part}": value for part, value in parts.items()})
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
