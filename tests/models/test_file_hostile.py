"""Hostile model files: every malformed archive ends in a one-line error or a correct model.

Valid archives of small random HMMs, in every format the ``file`` family reads, are damaged
one way each (an index, a pointer, a shape or a dtype changed, an array cut short or
removed, the file truncated or a byte flipped) and handed to the loader, and to the sweep's
checks before a cluster starts, which must end in a one-line ``ParameterError`` /
``ConfigError`` or a model whose inference agrees with a plain numpy recursion over its
dense matrices: never a crash, a hang or a silent NaN.
"""

import os
import stat
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.inference import filtering
from pipeline.models import HMM, ParameterError
from pipeline.models import file as file_family
from pipeline.operators import toarray
from pipeline.sweep import run
from pipeline.sweep.config import register
from pipeline.sweep.main import check_overrides
from pipeline.testing.random_models import random_stochastic

FORMATS = ("dense", "csr", "csc", "bsr", "coo", "dia")
DTYPES = ("float32", "complex128", "int8", "int64", "uint64", "bool", "<U3", "float16")
VALUES = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([-1, 0, 1, 2**31, -(2**31) - 1, 5 * 10**7]),
    st.sampled_from([np.nan, np.inf, -np.inf, -0.5, 1e300]),
)


@st.composite
def archives(draw):
    """(arrays of a valid archive, n_states): a random HMM with each matrix in a random
    format of the ones the file family reads."""
    n, m = draw(st.integers(2, 6)), draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    prior = random_stochastic(rng, 1, n)[0]
    transition = random_stochastic(rng, n, n, zeros=0.4)
    emission = random_stochastic(rng, n, m, zeros=0.3)
    kinds = draw(st.sampled_from(FORMATS)), draw(st.sampled_from(FORMATS))
    matrices = [
        matrix if kind == "dense" else sp.csr_array(matrix).asformat(kind)
        for matrix, kind in zip((transition, emission), kinds, strict=True)
    ]
    arrays = {}
    for name, matrix in zip(file_family.ARRAYS, (prior, *matrices), strict=True):
        if not sp.issparse(matrix):
            arrays[name] = np.asarray(matrix)
            continue
        arrays[f"{name}_data"] = matrix.data
        arrays[f"{name}_shape"] = np.array(matrix.shape)
        arrays[f"{name}_format"] = np.array(matrix.format)
        for part in file_family.SPARSE_PARTS[matrix.format]:
            arrays[f"{name}_{part}"] = getattr(matrix, part)
    return arrays, n


@st.composite
def damaged(draw):
    """A valid archive with one array damaged, and how (for the failure message)."""
    arrays, n = draw(archives())
    key = draw(st.sampled_from(sorted(arrays)))
    values = arrays[key]
    how = draw(
        st.sampled_from(["entry", "shift", "dtype", "cut", "grow", "reshape", "drop", "none"])
    )
    if how == "entry" and values.size and values.dtype.kind in "iuf":
        at = draw(st.integers(0, values.size - 1))
        value = draw(VALUES)
        changed = values.astype(np.float64 if isinstance(value, float) else values.dtype)
        try:
            changed.reshape(-1)[at] = value
        except OverflowError:
            changed = changed.astype(np.int64 if abs(value) < 2**63 else np.float64)
            changed.reshape(-1)[at] = value
        arrays[key] = changed
    elif how == "shift" and values.dtype.kind in "iu":
        arrays[key] = values.astype(np.int64) + draw(st.sampled_from([-3, -1, 1, 1000, 5 * 10**7]))
    elif how == "dtype" and values.dtype.kind != "U":
        arrays[key] = values.astype(draw(st.sampled_from(DTYPES)))
    elif how == "cut":
        arrays[key] = values.reshape(-1)[: draw(st.integers(0, max(values.size - 1, 0)))]
    elif how == "grow":
        arrays[key] = np.concatenate([values.reshape(-1), values.reshape(-1)[:1].repeat(3)])
    elif how == "reshape":
        arrays[key] = values.reshape(1, -1, 1)
    elif how == "drop":
        del arrays[key]
    return arrays, n, f"{how} {key}"


