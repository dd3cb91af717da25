"""``fit``: Baum-Welch EM from a given model, its E-step exact or approximate, and its history.

The layers stay apart: the inputs are checked and read here once (``_sequences``, the
``_check_...`` validators), each iteration is ``em.e_step`` then ``em.m_step``, and the loop
records what happened (``History``); nothing is printed or logged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pipeline import methods
from pipeline.hmm import HMM
from pipeline.inference import filtering
from pipeline.learning.em import by_length, e_step, evidence, m_step
from pipeline.learning.emissions import Categorical, Emission, read_symbols
from pipeline.learning.entries import entries


class History(NamedTuple):
    """How an EM run went, one entry per iteration for the K it ran (hmmlearn's
    ``ConvergenceMonitor.history``, with time and held-out data beside).

    log_likelihood : ndarray, shape (K,)
        ``log P(o)`` of the training sequences (summed) under the parameters iteration ``k``
        started from, as its E-step computed it: under the approximation when there is one.
        ``log_likelihood[0]`` scores the initial model.
    held_out : ndarray, shape (K,), or None
        ``log P(o)`` of the held-out sequences (summed) under the full model iteration ``k``
        made (its M-step's), exactly (``pipeline.inference.filtering``): ``held_out[-1]``
        scores the fitted model. ``-inf`` where it rules a held-out sequence out. None
        without held-out sequences.
    e_step_seconds : ndarray, shape (K,)
        Wall time of iteration ``k``'s E-step: building the approximation from the current
        parameters (if any) and smoothing every training sequence.
    m_step_seconds : ndarray, shape (K,)
        Wall time of iteration ``k``'s M-step.
    converged : bool
        True when the run stopped because an iteration's ``log_likelihood`` was less than
        ``tolerance`` above the one before (hmmlearn's rule: a fall stops it too); False
        when the iterations ran out first.
    """

    log_likelihood: np.ndarray
    held_out: np.ndarray | None
    e_step_seconds: np.ndarray
    m_step_seconds: np.ndarray
    converged: bool


class Fit(NamedTuple):
    """The result of ``fit``.

    hmm : HMM
        The fitted model, in the formats it was given in. With an ``Emission`` model its
        emission matrix is a one-symbol placeholder of ones (n_states, 1).
    emission : Emission
        The fitted emission model: ``Categorical(hmm.emission)`` for symbols.
    history : History
    """

    hmm: HMM
    emission: Emission
    history: History


def _check_iterations(iterations) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int | np.integer):
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
    if iterations < 1:
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")


def _check_tolerance(tolerance) -> None:
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float | np.number):
        raise ValueError(f"tolerance must be a number >= 0, got {tolerance!r}")
    if not tolerance >= 0:  # NaN too
        raise ValueError(f"tolerance must be a number >= 0, got {tolerance!r}")


def _check_pseudocount(pseudocount, emission: Emission | None) -> None:
    if isinstance(pseudocount, bool) or not isinstance(pseudocount, int | float | np.number):
        raise ValueError(f"pseudocount must be a number >= 0, got {pseudocount!r}")
    if not 0 <= pseudocount < np.inf:  # NaN too
        raise ValueError(f"pseudocount must be a number >= 0, got {pseudocount!r}")
    if pseudocount and emission is not None:
        raise ValueError(
            f"pseudocount={pseudocount!r} smooths the symbols of hmm.emission, and an emission "
            "model learns in its own m_step; allowed: pseudocount=0 with emission="
        )


def _check_approximation(approximation, setting) -> None:
    if approximation is None:
        if setting is not None:
            raise ValueError(
                f"setting={setting!r} is given without an approximation; allowed: setting=None "
                f"for exact EM, or approximation= one of {', '.join(methods.METHODS)}"
            )
        return
    if not isinstance(approximation, str):
        raise ValueError(
            f"approximation must be a method name or None, got {approximation!r}; allowed: "
            + ", ".join(methods.METHODS)
        )
    try:
        methods.METHODS.lookup(approximation)
    except ValueError as error:  # an unknown name, or a plug-in that cannot be used
        raise ValueError(f"approximation: {error}") from None
    try:
        methods.check_setting(approximation, setting)
    except ValueError as error:
        raise ValueError(f"setting of {error}") from None


def _sequences(
    name: str, given, read: Callable[[object, str], np.ndarray]
) -> tuple[list[np.ndarray], list[str]]:
    """The sequences of ``given`` (one (T,), a batch (B, T), or a list or tuple of sequences,
    each read by ``read(sequence, its name)``) and their names for messages."""
    if isinstance(given, list | tuple) and any(np.ndim(item) > 0 for item in given):
        items = list(given)
        names = [f"{name}[{b}]" for b in range(len(items))]
    else:
        array = np.asarray(given)
        if array.ndim not in (1, 2):
            raise ValueError(
                f"{name} has shape {array.shape}; allowed: one sequence (T,), a batch (B, T) "
                "or a list of sequences"
            )
        items = [array] if array.ndim == 1 else list(array)
        names = [name] if array.ndim == 1 else [f"{name}[{b}]" for b in range(len(items))]
    if not items:
        raise ValueError(f"{name} holds no sequence; allowed: at least one")
    return [read(item, where) for item, where in zip(items, names, strict=True)], names


def _check_emission(emission: Emission, sequence: np.ndarray, n_states: int) -> None:
    """One line unless ``emission`` gives (T, n_states) log-likelihoods for ``sequence``."""
    shape = np.shape(emission.log_likelihoods(sequence))
    if shape != (len(sequence), n_states):
        raise ValueError(
            f"emission.log_likelihoods gives shape {shape} for a sequence of {len(sequence)} "
            f"steps; a model of {n_states} states needs ({len(sequence)}, {n_states})"
        )


def _check_scored(
    log_likelihood: np.ndarray, names: list[str], iteration: int, approximation, setting, symbols
) -> None:
    """One line naming the first training sequence the E-step's model rules out."""
    ruled_out = np.flatnonzero(log_likelihood == -np.inf)
    if ruled_out.size == 0:
        return
    first, count = names[int(ruled_out[0])], f"{ruled_out.size} of {log_likelihood.size}"
    if approximation is None:
        raise ValueError(
            f"{first} has probability zero under the model ({count} sequences); allowed: "
            "sequences the initial model can emit"
        )
    named = f"{approximation} ({methods.METHODS.lookup(approximation).SETTING}={setting})"
    why, fix = (
        (
            "; top-p and top-k truncate the emissions too",
            f"approximation='{approximation}_transitions' truncates the transitions alone"
            if approximation in ("topp", "topk")
            else "emission=Categorical(hmm.emission) keeps the emissions exact",
        )
        if symbols
        else ("", "a setting that keeps more")
    )
    raise ValueError(
        f"{first} has probability zero under the {named} approximation of iteration "
        f"{iteration}'s parameters ({count} sequences{why}); allowed: an approximation that "
        f"scores every sequence: {fix}"
    )


def _score(hmm: HMM, emission: Emission | None, sequences: list[np.ndarray]) -> float:
    """``log P(o)`` of ``sequences`` under the exact ``hmm``, summed."""
    return float(
        sum(
            np.sum(
                filtering(hmm, **evidence(emission, sequences, members), history=False).log_evidence
            )
            for members in by_length(sequences)
        )
    )


def fit(
    hmm: HMM,
    observations,
    *,
    emission: Emission | None = None,
    approximation: str | None = None,
    setting=None,
    iterations: int = 100,
    tolerance: float = 1e-2,
    held_out=None,
    pseudocount: float = 0.0,
) -> Fit:
    """Baum-Welch EM from ``hmm``: the prior, the transitions and the emissions learnt from
    the training sequences, each E-step exact or by ``approximation``.

    Parameters
    ----------
    hmm : HMM
        The initial model; its transition (and, for symbols, its emission) dense or CSR.
    observations : array_like, shape (T,) or (B, T), or a list or tuple of sequences
        The training sequences: one, a batch of one length, or any number of any lengths
        (each a 1-D array; a list also takes an ``Emission`` model's (T, ...) arrays). Symbols
        ``0..n_observations - 1`` of ``hmm.emission``, or -1 for a step that observed
        nothing; real numbers for ``Gaussian``.
    emission : Emission, optional
        None: categorical emissions, ``hmm.emission`` learnt by counts. Else the emission
        model to learn (``Gaussian``, ``Categorical`` or a subclass of ``Emission``), whose
        log-likelihoods the E-steps read; ``hmm.emission`` is then not read, and no
        approximation touches the emissions.
    approximation : str, optional
        A method of ``pipeline.methods.METHODS`` (``topp``, ``topk``, ``lowrank``,
        ``banded_lowrank`` or a plug-in) whose approximation of the current model, built
        every iteration, the E-step smooths; None for exact EM.
    setting : number, optional
        The method's setting (``p``, ``k``, ``r``); only with ``approximation``.
    iterations : int >= 1
        The most EM iterations to run.
    tolerance : float >= 0
        Stop once an iteration's training log-likelihood is less than this above the one
        before (summed over the sequences, as hmmlearn's ``tol``).
    held_out : array_like or list, optional
        Sequences (as ``observations``) scored exactly after every M-step
        (``History.held_out``).
    pseudocount : float >= 0
        Added to every emission count of symbols (``hmm.emission``) at each M-step: the
        maximum a posteriori estimate under a symmetric Dirichlet(1 + pseudocount) prior on
        each emission row (hmmlearn's ``emissionprob_prior``). With 0, the maximum-likelihood
        one, a symbol the training sequences never show gets probability zero in every state
        after the first iteration, and a held-out sequence that shows it scores ``-inf``.
        Only for symbols (``emission=None``).

    Returns
    -------
    Fit
        The fitted model, its emission model and the run's ``History``.

    Raises ``ValueError`` in one line naming the argument for anything it cannot learn from:
    shapes, symbols out of range, NaN, ``iterations < 1``, a negative ``pseudocount``, an
    unknown method or setting, a structured or low-rank matrix, and a training sequence the
    E-step's model rules out.
    """
    if not isinstance(hmm, HMM):
        raise TypeError(f"hmm must be a pipeline.models.HMM, got {type(hmm).__name__}")
    if emission is not None and not isinstance(emission, Emission):
        raise TypeError(
            "emission must be None (symbols of hmm.emission) or an Emission (Categorical, "
            f"Gaussian or a subclass), got {type(emission).__name__}"
        )
    _check_iterations(iterations)
    _check_tolerance(tolerance)
    _check_approximation(approximation, setting)
    _check_pseudocount(pseudocount, emission)
    entries(hmm.transition, "hmm.transition")
    symbols = emission is None
    if emission is None:
        entries(hmm.emission, "hmm.emission")
        m = hmm.n_observations

        def read(sequence, name: str) -> np.ndarray:
            return read_symbols(sequence, m, name)

    else:
        read = emission.read
        hmm = HMM(hmm.prior, hmm.transition, np.ones((hmm.n_states, 1)))
    sequences, names = _sequences("observations", observations, read)
    if emission is not None:
        _check_emission(emission, sequences[0], hmm.n_states)
    testing = None if held_out is None else _sequences("held_out", held_out, read)[0]
    steps = np.concatenate(sequences)
    scores, held, e_seconds, m_seconds = [], [], [], []
    converged = False
    for iteration in range(1, int(iterations) + 1):
        start = time.perf_counter()
        statistics = e_step(
            hmm, sequences, emission=emission, method=approximation, setting=setting
        )
        e_seconds.append(time.perf_counter() - start)
        _check_scored(statistics.log_likelihood, names, iteration, approximation, setting, symbols)
        start = time.perf_counter()
        hmm, emission = m_step(hmm, statistics, steps, emission=emission, pseudocount=pseudocount)
        m_seconds.append(time.perf_counter() - start)
        scores.append(float(statistics.log_likelihood.sum()))
        if testing is not None:
            held.append(_score(hmm, emission, testing))
        if len(scores) > 1 and scores[-1] - scores[-2] < tolerance:
            converged = True
            break
    history = History(
        np.array(scores),
        None if testing is None else np.array(held),
        np.array(e_seconds),
        np.array(m_seconds),
        converged,
    )
    return Fit(hmm, Categorical(hmm.emission) if emission is None else emission, history)
