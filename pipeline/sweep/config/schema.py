"""The sweep's structured config: the ``SweepConfig`` schema Hydra composes
``conf/config.yaml`` over (OmegaConf checks types and rejects unknown keys; the
numbers' ranges are declared on the fields, ``ranged``, and checked by
``validation.check_ranges``; the kinds check the rest)."""

from __future__ import annotations

import functools
import re
import types
import typing
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from omegaconf import MISSING

from pipeline.corpus import CORPORA
from pipeline.coupled.model import OBSERVE
from pipeline.hmmlm.clusters import CLUSTERINGS
from pipeline.hmmlm.feature_maps import FEATURE_MAPS
from pipeline.hmmlm.parameters import PARAMETERISATIONS
from pipeline.kinds import KINDS
from pipeline.kinds.methods.results import MODES
from pipeline.methods import METHODS
from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.models import FAMILIES, family_parameters
from pipeline.sweep.config.reference import parameter_docs
from pipeline.sweep.config.validation import choices, ranged
from pipeline.sweep.kind import installed


def _shipped() -> Path:
    """The folder holding the configs the project ships, ``conf/`` and ``dask_cluster.yaml``:
    the package's own folder where it is installed from a wheel (the build copies them there,
    ``setup.py``), else the repository's top level (a checkout, installed editable or not)."""
    package = Path(__file__).resolve().parents[2]
    return package if (package / "conf" / "config.yaml").is_file() else package.parent


_SHIPPED = _shipped()
CONFIG_DIR = _SHIPPED / "conf"
"""Hydra's config folder as the project ships it (``conf/``): ``config.yaml``, the experiments
and the relational specs."""
SHIPPED_CLUSTERS = _SHIPPED / "dask_cluster.yaml"
"""The cluster entries the project ships (``dask_cluster.yaml``); one in the working directory
replaces them (``clusters.cluster_file``)."""
DEFAULT_MODES = ("predict", "filter")
"""The modes of a grid that names none (``pipeline.kinds.methods.results.MODES`` lists every
mode)."""


def group_defaults() -> dict[str, str]:
    """The config groups' defaults of Hydra's ``config.yaml``: group -> the option it picks
    when the command line names none (``cluster`` -> ``local``)."""
    config = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
    return {
        group: option
        for entry in config["defaults"]
        if isinstance(entry, dict)
        for group, option in entry.items()
    }


def _cluster_names() -> str:
    names = ", ".join(yaml.safe_load(SHIPPED_CLUSTERS.read_text()))
    return f"an entry of dask_cluster.yaml (the package's: {names}; or one of your own)"


def _methods() -> str:
    return (
        f"a mapping of methods ({', '.join(METHODS.names())}) to non-empty lists of their settings"
    )


@dataclass
class GridConfig:
    """The experiment grid; every list is one dimension of the results."""

    families: list[str] = choices(lambda: ["bell", "uniform", "dirichlet"], FAMILIES.names)
    """Model families to sweep: built-ins (``pipeline.models``) and installed plug-ins."""
    n_states: Any = choices(
        None,
        "a list of integers >= 2, or a mapping of families to such lists; null only for families "
        "whose parameters fix their size",
    )
    """Sizes: a list for every family, or a mapping family -> list (required, except for a
    family whose parameters fix its size, a model file's). Typed ``Any``: OmegaConf cannot
    merge a mapping into a list node."""
    methods: Any = choices(None, _methods)
    """Approximations: a mapping method -> list of its settings, such as ``{topp: [0.5, 0.9],
    topk: [5, 20]}`` (``pipeline.methods.METHODS``); typed ``Any``: a mapping of lists."""
    horizon: int = ranged(50, least=1)
    """Steps after the prior: beliefs and errors are stored for t = 0..horizon."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Random seeds: of a seeded family's model and of the sampled observations."""
    modes: list[str] = choices(lambda: list(DEFAULT_MODES), MODES)
    """Inference modes: ``predict`` (no observations), ``filter`` (observed paths), ``smooth``
    (every step's posterior given the whole path) and ``decode`` (the Viterbi path)."""
    observe_every: int = ranged(5, least=1)
    """Filtering observes a symbol at every step t with t % observe_every == 0."""