def _save(path, arrays) -> None:
    np.savez(path, **arrays)


def _dense_forward(hmm: HMM, observations) -> tuple[np.ndarray, float]:
    """The filtered beliefs and evidence by a plain numpy recursion over the dense matrices."""
    T, E = toarray(hmm.transition), toarray(hmm.emission)
    belief, log_evidence, beliefs = hmm.prior.copy(), 0.0, []
    for t, o in enumerate(observations):
        if t:
            belief = belief @ T
        if o >= 0:
            joint = belief * E[:, o]
            if joint.sum() > 0:
                log_evidence += np.log(joint.sum())
                belief = joint / joint.sum()
            else:
                log_evidence = -np.inf
        beliefs.append(belief)
    return np.array(beliefs), log_evidence


def _assert_correct_or_one_line(path, n: int, how: str) -> HMM | None:
    """``build`` either refuses in one line (at ``path`` or ``n_states``) or gives a model
    whose filtering agrees with the dense recursion; returns the model when it gave one."""
    try:
        hmm = file_family.build(n, path=str(path))
    except ParameterError as error:
        assert "\n" not in str(error) and error.parameter in ("path", "n_states"), (how, error)
        return None
    observations = np.random.default_rng(0).integers(-1, hmm.n_observations, size=12)
    result = filtering(hmm, observations)
    beliefs, log_evidence = _dense_forward(hmm, observations)
    assert np.isfinite(result.beliefs).all(), how
    np.testing.assert_allclose(result.beliefs.sum(axis=1), 1.0, atol=1e-9, err_msg=how)
    np.testing.assert_allclose(result.beliefs, beliefs, atol=1e-12, err_msg=how)
    assert result.log_evidence == pytest.approx(log_evidence, rel=1e-10, abs=1e-12), how
    return hmm


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged())
def test_a_damaged_array_is_refused_in_one_line_or_read_correctly(case, tmp_path):
    arrays, n, how = case
    path = tmp_path / "model.npz"
    _save(path, arrays)
    _assert_correct_or_one_line(path, n, how)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=archives(), data=st.data())
def test_a_truncated_or_flipped_file_is_refused_in_one_line_or_read_correctly(case, data, tmp_path):
    arrays, n = case
    path = tmp_path / "model.npz"
    _save(path, arrays)
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    if data.draw(st.booleans()):
        raw = raw[:at]
        how = f"truncated at {at}"
    else:
        raw[at] ^= data.draw(st.integers(1, 255))
        how = f"byte {at} flipped"
    path.write_bytes(bytes(raw))
    _assert_correct_or_one_line(path, n, how)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged())
def test_the_sweep_refuses_a_damaged_file_before_any_cluster_starts(case, tmp_path):
    """The sweep's own checks (``check_overrides``, what ``python -m pipeline.sweep`` runs
    before Hydra and any cluster) read the whole model: a file the loader refuses is refused
    there in one line naming ``methods.model.file.path`` (or ``methods.grid.n_states``), and
    nothing is written."""
    arrays, n, how = case
    path = tmp_path / "model.npz"
    _save(path, arrays)
    store = tmp_path / "store.zarr"
    register()
    problem = check_overrides(
        [
            "experiment=file",
            f"methods.model.file.path={path}",
            f"store={store}",
            "methods.grid.seeds=[0]",
        ]
    )
    try:
        file_family.build(n, path=str(path))
        loads = True
    except ParameterError:
        loads = False
    if loads:
        assert problem is None, (how, problem)
    else:
        assert problem is not None and "\n" not in problem, how
        assert problem.startswith(("methods.model.file.path: ", "methods.grid.n_states: ")), (
            how,
            problem,
        )
    assert not store.exists()


