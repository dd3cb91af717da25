"""The sweep's structured configuration: schema, Hydra registration and validation.

Hydra composes ``conf/config.yaml`` over the ``SweepConfig`` schema; OmegaConf
checks types and rejects unknown keys, ``validate`` checks values. Cluster
definitions live in ``dask_cluster.yaml`` and become the options of the
``cluster`` config group, so ``cluster=<name>`` picks one of its entries.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from dask.utils import parse_bytes
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from pipeline.hmmlm.parameters import PARAMETERISATIONS, parse
from pipeline.methods import METHODS
from pipeline.models import FAMILIES, check_model, family_parameters
from pipeline.models.corpus import read_documents
from pipeline.models.lm import vocabulary

MODES = ("predict", "filter")
DEFAULT_CORPUS_WORDS = 7620
"""Word types the default corpus (the standard library's English) has at least, tested."""
REPOSITORY = Path(__file__).resolve().parents[2]
CLUSTER_FILE = "dask_cluster.yaml"
WALLTIME = re.compile(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)")
"""A batch job's walltime: HH:MM:SS, or D-HH:MM:SS (SLURM only)."""


class ConfigError(ValueError):
    """An invalid setting: ``key`` names it, the message says what is allowed."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass
class GridConfig:
    """The experiment grid; every list is one dimension of the results."""

    families: list[str] = field(default_factory=lambda: ["bell", "uniform", "dirichlet"])
    n_states: Any = None
    """A list of sizes for every family, or a mapping family -> list of sizes (required).

    Typed ``Any`` with no default: OmegaConf cannot merge a mapping into a list node."""
    methods: Any = None
    """A mapping method -> list of its settings (``pipeline.methods.METHODS``), e.g.
    ``{topp: [0.5, 0.9], topk: [5, 20]}``; typed ``Any``: a mapping of lists."""
    p: Optional[list[float]] = None  # noqa: UP045
    """Shorthand for ``methods={topp: p}`` on the command line (the sweep replaces
    ``grid.methods`` by it); set one of the two."""
    horizon: int = 50
    seeds: list[int] = field(default_factory=lambda: [0])
    modes: list[str] = field(default_factory=lambda: list(MODES))
    observe_every: int = 5
    """Filtering observes a symbol at every step t with t % observe_every == 0."""


@dataclass
class TimingConfig:
    repeats: int = 3
    """Least number of interleaved exact/approximate run pairs per cell; min, median and max
    are stored."""
    min_seconds: float = 0.2
    """Pairs are repeated until they took this long (at most ``max_repeats``): short runs
    of small models need many repeats before a median means anything."""
    max_repeats: int = 1000
    blas_threads: int = 1
    """BLAS threads in every timed run (fixed with threadpoolctl and recorded)."""


def _optional(hint):
    """``X | None`` as ``Optional[X]``, which every OmegaConf 2.x understands."""
    if isinstance(hint, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return Optional[inner]  # noqa: UP045 - OmegaConf needs typing.Optional
    return hint


def _parameters_dataclass(family: str) -> type:
    """A dataclass of ``family``'s keyword parameters, from its ``build`` signature."""
    hints = typing.get_type_hints(FAMILIES[family].build)
    fields = [
        (name, _optional(hints[name]), field(default=default))
        for name, default in family_parameters(family).items()
    ]
    return make_dataclass(f"{family.capitalize()}Parameters", fields)


ModelConfig = make_dataclass(
    "ModelConfig",
    [
        (family, (cls := _parameters_dataclass(family)), field(default_factory=cls))
        for family in FAMILIES
    ],
)
"""``model.<family>.<param>``: the keyword parameters of every model family."""


@dataclass
class SecurityConfig:
    """TLS between this client, the scheduler and the workers (``distributed.security``).

    Off unless ``temporary`` is true or ``ca_file`` is set; when on, every connection is
    encrypted and both ends must present a certificate signed by the authority."""

    temporary: bool = False
    """Generate a certificate authority and a certificate for this sweep alone (kinds that
    start the scheduler and the workers: local, slurm, pbs, ssh). The files go to a private
    directory (mode 700) in the working directory, removed at the end; workers on other
    machines must see it at the same path (a shared file system, as batch jobs need)."""
    ca_file: Optional[str] = None  # noqa: UP045
    """PEM file of the certificate authority (your own certificates)."""
    cert: Optional[str] = None  # noqa: UP045
    """PEM certificate for this client, the scheduler and the workers, signed by ca_file."""
    key: Optional[str] = None  # noqa: UP045
    """PEM private key of cert (null: cert holds it)."""


@dataclass
class LocalClusterConfig:
    kind: str = "local"
    n_workers: Optional[int] = None  # noqa: UP045
    threads_per_worker: int = 1
    memory_limit: str = "auto"
    host: str = "127.0.0.1"
    """Address the scheduler and the workers listen on."""
    dashboard_address: str = ":8787"
    """host:port of the dashboard; ':port' listens on ``host``, ':0' on a free port."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 60.0
    """Seconds the sweep waits while no worker is connected before it stops (finished cells
    stay stored); lost workers are replaced meanwhile."""


@dataclass
class AddressClusterConfig:
    kind: str = "address"
    address: str = "tcp://127.0.0.1:8786"
    timeout: float = 5.0
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 60.0


@dataclass
class JobqueueClusterConfig:
    kind: str = "slurm"
    jobs: int = 1
    cores: int = 1
    processes: int = 1
    memory: str = "4GiB"
    walltime: str = "01:00:00"
    queue: Optional[str] = None  # noqa: UP045
    account: Optional[str] = None  # noqa: UP045
    job_extra_directives: list[str] = field(default_factory=list)
    job_script_prologue: list[str] = field(default_factory=list)
    local_directory: Optional[str] = None  # noqa: UP045
    interface: Optional[str] = None  # noqa: UP045
    """Network interface of the scheduler and workers, e.g. ib0 (null: the default route)."""
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and workers listen on, e.g. 127.0.0.1 for one machine."""
    dashboard_address: str = "127.0.0.1:8787"
    death_timeout: float = 60.0
    """Seconds a worker outlives an unreachable scheduler before its job ends."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 3600.0


@dataclass
class SSHClusterConfig:
    kind: str = "ssh"
    hosts: list[str] = field(default_factory=lambda: ["localhost", "localhost"])
    workers_per_host: int = 1
    threads_per_worker: int = 1
    remote_python: Optional[str] = None  # noqa: UP045
    connect_options: dict[str, Any] = field(default_factory=dict)
    host: Optional[str] = None  # noqa: UP045
    dashboard_address: str = "127.0.0.1:8787"
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 120.0


CLUSTER_KINDS = {
    "local": LocalClusterConfig,
    "address": AddressClusterConfig,
    "slurm": JobqueueClusterConfig,
    "pbs": JobqueueClusterConfig,
    "ssh": SSHClusterConfig,
}
"""Every cluster kind's schema; dask_cluster.yaml documents each key."""


@dataclass
class TrainingConfig:
    """An HMM LM training sweep (seed 002): each (n_states, parameterisation, seed) is a cell
    that trains one model (``pipeline.hmmlm``) and stores its held-out perplexity."""

    n_states: list[int] = field(default_factory=lambda: [256])
    parameterisations: list[str] = field(default_factory=lambda: ["softmax"])
    """``softmax``, ``kernel_<r>`` or ``banded_kernel_<r>``: r states per feature."""
    seeds: list[int] = field(default_factory=lambda: [0])
    epochs: int = 3
    batch: int = 32
    """Chunks per gradient step."""
    length: int = 64
    """Tokens per chunk; every chunk starts from the prior."""
    n_tokens: int = 1000
    """Vocabulary: the most frequent words, the rest one unknown word."""
    train_chunks: Optional[int] = None  # noqa: UP045
    """Train on the first this many training chunks (default all)."""
    held_out_chunks: Optional[int] = None  # noqa: UP045
    """Measure perplexity on the first this many held-out chunks (default all)."""
    learning_rate: float = 0.05
    dim: int = 32
    """Embedding dimension of the kernel parameterisations."""
    delta: int = 3
    """Band of the banded kernels: ``|i - j| < delta``."""
    corpus: Optional[str] = None  # noqa: UP045
    """A text file or folder; default the standard library's English."""


@dataclass
class CoupledConfig:
    """A coupled sweep (seed 001): structured mean field and chain-wise Viterbi against exact
    and top-p, per (model, chains, n_states, eps, seed, observe); ``pipeline.sweep.coupled``."""

    chains: list[int] = field(default_factory=lambda: [2])
    n_states: Any = None
    """States per chain: a list for every chain count, or a mapping chains -> list."""
    eps: list[float] = field(default_factory=lambda: [0.0, 0.2])
    """Couplings: the probability that a chain moves by another chain's state."""
    seeds: list[int] = field(default_factory=lambda: [0])
    observe: list[str] = field(default_factory=lambda: ["chain"])
    """``chain`` (every chain's symbol) and/or ``set`` (the set of symbols emitted)."""
    n_observations: int = 4
    """Symbols each chain of the ``coupled`` family emits."""
    alpha: float = 0.1
    """Dirichlet concentration of the ``coupled`` family's rows."""
    relational: dict[str, Any] = field(default_factory=dict)
    """Relational specs (``conf/relational/<name>.yaml``) -> domains to ground them at, each a
    mapping type -> how many of its constants to keep (the rest of the types whole)."""
    horizon: int = 50
    observe_every: int = 4
    topp: list[float] = field(default_factory=lambda: [0.9, 0.99])
    """Top-p masses of the joint chain's transitions, run beside the mean field."""
    tolerance: float = 1e-6
    max_iterations: int = 100
    exact_max_states: int = 4096
    """Exact inference (and top-p on the joint) only up to this many joint states."""
    repeats: int = 3
    """Each runtime is the median of this many runs..."""
    budget: float = 1.0
    """...or of as many as fit in this many seconds (at least one)."""


@dataclass
class SweepConfig:
    """The whole sweep; Hydra's ``config.yaml`` fills it in."""

    grid: GridConfig = field(default_factory=GridConfig)
    training: Optional[TrainingConfig] = None  # noqa: UP045
    """Set (by ``experiment=lm_scaling`` or ``lm_smoke``): the sweep trains HMM LMs over
    this grid instead of sweeping approximations over ``grid``."""
    coupled: Optional[CoupledConfig] = None  # noqa: UP045
    """Set (by ``experiment=coupled`` or ``coupled_smoke``): the sweep compares inference in
    weakly coupled HMMs (seed 001) over this grid instead of sweeping ``grid``."""
    model: Any = field(default_factory=ModelConfig)
    cluster: Any = MISSING
    timing: TimingConfig = field(default_factory=TimingConfig)
    store: Optional[str] = None  # noqa: UP045
    """Results location; default ``outputs/<experiment>/results.zarr``."""
    overwrite: bool = False
    """Replace an existing store made from a different grid instead of refusing."""
    fuse_states: int = 500
    """Models with at most this many states compute all their cells in one Dask task."""
    exact_max_states: Optional[int] = None  # noqa: UP045
    """Models with more states get no exact reference (default: all do): their cells time
    the approximation alone and the online certificate bounds its prediction error."""
    gamma_exact_max_states: int = 20000
    """gamma is exact up to this many states (a pair search in Dask tasks of about 2000
    rows); above, the Doeblin lower bound stands in for it (``gamma_exact`` says which)."""
    retries: int = 2
    """How often a task that raised is retried before its cells are marked failed."""
    flush_seconds: float = 2.0
    """Finished cells are written to the store at least this often."""
    progress_seconds: float = 10.0
    """Interval of the plain progress lines printed when stderr is not a terminal."""


def cluster_file() -> Path:
    """``dask_cluster.yaml`` of the working directory, else the repository's."""
    local = Path(CLUSTER_FILE)
    return local if local.is_file() else REPOSITORY / CLUSTER_FILE


def load_clusters(path: Path | None = None) -> dict[str, object]:
    """The named cluster definitions of ``dask_cluster.yaml`` as schema instances."""
    path = path or cluster_file()
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(CLUSTER_FILE, f"cannot read {path}: {error}") from None
    clusters = {}
    for name, entry in entries.items():
        entry = dict(entry or {})
        kind = entry.get("kind", name)
        if kind not in CLUSTER_KINDS:
            raise ConfigError(
                f"{CLUSTER_FILE}: {name}.kind",
                f"unknown kind {kind!r}; allowed: {', '.join(CLUSTER_KINDS)}",
            )
        _check_keys(entry, CLUSTER_KINDS[kind], f"{name}", f"a {kind} cluster")
        if "security" in entry:
            security = entry["security"]
            if not isinstance(security, dict):
                raise ConfigError(
                    f"{CLUSTER_FILE}: {name}.security",
                    f"{security!r} is not allowed; allowed: a mapping of "
                    f"{', '.join(f.name for f in dataclasses.fields(SecurityConfig))}",
                )
            _check_keys(security, SecurityConfig, f"{name}.security", "security")
            entry["security"] = SecurityConfig(**security)
        clusters[name] = CLUSTER_KINDS[kind](**{**entry, "kind": kind})
    return clusters


def _check_keys(entry: dict, schema: type, where: str, what: str) -> None:
    allowed = [f.name for f in dataclasses.fields(schema)]
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{CLUSTER_FILE}: {where}.{unknown[0]}",
            f"unknown key for {what}; allowed: {', '.join(allowed)}",
        )