@dataclass
class TimingConfig:
    repeats: int = ranged(3, least=1)
    """Least number of timing rounds per model, mode and seed: each round runs the exact
    reference once and every approximation of its cells once, in alternating order; min,
    median and max over rounds are stored."""
    min_seconds: float = ranged(0.2, least=0)
    """Rounds are repeated until they took this long in all (at most ``max_repeats``): short
    runs of small models need many repeats before a median means anything."""
    max_repeats: int = ranged(1000, least="repeats")
    """The most rounds per model, mode and seed, however short the runs."""
    blas_threads: int = ranged(1, least=1)
    """BLAS threads in every timed run (fixed with threadpoolctl and recorded)."""
    enabled: bool = True
    """Time the runs; false: accuracy only (each cell runs its approximation once and stores
    no runtimes: NaN, its ``missing`` attribute says why), for many cells."""


def _optional(hint):
    """``X | None`` as ``Optional[X]``, which every OmegaConf 2.x understands."""
    if isinstance(hint, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return Optional[inner]  # noqa: UP045 - OmegaConf needs typing.Optional
    return hint


def _parameter_doc(family: str, name: str) -> dict[str, str]:
    """The field metadata of ``family``'s parameter ``name`` from its ``build`` docstring
    (``reference.parameter_docs``); an entry "As in the ``kernel`` family" reads that
    family's."""
    metadata = parameter_docs(FAMILIES[family].build)[name]
    other = re.fullmatch(r"As in the ``(\w+)`` family\.?", metadata["doc"])
    return _parameter_doc(other[1], name) if other else metadata


def _parameters_dataclass(family: str) -> type:
    """A dataclass of ``family``'s keyword parameters, from its ``build`` signature, each
    field's meaning from its docstring."""
    hints = typing.get_type_hints(FAMILIES[family].build)
    fields = [
        (
            name,
            _optional(hints.get(name, Any)),
            field(default=default, metadata=_parameter_doc(family, name)),
        )
        for name, default in family_parameters(family).items()
    ]
    return make_dataclass(f"{family.capitalize()}Parameters", fields)


@functools.cache
def sweep_config() -> type:
    """``SweepConfig`` with the section of every sweep kind that has one (the built-ins'
    ``training``, ``coupled``, ``kernel_features``, and plug-ins'): its ``SECTION`` typed by
    its ``CONFIG`` dataclass, null unless the config's ``kind`` is that kind. Made once, when
    the schema is first needed (a plug-in kind is imported then)."""
    sections = []
    for name, kind in installed().items():
        if kind.SECTION is not None:
            doc = f"The settings of a ``kind={name}`` sweep (null for any other kind)."
            optional = _optional(kind.CONFIG | None)
            sections.append((kind.SECTION, optional, field(default=None, metadata={"doc": doc})))
    return make_dataclass("SweepConfig", sections, bases=(SweepConfig,))


@functools.cache
def model_config() -> type:
    """``model.<family>.<param>``: the keyword parameters of every model family, made once
    when the schema is first needed. A built-in's are typed, with their defaults; a plug-in
    family's section holds what the config sets (``{}``): the plug-in is imported only when
    a sweep uses it, and its ``build`` signature checks the keys then."""
    fields = []
    for family in FAMILIES.names():
        if family in BUILTIN_FAMILIES:
            cls = _parameters_dataclass(family)
            fields.append((family, cls, field(default_factory=cls)))
        else:
            doc = f"The keyword parameters of the plug-in family {family!r} (unset: its defaults)."
            fields.append(
                (family, dict[str, Any], field(default_factory=dict, metadata={"doc": doc}))
            )
    return make_dataclass("ModelConfig", fields)


@dataclass
class TrainingConfig:
    """A training sweep of HMM language models (the kernel HMMs of Chiu, Deng and Rush,
    with the blocked emissions, neural transitions and state dropout of Chiu and Rush 2020):
    each (n_states, parameterisation, seed) is a cell that trains one model
    (``pipeline.hmmlm``) and stores its validation and test perplexity
    (``pipeline.sweep.kinds.training``)."""

    n_states: list[int] = ranged(lambda: [256], least=2)
    """Hidden states of the trained models, one cell each (with ``clusters``, a multiple of
    the clusters)."""
    parameterisations: list[str] = choices(lambda: ["softmax"], f"a list of {PARAMETERISATIONS}")
    """``softmax``, ``neural`` (embeddings through a residual MLP, dot-product logits),
    ``kernel_<r>`` or ``banded_kernel_<r>`` (r states per feature)."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Seeds of each model's random start, its state dropout and a ``random`` word clustering,
    one cell each."""
    max_epochs: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Train at most this many epochs (null: 20)."""
    patience: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Stop after this many epochs in a row without a lower validation perplexity; null:
    train ``max_epochs`` epochs."""
    max_seconds: Optional[float] = ranged(None, least=0, above=True)  # noqa: UP045
    """Each cell's time budget: no epoch starts that would end past this many seconds of
    training (as long as the last epoch took); null: none."""
    clusters: int = ranged(0, least=0)
    """Word clusters C of the blocked emissions (each owns n_states / C states, which emit
    only its words); 0: no blocks, every state emits every word."""
    clustering: str = choices("exchange", CLUSTERINGS)
    """How the training words are clustered: ``exchange`` (Brown et al.'s class-bigram
    objective, by the exchange algorithm) or ``random`` (a random equal partition)."""
    state_dropout: float = ranged(0.0, least=0, most=1, below=True)
    """Fraction of each cluster's states dropped per batch (0: none); needs clusters > 0."""
    max_states: dict[str, int] = field(default_factory=lambda: {"softmax": 16384})
    """Per parameterisation, the most states it is trained at (one not named: every size).
    The softmax's n^2 logits, two Adam moments, gradient and best copy are about 5 n^2
    float32 numbers (20 GiB at 32768 states); a neural model's epoch grows as n^2 d."""
    batch: int = ranged(32, least=1)
    """Parallel streams the training tokens are cut into (and the held-out tokens, for
    evaluation); a batch is one segment of each."""
    length: int = ranged(64, least=1)
    """Tokens per segment; each stream's state is carried from one segment to the next."""
    n_tokens: Optional[int] = ranged(None, least=2)  # noqa: UP045
    """Vocabulary size: the ``n_tokens - 1`` most frequent words seen at least twice in the
    training part, then ``<unk>`` for every other; default all words seen twice."""
    train_chunks: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Train on the first this many ``length``-token chunks of the training part (default
    all)."""
    held_out_chunks: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Measure perplexity on the first this many ``length``-token chunks of the validation
    (and test) part (default all)."""
    learning_rate: float = ranged(0.05, least=0, above=True)
    """Adam's step size."""
    lr_decay: float = ranged(1.0, least=0, most=1, above=True)
    """After ``lr_patience`` epochs without a lower validation perplexity, restore the best
    epoch's parameters (Adam restarted) and multiply the learning rate by this; 1: keep the
    rate and the parameters."""
    lr_patience: int = ranged(1, least=1)
    """Epochs in a row without a lower validation perplexity before each ``lr_decay``."""
    clip: Optional[float] = ranged(5.0, least=0, above=True)  # noqa: UP045
    """The largest norm of a step's gradient (per token); null: no clipping."""
    dim: int = ranged(32, least=1)
    """Embedding dimension of the kernel and neural parameterisations."""
    delta: int = ranged(3, least=1)
    """Band of the banded kernels: ``|i - j| < delta``."""
    max_features: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """The kernels' features F at most: ``kernel_<r>`` has min(n_states / r, this); null:
    n_states / r."""
    grow: bool = False
    """Start each cell whose half is in ``n_states`` from that cell's trained model, every
    state split in two (the evidence unchanged), instead of a random start."""
    threads: int = ranged(1, least=1)
    """numba and BLAS threads of each cell (one per worker: ``cluster.n_workers`` x this
    should be the cores)."""
    corpus: Optional[str] = choices(  # noqa: UP045
        None, f"{', '.join(CORPORA)}, a text file's or folder's path, or null"
    )
    """``stdlib`` (the default: the standard library's English), ``austen`` (fetched once
    by ``python -m pipeline.corpus fetch austen``), or a text file or folder."""


@dataclass
class KernelFeaturesConfig:
    """How many random features a softmax needs (Chiu, Deng and Rush, Section 6): each
    (n_states, temperature, feature_map) is a cell that measures the TV between sampled
    softmax rows and kernel rows at every feature count
    (``pipeline.sweep.kinds.kernel_features``)."""

    n_states: list[int] = ranged(lambda: [256, 1024, 4096, 16384, 65536], least=2)
    """State counts n of the softmax rows, one cell each."""
    n_features: list[int] = ranged(lambda: [2**k for k in range(4, 13)], least=2)
    """Feature counts F (even): the first F features of one map of the largest count."""
    temperatures: list[float] = ranged(lambda: [0.5, 1.0, 2.0, 4.0], least=0, above=True)
    """The logits u.v have standard deviation 1 / temperature (lower: more separated)."""
    feature_maps: list[str] = choices(lambda: ["positive", "fourier"], FEATURE_MAPS)
    """Random feature maps, one cell each (``pipeline.hmmlm.feature_maps``): ``positive``,
    phi(u) = exp(Wu - |u|^2 / 2) (Chiu, Deng and Rush), or ``fourier``, random Fourier
    features."""
    dim: int = ranged(16, least=1)
    """Embedding dimension d."""
    rows: int = ranged(32, least=1)
    """Rows sampled per cell (every row up to that many states)."""
    seed: int = ranged(0, least=0)
    """Seed of the embeddings, the sampled rows and the feature maps of every cell (mixed with
    its n_states, temperature and map)."""
    threshold: float = ranged(0.05, least=0, most=1, above=True, below=True)
    """The median row TV the report asks the feature count for."""


@dataclass
class CoupledConfig:
    """A sweep of weakly coupled HMMs (Thon and Kersting): structured mean field and chain-wise
    Viterbi against exact and top-p, per (model, chains, n_states, eps, seed, observe)
    (``pipeline.sweep.kinds.coupled``)."""

    chains: list[int] = ranged(lambda: [2], least=2)
    """Chain counts k of the coupled HMMs, one cell each."""
    n_states: Any = choices(
        None, "a list of integers >= 2, or a mapping of chain counts to such lists"
    )
    """States per chain: a list for every chain count, or a mapping chains -> list
    (required)."""
    eps: list[float] = ranged(lambda: [0.0, 0.2], least=0, most=1)
    """Couplings: the probability that a chain moves by another chain's state."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Seeds of the ``coupled`` family's models and of the sampled observations, one cell
    each."""
    observe: list[str] = choices(lambda: ["chain"], OBSERVE)
    """``chain`` (every chain's symbol) and/or ``set`` (the set of symbols emitted)."""
    n_observations: int = 4
    """Symbols each chain of the ``coupled`` family emits."""
    alpha: float = 0.1
    """Dirichlet concentration of the ``coupled`` family's rows, > 0."""
    relational: dict[str, Any] = choices(
        dict, "a mapping of spec names to lists of domains, each a mapping of types to integers"
    )
    """Relational specs (``conf/relational/<name>.yaml``) -> domains to ground them at,
    each a mapping type -> how many of its constants to keep (the rest of the types whole)."""
    horizon: int = ranged(50, least=1)
    """Steps after the prior: each cell samples a path of horizon + 1 steps and stores its
    marginals' errors at t = 0..horizon."""
    observe_every: int = ranged(4, least=1)
    """Symbols are observed at every step t with t % observe_every == 0."""
    topp: list[float] = ranged(lambda: [0.9, 0.99], least=0, most=1, above=True)
    """Top-p masses of the joint chain's transitions, run beside the mean field."""
    tolerance: float = ranged(1e-6, least=0, above=True)
    """The structured mean field sweeps over the chains until no marginal moves by more than
    this (``pipeline.coupled.meanfield``)..."""
    max_iterations: int = ranged(100, least=1)
    """...or this many sweeps have run (the cell then stores that it did not converge)."""
    exact_max_states: int = ranged(4096, least=1)
    """Exact inference (and top-p on the joint) only up to this many joint states."""
    repeats: int = ranged(3, least=1)
    """Every method of a cell is timed in rounds, each running every method once
    (``pipeline.sweep.timing``); a runtime is the median over at most this many rounds..."""
    budget: float = ranged(1.0, least=0)
    """...or over as many as fit in this many seconds (at least one)."""


@dataclass
class SweepConfig:
    """The whole sweep; Hydra's ``config.yaml`` fills it in. Every kind of sweep but the
    default adds its own section (``sweep_config``)."""

    kind: str = choices("methods", KINDS.names)
    """The kind of sweep (``pipeline.kinds.KINDS``), chosen as a config group
    (``kind=training``): ``methods`` (approximations against exact inference over
    ``grid``), ``training``, ``coupled``, ``kernel_features``, or a plug-in's. Each kind but
    ``methods`` reads its own section, named like it, which choosing the kind fills with its
    defaults; the experiments of a kind choose it."""
    grid: GridConfig = field(default_factory=GridConfig)
    model: Any = field(default_factory=lambda: model_config()())
    """``model.<family>.<param>``: every family's keyword parameters (``model_config``)."""
    cluster: Any = choices(MISSING, _cluster_names)
    """Where the work runs: an entry of ``dask_cluster.yaml`` (``cluster=local``, the
    default; ``machine``, ``address``, ``slurm``, ``pbs``, ``ssh``)."""
    timing: TimingConfig = field(default_factory=TimingConfig)
    store: Optional[str] = choices(None, "a folder's path, or null")  # noqa: UP045
    """The results store's path (default ``outputs/<experiment>/results.zarr``)."""
    overwrite: bool = False
    """Replace a store of another sweep (another grid, an older layout) instead of refusing
    it. Never deletes the finished cells of this same sweep (a store this run resumes or
    grows): refused while there are any; a rerun without it repairs a damaged store, keeping
    every chunk that verifies."""
    performance_report: bool = False
    """Save Dask's performance report of the computation (HTML: task stream, worker profile,
    bandwidth) beside the store, as ``<store name>_performance.html``."""
    fuse_states: int = ranged(500, least=0)
    """Models with at most this many states compute all their cells in one Dask task."""
    exact_max_states: Optional[int] = ranged(None, least=2)  # noqa: UP045
    """Models with more states get no exact reference (default: all do): their cells time
    the approximation alone and the online certificate bounds its prediction error."""
    gamma_exact_max_states: int = ranged(20000, least=2)
    """gamma is exact up to this many states (a pair search in Dask tasks of about 2000
    rows); above, the Doeblin lower bound stands in for it (``gamma_exact`` says which)."""
    retries: int = ranged(2, least=0)
    """How often a task is tried again after a reason another attempt may not meet (a worker
    short of memory, a lost connection, workers that died under it) before its cells are
    marked failed; a task's own exception (a ``ValueError`` of a plug-in) is never retried:
    it would be the same (``pipeline.sweep.failures``)."""
    max_cells: int = ranged(100_000, least=1)
    """The most cells a grid may have; a larger one is refused before anything starts (a
    typo, an extra zero in a list of seeds, should not start a week of work)."""
    flush_seconds: float = ranged(2.0, least=0, above=True)
    """Finished cells are written to the store at least this often."""
    progress_seconds: float = ranged(10.0, least=0, above=True)
    """Interval of the plain progress lines printed when stderr is not a terminal."""