@pytest.mark.parametrize("kind", ["csr", "csc", "bsr"])
@pytest.mark.parametrize("shift", [1000, 5 * 10**7])
def test_shifted_indices_are_refused_in_one_line(kind, shift, tmp_path):
    """The probe's archives: every column (row for CSC) index shifted past the shape, which
    made the compiled kernels read and write out of bounds, crash or abort."""
    rng = np.random.default_rng(1)
    transition = sp.csr_array(random_stochastic(rng, 12, 12, zeros=0.5)).asformat(kind)
    path = tmp_path / f"{kind}.npz"
    file_family.save(path, random_stochastic(rng, 1, 12)[0], transition, np.full((12, 3), 1 / 3))
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["transition_indices"] = arrays["transition_indices"].astype(np.int64) + shift
    np.savez(path, **arrays)
    with pytest.raises(ParameterError, match=r"transition indices\[0\] = \d+ is out of range"):
        file_family.build(12, path=str(path))
    register()
    problem = check_overrides(["experiment=file", f"methods.model.file.path={path}"])
    assert problem.startswith("methods.model.file.path: ") and "out of range" in problem
    bad = sp.csr_array(transition)
    bad.indices = bad.indices + shift  # the same matrix built in Python
    with pytest.raises(ValueError, match=r"^transition indices\[0\] = \d+ is out of range"):
        HMM(np.full(12, 1 / 12), bad, np.full((12, 3), 1 / 3))


def _with(matrix, **parts):
    """``matrix`` with some of its arrays replaced after construction, as a user may."""
    for name, value in parts.items():
        setattr(matrix, name, value)
    return matrix


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: sp.csr_array((np.ones(2), np.array([0, 1]), np.array([0, 2, 1, 2])), (3, 3)),
            r"^transition indptr decreases from 2 to 1 at 2",
        ),
        (
            lambda: _with(sp.csc_array(np.eye(3)), indptr=np.array([0, 1, 2])),
            r"^transition indptr has 3 entries; a CSC matrix of shape \(3, 3\) has 4",
        ),
        (
            lambda: _with(sp.csr_array(np.eye(3)), indices=np.array([0.0, 1.0, 2.0])),
            r"^transition indices is float64 of shape \(3,\); allowed: a 1-D integer array",
        ),
        (
            lambda: _with(sp.coo_array(np.eye(3)), coords=(np.arange(3), np.array([0, 1, -3]))),
            r"^transition coords\[1\]\[2\] = -3 is out of range; allowed: a column in 0..2",
        ),
        (
            lambda: np.eye(3, dtype=complex),
            r"^transition has complex128 entries; allowed: real numbers",
        ),
        (
            lambda: sp.csr_array(np.eye(3, dtype=complex)),
            r"^transition has complex128 entries; allowed: real numbers",
        ),
    ],
)
def test_malformed_matrices_from_python_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        HMM(np.full(3, 1 / 3), make(), np.eye(3))


@pytest.mark.parametrize("special", ["fifo", "device", "directory"])
def test_a_path_that_is_no_regular_file_is_refused_without_reading(special, tmp_path):
    """A FIFO would block the reader forever, a device never end: refused from their mode."""
    path = {"fifo": tmp_path / "pipe", "device": "/dev/zero", "directory": tmp_path}[special]
    if special == "fifo":
        os.mkfifo(path)
        assert stat.S_ISFIFO(os.stat(path).st_mode)
    for call in (file_family.size, file_family.model_bytes, file_family.fingerprint):
        with pytest.raises(ParameterError, match="is not a regular file"):
            call(path=str(path))


def _forged(path):
    """A 4-state archive whose transition's header declares 2^50 values (in the header's
    padding) while the file holds 16: a valid zip, its checksums match."""
    file_family.save(path, np.full(4, 0.25), np.full((4, 4), 0.25), np.full((4, 2), 0.5))
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    header = b"'shape': (4, 4), }" + b" " * 20
    assert members["transition.npy"].count(header) == 1
    forged = b"'shape': (1048576, 1073741824), }".ljust(len(header))
    members["transition.npy"] = members["transition.npy"].replace(header, forged)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _bad_crc(path):
    """A 4-state archive with the last byte of the transition's values changed in place, its
    CRC-32 left as it was."""
    file_family.save(path, np.full(4, 0.25), np.full((4, 4), 0.25), np.full((4, 2), 0.5))
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo("transition.npy")
    raw = bytearray(path.read_bytes())
    at = member.header_offset + 26  # the local header's name and extra-field lengths
    start = at + 4 + sum(struct.unpack("<HH", raw[at : at + 4]))
    raw[start + member.compress_size - 1] ^= 0x01
    path.write_bytes(bytes(raw))
    return path


