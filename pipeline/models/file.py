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
The ``HMM`` container then validates them: a wrong shape, a negative entry or a row that
does not sum to 1 is a one-line ``ValueError`` naming the array and the row. A sparse
matrix is kept sparse (as CSR), so every method runs on it in its own cost.

A categorical HMM fitted with hmmlearn exports in three lines::

    import numpy as np

    # model: a fitted hmmlearn.hmm.CategoricalHMM
    np.savez(path, prior=model.startprob_, transition=model.transmat_, emission=model.emissionprob_)

``save`` writes the format, sparse matrices included::

    import scipy.sparse as sp
    from pipeline.models import file

    file.save("mine.npz", prior, sp.csr_array(transition), emission)

``n_states`` must be the file's (``size`` reads it from the prior's shape without
loading the matrices). The family has no randomness: ``seed`` is ignored.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import scipy.sparse as sp

from pipeline.models.family import ParameterError
from pipeline.models.hmm import HMM

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


def _sparse_format(archive: np.lib.npyio.NpzFile, name: str) -> str | None:
    """The format of the sparse matrix ``name`` in ``archive``, or None if stored dense."""
    if f"{name}_format" not in archive.files:
        return None
    found = archive[f"{name}_format"].item()
    return found.decode("ascii") if isinstance(found, bytes) else str(found)


def _sparse_parts(archive: np.lib.npyio.NpzFile, name: str, kind: str) -> list[str]:
    """The arrays a sparse matrix ``name`` of format ``kind`` is stored as."""
    if kind == "coo" and f"{name}_coords" in archive.files:
        return ["data", "shape", "coords"]
    return ["data", "shape", *SPARSE_PARTS[kind]]


def _missing(archive: np.lib.npyio.NpzFile, name: str) -> str | None:
    """Why ``archive`` holds no matrix ``name`` in the format, or None if it does."""
    if name in archive.files:
        return None
    kind = _sparse_format(archive, name)
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


def _open(path: str | os.PathLike | None) -> np.lib.npyio.NpzFile:
    """The archive at ``path``; ``ParameterError("path", ...)`` when it is unset, missing or
    no ``.npz`` archive."""
    if path is None:
        raise ParameterError(
            "path", "the file family needs path= an .npz archive of prior, transition, emission"
        )
    if not os.path.exists(path):
        raise ParameterError("path", f"the file family's path {str(path)!r} does not exist")
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        # A folder, an unreadable file, or one that is no archive (numpy's errors differ).
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


def _read_size(path: str | os.PathLike | None) -> int:
    """The number of states of the archive at ``path``, from the prior's shape;
    ``ParameterError("path", ...)`` when it is unset, missing, unreadable or lacks an array."""
    with _open(path) as archive:
        for name in ARRAYS:
            why = _missing(archive, name)
            if why is not None:
                raise ParameterError("path", f"{str(path)!r} {why}")
        if "prior" not in archive.files:
            return int(archive["prior_shape"][-1])
        shape = archive["prior"].shape
    if len(shape) != 1:
        raise ParameterError(
            "path", f"{str(path)!r}: prior has shape {shape}; it must be (n_states,)"
        )
    return shape[0]


def size(*, path: str | None = None) -> int:
    """The number of states of the HMM stored at ``path``, from the prior's shape (the
    matrices are not read)."""
    return _read_size(path)


def check(n_states: int, *, path: str | None = None) -> None:
    """Raise ``ParameterError`` unless ``path`` is an archive of the format holding an HMM of
    ``n_states`` states. Cheap: only the prior is read, not the matrices."""
    held = _read_size(path)
    if held != n_states:
        raise ParameterError(
            "n_states", f"{str(path)!r} holds an HMM of {held} states, not n_states={n_states}"
        )


def _matrix(archive: np.lib.npyio.NpzFile, name: str):
    """The array ``name``: dense, or the scipy.sparse array its parts make."""
    kind = _sparse_format(archive, name)
    if kind is None:
        return archive[name]
    part = {key: archive[f"{name}_{key}"] for key in _sparse_parts(archive, name, kind)}
    shape = tuple(int(k) for k in part["shape"])
    if kind == "coo":
        coords = part["coords"] if "coords" in part else (part["row"], part["col"])
        return sp.coo_array((part["data"], tuple(coords)), shape=shape)
    if kind == "dia":
        return sp.dia_array((part["data"], part["offsets"]), shape=shape)
    cls = {"csr": sp.csr_array, "csc": sp.csc_array, "bsr": sp.bsr_array}[kind]
    return cls((part["data"], part["indices"], part["indptr"]), shape=shape)


def build(n_states: int, seed: int = 0, *, path: str | None = None) -> HMM:
    """The HMM stored at ``path`` (see the module docstring; ``seed`` is ignored)."""
    check(n_states, path=path)
    with np.load(path, allow_pickle=False) as archive:
        prior, transition, emission = (_matrix(archive, name) for name in ARRAYS)
    if sp.issparse(prior) and (prior.ndim == 1 or prior.shape[0] == 1):
        prior = prior.toarray().ravel()
    return HMM(prior, transition, emission)


def save(path: str | os.PathLike, prior, transition, emission, *, compressed: bool = False) -> None:
    """Write an HMM's arrays to ``path`` in the format (``numpy.savez`` adds ``.npz`` to a
    name without it): dense arrays under their names, ``scipy.sparse`` matrices as their
    parts (CSR, CSC, BSR, COO and DIA as they are, other formats as CSR). ``compressed``
    zips the arrays: a smaller file, slower to read."""
    arrays = {}
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