def register(clusters: dict[str, object] | None = None) -> None:
    """Store the schema and every cluster definition in Hydra's ConfigStore."""
    store = ConfigStore.instance()
    store.store(name="sweep_schema", node=SweepConfig)
    for name, node in (clusters if clusters is not None else load_clusters()).items():
        store.store(group="cluster", name=name, node=node)


def _check_list(key: str, values, kind, allowed: str) -> None:
    if not values:
        raise ConfigError(key, f"must not be empty; allowed: a list of {allowed}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigError(key, f"{value!r} is not allowed; allowed: {allowed}")
    if len(set(values)) != len(values):
        raise ConfigError(key, f"has duplicates {list(values)}; list each value once")


def family_sizes(grid) -> dict[str, list[int]]:
    """``grid.n_states`` as a mapping family -> sizes."""
    sizes = grid.n_states
    if sizes is None:
        raise ConfigError(
            "grid.n_states",
            "is not set; allowed: a list of integers >= 2, or a mapping family -> list",
        )
    if isinstance(sizes, typing.Mapping):
        extra = sorted(set(sizes) - set(grid.families))
        missing = [f for f in grid.families if f not in sizes]
        if extra or missing:
            problem = (
                f"{extra[0]!r} is not in grid.families" if extra else f"{missing[0]!r} is missing"
            )
            raise ConfigError(
                "grid.n_states",
                f"family {problem}; a mapping needs one list of sizes per family of grid.families",
            )
        return {family: list(sizes[family]) for family in grid.families}
    if not isinstance(sizes, typing.Sequence) or isinstance(sizes, str):
        raise ConfigError(
            "grid.n_states",
            f"{sizes!r} is not allowed; allowed: a list of "
            "integers >= 2, or a mapping family -> list",
        )
    return {family: list(sizes) for family in grid.families}


def grid_methods(grid) -> dict[str, list]:
    """``grid.methods`` (or the shorthand ``grid.p``) as a mapping method -> settings."""
    if grid.p is not None and grid.methods is not None:
        raise ConfigError(
            "grid.p",
            "is shorthand for grid.methods={topp: [...]}; set one of grid.p and grid.methods",
        )
    if grid.p is not None:
        return {"topp": list(grid.p)}
    methods = grid.methods
    allowed = "a mapping method -> list of settings, e.g. {topp: [0.5, 0.9], topk: [5]}"
    if methods is None:
        raise ConfigError("grid.methods", f"is not set; allowed: {allowed}, or grid.p=[...]")
    if not isinstance(methods, typing.Mapping) or not methods:
        raise ConfigError("grid.methods", f"{methods!r} is not allowed; allowed: {allowed}")
    return {str(method): settings for method, settings in methods.items()}


def _validate_methods(grid) -> None:
    key = "grid.p" if grid.p is not None else "grid.methods"
    for method, settings in grid_methods(grid).items():
        if method not in METHODS:
            raise ConfigError(key, f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
        where = key if key == "grid.p" else f"grid.methods.{method}"
        if not isinstance(settings, typing.Sequence) or isinstance(settings, str):
            raise ConfigError(where, f"{settings!r} is not allowed; allowed: a list of settings")
        _check_list(where, settings, (int, float), "numbers")
        for setting in settings:
            try:
                METHODS[method].check(setting)
            except (TypeError, ValueError) as error:
                raise ConfigError(where, str(error)) from None


def _validate_training(training) -> None:
    _check_list("training.n_states", training.n_states, int, "integers >= 2")
    _check_list("training.parameterisations", training.parameterisations, str, PARAMETERISATIONS)
    _check_list("training.seeds", training.seeds, int, "integers >= 0")
    for n in training.n_states:
        if n < 2:
            raise ConfigError("training.n_states", f"{n} is not allowed; allowed: integers >= 2")
        for name in training.parameterisations:
            try:
                parse(name, n)
            except ValueError as error:
                raise ConfigError("training.parameterisations", str(error)) from None
    for key in ("epochs", "batch", "length", "n_tokens", "dim", "delta"):
        least = 2 if key in ("length", "n_tokens") else 1
        if training[key] < least:
            raise ConfigError(
                f"training.{key}", f"{training[key]} is not allowed; allowed: integers >= {least}"
            )
    for key in ("train_chunks", "held_out_chunks"):
        if training[key] is not None and training[key] < 1:
            raise ConfigError(f"training.{key}", f"{training[key]} is not allowed; allowed: >= 1")
    if not training.learning_rate > 0:
        raise ConfigError("training.learning_rate", "must be a number > 0")
    if training.corpus is None:
        if training.n_tokens > DEFAULT_CORPUS_WORDS:
            raise ConfigError(
                "training.n_tokens",
                f"{training.n_tokens} is not allowed with the default corpus; allowed: "
                f"2 to {DEFAULT_CORPUS_WORDS}, or a larger training.corpus",
            )
        return
    if not Path(training.corpus).exists():
        raise ConfigError("training.corpus", f"{training.corpus} does not exist")
    try:  # a user's corpus is read here, once, so a small one fails before any training
        vocabulary(read_documents(training.corpus), training.n_tokens)
    except ValueError as error:
        raise ConfigError("training.n_tokens", str(error)) from None


def _validate_grid(cfg) -> None:
    grid = cfg.grid
    _check_list("grid.families", grid.families, str, ", ".join(FAMILIES))
    for family in grid.families:
        if family not in FAMILIES:
            raise ConfigError(
                "grid.families", f"unknown family {family!r}; allowed: {', '.join(FAMILIES)}"
            )
    mapping = isinstance(grid.n_states, typing.Mapping)
    for family, sizes in family_sizes(grid).items():
        key = f"grid.n_states.{family}" if mapping else "grid.n_states"
        _check_list(key, sizes, int, "integers >= 2")
        for n in sizes:
            try:
                check_model(family, n, **cfg.model[family])
            except (ValueError, FileNotFoundError) as error:
                # The family checks name n_states when the size is at fault.
                raise ConfigError(
                    key if "n_states" in str(error) else f"model.{family}", str(error)
                ) from None
    _validate_methods(grid)
    if grid.horizon < 1:
        raise ConfigError("grid.horizon", f"{grid.horizon} is not allowed; allowed: integers >= 1")
    _check_list("grid.seeds", grid.seeds, int, "integers >= 0")
    if min(grid.seeds) < 0:
        raise ConfigError("grid.seeds", f"{min(grid.seeds)} is negative; allowed: integers >= 0")
    _check_list("grid.modes", grid.modes, str, ", ".join(MODES))
    for mode in grid.modes:
        if mode not in MODES:
            raise ConfigError("grid.modes", f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    if grid.observe_every < 1:
        raise ConfigError(
            "grid.observe_every", f"{grid.observe_every} is not allowed; allowed: integers >= 1"
        )


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid setting of a composed config."""
    if cfg.training is not None and cfg.coupled is not None:
        raise ConfigError("coupled", "a sweep is either a training or a coupled sweep, not both")
    if cfg.training is not None:
        _validate_training(cfg.training)
    elif cfg.coupled is not None:
        from pipeline.sweep.coupled import validate as validate_coupled

        validate_coupled(cfg.coupled)
    else:
        _validate_grid(cfg)
    for key, value, least in (
        ("timing.repeats", cfg.timing.repeats, 1),
        ("timing.max_repeats", cfg.timing.max_repeats, cfg.timing.repeats),
        ("timing.blas_threads", cfg.timing.blas_threads, 1),
        ("retries", cfg.retries, 0),
        ("fuse_states", cfg.fuse_states, 0),
        ("gamma_exact_max_states", cfg.gamma_exact_max_states, 2),
        ("exact_max_states", 2 if cfg.exact_max_states is None else cfg.exact_max_states, 2),
    ):
        if value < least:
            raise ConfigError(key, f"{value} is not allowed; allowed: integers >= {least}")
    for key in ("flush_seconds", "progress_seconds"):
        if not cfg[key] > 0:
            raise ConfigError(key, f"{cfg[key]} is not allowed; allowed: numbers > 0")
    if cfg.timing.min_seconds < 0:
        raise ConfigError(
            "timing.min_seconds", f"{cfg.timing.min_seconds} is not allowed; allowed: numbers >= 0"
        )
    _validate_cluster(cfg.cluster)


def _validate_cluster(cluster) -> None:
    positive = {
        "local": ("n_workers", "threads_per_worker"),
        "address": ("timeout",),
        "slurm": ("jobs", "cores", "processes", "death_timeout"),
        "pbs": ("jobs", "cores", "processes", "death_timeout"),
        "ssh": ("workers_per_host", "threads_per_worker"),
    }[cluster.kind]
    for name in (*positive, "wait_for_workers"):
        value = cluster[name]
        if value is not None and not value > 0:
            raise ConfigError(f"cluster.{name}", f"{value} is not allowed; allowed: numbers > 0")
    if cluster.kind in ("slurm", "pbs"):
        _validate_jobs(cluster)
    if cluster.kind == "ssh" and len(cluster.hosts) < 2:
        raise ConfigError("cluster.hosts", "needs the scheduler host and at least one worker host")
    tls = _validate_security(cluster)
    if cluster.kind == "address":
        scheme, found, _ = cluster.address.partition("://")
        if not found:
            raise ConfigError(
                "cluster.address",
                f"{cluster.address!r} is not a scheduler address; allowed: "
                "protocol://host:port, e.g. tcp://127.0.0.1:8786",
            )
        if (scheme == "tls") != tls:
            raise ConfigError(
                "cluster.address",
                f"{cluster.address} needs cluster.security.ca_file and cert"
                if tls is False
                else f"{cluster.address} is unencrypted; with cluster.security use tls://",
            )


def _validate_jobs(cluster) -> None:
    """The batch job's walltime, memory, cores and listening address."""
    match = WALLTIME.fullmatch(cluster.walltime)
    if match is None or (match[1] and cluster.kind == "pbs"):
        allowed = "HH:MM:SS" + (", or D-HH:MM:SS" if cluster.kind == "slurm" else "")
        raise ConfigError(
            "cluster.walltime", f"{cluster.walltime!r} is not allowed; allowed: {allowed}"
        )
    try:
        parse_bytes(cluster.memory)
    except (ValueError, TypeError):
        raise ConfigError(
            "cluster.memory", f"{cluster.memory!r} is not allowed; allowed: a size, e.g. 4GiB"
        ) from None
    if cluster.host and cluster.interface:
        raise ConfigError(
            "cluster.host", "set host or interface, not both (both say where to listen)"
        )
    if cluster.processes > cluster.cores:
        raise ConfigError(
            "cluster.processes",
            f"{cluster.processes} worker processes on {cluster.cores} cores; "
            "allowed: at most cluster.cores",
        )


def _validate_security(cluster) -> bool:
    """Whether ``cluster.security`` turns TLS on; its files must exist."""
    security = cluster.security
    files = {name: security[name] for name in ("ca_file", "cert", "key")}
    if security.temporary:
        if cluster.kind == "address":
            raise ConfigError(
                "cluster.security.temporary",
                "the pipeline does not start this scheduler; allowed: ca_file, cert and key "
                "of the scheduler's certificate authority",
            )
        if any(files.values()):
            raise ConfigError(
                "cluster.security", "set either temporary or ca_file and cert, not both"
            )
        return True
    if not any(files.values()):
        return False
    for name in ("ca_file", "cert"):
        if not files[name]:
            raise ConfigError(f"cluster.security.{name}", "is not set; TLS needs ca_file and cert")
    for name, path in files.items():
        if path and not Path(path).is_file():
            raise ConfigError(f"cluster.security.{name}", f"{path} is not a file")
    return True


def check_writable(path: Path) -> None:
    """Raise ``ConfigError`` unless a store can be created or updated at ``path``."""
    if path.exists():
        if not path.is_dir():
            raise ConfigError("store", f"{path} exists and is not a zarr store (a directory)")
        if not os.access(path, os.W_OK):
            raise ConfigError("store", f"{path} is not writable")
        return
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError("store", f"cannot create {path}: {parent} is not a writable directory")