def _object_dtype(path):
    """A 4-state archive whose transition is an array of Python objects (pickled)."""
    np.savez(
        path,
        prior=np.full(4, 0.25),
        transition=np.full((4, 4), 0.25).astype(object),
        emission=np.full((4, 2), 0.5),
    )
    return path


HEADERS_READ_FIRST = {
    "object": (_object_dtype, "transition holds Python objects; allowed: numeric arrays"),
    "forged": (
        _forged,
        "transition declares shape (1048576, 1073741824) of float64 (9,007,199,254,740,992 "
        "bytes) but holds 128; the archive is truncated or damaged",
    ),
    "crc": (
        _bad_crc,
        "transition is no readable .npy array (Bad CRC-32 for file 'transition.npy')",
    ),
}
"""Archives whose damage the sweep's memory estimate met first (it reads every header before
``verify`` reads the values): the maker of each, and what the refusal says about it."""


def test_an_array_declaring_more_than_the_file_holds_is_refused_before_allocating(tmp_path):
    """A header that declares 2^50 values in a file of a few hundred bytes (a forged or cut
    archive) is refused from the header, before numpy allocates what it declares."""
    path = _forged(tmp_path / "forged.npz")
    with pytest.raises(ParameterError, match=r"transition declares shape .* the archive is"):
        file_family.build(4, path=str(path))


@pytest.mark.parametrize("case", sorted(HEADERS_READ_FIRST))
def test_damage_the_memory_estimate_reads_first_is_one_line_naming_the_path(case, tmp_path):
    """An object array, a forged header or a bad CRC in the transition gave a 32-line
    traceback: the sweep's memory estimate read the headers before ``verify`` named the file.
    The family's cheap ``check`` reads every header the estimate reads, so the config check
    names ``methods.model.file.path`` first."""
    make, why = HEADERS_READ_FIRST[case]
    path = make(tmp_path / "model.npz")
    store = tmp_path / "s.zarr"
    register()
    problem = check_overrides(
        ["experiment=file", f"methods.model.file.path={path}", f"store={store}"]
    )
    assert problem == f"methods.model.file.path: {str(path)!r}: {why}"
    assert not store.exists()


def test_damage_the_memory_estimate_reads_first_exits_2_from_the_command_line(tmp_path):
    """The command line's representative: one line on stderr, exit status 2, no traceback."""
    path = _bad_crc(tmp_path / "model.npz")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.sweep",
            "experiment=file",
            f"methods.model.file.path={path}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr
        == f"error: methods.model.file.path: {str(path)!r}: {HEADERS_READ_FIRST['crc'][1]}\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"]


def test_a_model_file_replaced_before_a_resume_is_refused(client, tmp_path):
    """The store's identity holds the file's SHA-256: a file replaced between a run and its
    resume (same path, same size of model) is refused in one line, not mixed in."""
    rng = np.random.default_rng(3)
    path, store = tmp_path / "model.npz", tmp_path / "s.zarr"
    arrays = [random_stochastic(rng, 1, 6)[0], random_stochastic(rng, 6, 6), np.eye(6)]
    file_family.save(path, *arrays)
    overrides = [
        "experiment=file",
        f"methods.model.file.path={path}",
        f"store={store}",
        "methods.grid.methods={topp:[0.9]}",
        "methods.grid.seeds=[0]",
        "methods.grid.modes=[predict]",
        "methods.grid.horizon=3",
    ]
    assert bool(run(overrides, client=client).done.all())
    register()
    assert check_overrides(overrides) is None  # the same file resumes
    arrays[1] = random_stochastic(rng, 6, 6)
    file_family.save(path, *arrays)
    problem = check_overrides(overrides)
    assert problem.startswith(f"store: {store} holds a different sweep: contents is "), problem
    assert "\n" not in problem and "choose another store= or pass overwrite=true" in problem
