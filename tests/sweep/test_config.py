"""Every invalid configuration: a one-line error naming the key, before any work starts.

Most cases run the sweep's own checks in this process (``replaceable``,
``check_overrides`` and ``validate``, in the order ``main`` runs them); a few
run the command end to end to show what the user sees.
"""

import copy
import dataclasses
import logging
import os
import re
import sys
import typing

import pytest
from omegaconf import ListConfig, OmegaConf

from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.results.registry import KINDS
from pipeline.sweep import run
from pipeline.sweep.backends import BACKENDS, SecurityConfig
from pipeline.sweep.cluster import connect
from pipeline.sweep.config import (
    CONFIG_DIR,
    SHIPPED_CLUSTERS,
    ConfigError,
    compose,
    moved,
    register,
    sweep_config,
    validate,
)
from pipeline.sweep.config.clusters import cluster_file, load_clusters
from pipeline.sweep.config.compose import USER_CONFIG, replaceable, user_configs
from pipeline.sweep.config.validation import NAME_MARGIN
from pipeline.sweep.lock import lock_path
from pipeline.sweep.main import check_overrides, main
from pipeline.sweep.store import ResultStore

from helpers import REPOSITORY
from sweeping import TINY, composed, sweep

BAD = {
    "p_above_1": (
        ["methods.grid.methods={topp:[0.5,1.5]}"],
        "methods.grid.methods.topp: p must be in (0, 1], got 1.5",
    ),
    "p_zero": (
        ["methods.grid.methods={topp:[0]}"],
        "methods.grid.methods.topp: p must be in (0, 1], got 0",
    ),
    "the_former_shorthand": (
        ["methods.grid.p=[0.5]"],
        "methods.grid.p: unknown key; allowed: families, n_states",
    ),
    "the_root_as_store": (["store=/"], "store: '/' names no store; allowed: a folder's path"),
    "unknown_method": (
        ["methods.grid.methods={topq:[0.5]}"],
        "methods.grid.methods: unknown method 'topq'; allowed: topp, topk, topp_states",
    ),
    "k_not_integer": (
        ["methods.grid.methods={topk:[2.5]}"],
        "methods.grid.methods.topk: k must be an integer >= 1, got 2.5",
    ),
    "no_settings": (
        ["methods.grid.methods={topk:[]}"],
        "methods.grid.methods.topk: must not be empty",
    ),
    "settings_not_a_list": (
        ["methods.grid.methods={topk:5}"],
        "methods.grid.methods.topk: 5 is not allowed; allowed: a list of settings",
    ),
    "methods_not_a_mapping": (
        ["methods.grid.methods=[0.5]"],
        "methods.grid.methods: [0.5] is not allowed; allowed: a mapping method -> list of settings",
    ),
    "n_states_1": (
        ["methods.grid.n_states=[1,20]"],
        "methods.grid.n_states: n_states must be an integer >= 2",
    ),
    "bell_too_small": (
        ["methods.grid.n_states=[5]"],
        "methods.grid.n_states: the bell family needs",
    ),
    "horizon_0": (
        ["methods.grid.horizon=0"],
        "methods.grid.horizon: 0 is not allowed; allowed: integers >= 1",
    ),
    "horizon_text": (
        ["methods.grid.horizon=abc"],
        "methods.grid.horizon: Value 'abc' of type 'str'",
    ),
    "no_families": (["methods.grid.families=[]"], "methods.grid.families: must not be empty"),
    "unknown_family": (
        ["methods.grid.families=[bell,foo]"],
        "methods.grid.families: unknown family 'foo'; allowed: weather, uniform, bell, lm",
    ),
    "unknown_parameter": (
        ["methods.model.bell.width=3"],
        "methods.model.bell.width: unknown key; allowed: structured",
    ),
    "unknown_key": (
        ["methods.grid.size=3"],
        "methods.grid.size: unknown key; allowed: families, n_states, methods",
    ),
    "a_typo_of_a_key": (
        ["methods.grid.seed=[1,2]"],
        "methods.grid.seed: unknown key; did you mean methods.grid.seeds? allowed: families, "
        "n_states, methods",
    ),
    "an_added_key": (
        ["+foo=1"],
        "foo: unknown key; allowed: kind, cluster, store, overwrite, performance_report, retries, "
        "max_cells, flush_seconds, progress_seconds, methods, training",
    ),
    "an_added_typo_of_a_key": (
        ["+methods.grid.seed=[1,2]"],
        "methods.grid.seed: unknown key; did you mean methods.grid.seeds? allowed: families, "
        "n_states, methods",
    ),
    "a_key_forced_in": (
        ["++methods.timing.repeat=2"],
        "methods.timing.repeat: unknown key; did you mean methods.timing",
    ),
    "an_added_parameter": (
        ["+methods.model.bell.structure=false"],
        "methods.model.bell.structure: unknown key; did you mean methods.model.bell.structured? "
        "allowed: structured",
    ),
    "an_added_cluster_key": (
        ["+cluster.security.kee=x.pem"],
        "cluster.security.kee: unknown key; did you mean cluster.security.key? allowed: "
        "temporary, directory, ca_file, cert, key",
    ),
    "no_seeds": (["methods.grid.seeds=[]"], "methods.grid.seeds: must not be empty"),
    "negative_seed": (
        ["methods.grid.seeds=[-1]"],
        "methods.grid.seeds: -1 is not allowed; allowed: integers >= 0",
    ),
    "unknown_mode": (
        ["methods.grid.modes=[sample]"],
        "methods.grid.modes: unknown mode 'sample'; allowed: predict, filter, smooth, decode",
    ),
    "observe_every_0": (
        ["methods.grid.observe_every=0"],
        "methods.grid.observe_every: 0 is not allowed",
    ),
    "unknown_cluster": (
        ["cluster=nowhere"],
        "cluster=nowhere: no such cluster; allowed: address, local, machine, pbs, slurm, ssh",
    ),
    "unknown_experiment": (
        ["experiment=huge"],
        "experiment=huge: no such experiment; allowed: coupled, coupled_smoke, default, file, "
        "kernel_features, learning, learning_smoke, lm_scaling, lm_smoke, lm_topp, lowrank, "
        "methods, paper, scale, scale_10m, smoke",
    ),
    "alpha_zero": (
        ["methods.model.dirichlet.alpha=0"],
        "methods.model.dirichlet.alpha: the dirichlet family needs alpha > 0",
    ),
    "missing_corpus": (
        ["methods.grid.families=[lm]", "methods.model.lm.corpus=/no/such/corpus.txt"],
        "methods.model.lm.corpus: corpus '/no/such/corpus.txt' does not exist",
    ),
    "repeats_0": (["methods.timing.repeats=0"], "methods.timing.repeats: 0 is not allowed"),
    "cell_too_large": (
        [
            "methods.grid.families=[dirichlet]",
            "methods.grid.n_states=[200000]",
            "methods.grid.methods={topp:[0.9]}",
        ],
        "methods.grid.n_states: the cell family=dirichlet, n_states=200000, method=topp, "
        "setting=0.9 needs about 1,157 GiB (model 893,",
    ),
    "exact_max_1": (["methods.exact_max_states=1"], "methods.exact_max_states: 1 is not allowed"),
    "workers_0": (["cluster.n_workers=0"], "cluster.n_workers: 0 is not allowed"),
    "weather_size": (
        ["methods.grid.families=[weather]", "methods.grid.n_states=[7]"],
        "methods.grid.n_states: the weather family has exactly 6 states",
    ),
    "bad_mapping": (
        ["methods.grid.n_states={bell:[20]}"],
        "methods.grid.n_states: family 'uniform' is missing",
    ),
    "parse_error": (
        ["methods.grid.horizon=[0.5,"],
        "cannot parse the override 'methods.grid.horizon=[0.5,': no viable",
    ),
    "unknown_cluster_key": (
        ["cluster=slurm", "cluster.partition=gpu"],
        "cluster.partition: unknown key; allowed: kind, jobs",
    ),
    "unknown_security_key": (
        ["cluster.security.password=hunter2"],
        "cluster.security.password: unknown key; allowed: temporary",
    ),
    "walltime_format": (
        ["cluster=slurm", "cluster.walltime=2h"],
        "cluster.walltime: '2h' is not allowed; allowed: HH:MM:SS, or D-HH:MM:SS",
    ),
    "walltime_minutes_above_59": (
        ["cluster=slurm", "cluster.walltime=01:75:00"],
        "cluster.walltime: '01:75:00' is not allowed",
    ),
    "pbs_walltime_in_days": (
        ["cluster=pbs", "cluster.walltime=1-00:00:00"],
        "cluster.walltime: '1-00:00:00' is not allowed; allowed: HH:MM:SS",
    ),
    "job_memory": (
        ["cluster=slurm", "cluster.memory=lots"],
        "cluster.memory: 'lots' is not allowed; allowed: a size, e.g. 4GiB",
    ),
    "processes_above_cores": (
        ["cluster=pbs", "cluster.cores=2", "cluster.processes=4"],
        "cluster.processes: 4 worker processes on 2 cores",
    ),
    "host_and_interface": (
        ["cluster=slurm", "cluster.host=127.0.0.1", "cluster.interface=ib0"],
        "cluster.host: set host or interface, not both",
    ),
    "wait_for_workers_0": (
        ["cluster=ssh", "cluster.wait_for_workers=0"],
        "cluster.wait_for_workers: 0.0 is not allowed; allowed: numbers > 0",
    ),
    "missing_certificate": (
        ["cluster.security.ca_file=/no/ca.pem", "cluster.security.cert=/no/cert.pem"],
        "cluster.security.ca_file: /no/ca.pem is not a file",
    ),
    "certificate_without_ca": (
        ["cluster=ssh", "cluster.security.cert=/no/cert.pem"],
        "cluster.security.ca_file: is not set; TLS needs ca_file and cert",
    ),
    "temporary_and_files": (
        ["cluster.security.temporary=true", "cluster.security.ca_file=/no/ca.pem"],
        "cluster.security: set either temporary or ca_file and cert, not both",
    ),
    "temporary_for_a_scheduler_we_do_not_start": (
        ["cluster=address", "cluster.security.temporary=true"],
        "cluster.security.temporary: the pipeline does not start this scheduler",
    ),
    "temporary_certificates_directory": (
        ["cluster=slurm", "cluster.security.directory=/no/such/dir"],
        "cluster.security.directory: /no/such/dir is not a directory; allowed: an existing "
        "directory (null: the system's temporary directory)",
    ),
    "tls_address_without_certificates": (
        ["cluster=address", "cluster.address=tls://127.0.0.1:8786"],
        "cluster.address: tls://127.0.0.1:8786 needs cluster.security.ca_file and cert",
    ),
    "unknown_kind": (
        ["kind=nope"],
        # every kind registered, an installed plug-in's too (the Hydra group's options)
        f"kind=nope: no such kind; allowed: {', '.join(sorted(KINDS.names()))}",
    ),
    "a_key_of_a_kind_not_chosen": (
        ["training.max_epochs=3"],
        "training.max_epochs: is a key of kind=training, which this config does not choose; "
        "allowed: kind=training (or an experiment of that kind) with it",
    ),
}


def first_error(*overrides: str) -> str | None:
    """The message ``python -m pipeline.sweep experiment=smoke <overrides>`` stops with."""
    try:
        register()
        problem = check_overrides(["experiment=smoke", *overrides])
        if problem:
            return problem
        validate(composed(*overrides))
    except ConfigError as error:
        return str(error)
    return None


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_configuration(case):
    overrides, expected = BAD[case]
    message = first_error(*overrides)
    assert message is not None and "\n" not in message
    assert expected in message, message


def test_python_refuses_an_unknown_key_as_the_command_line_does():
    with pytest.raises(
        ConfigError, match=r"^methods.grid.seed: unknown key; did you mean methods.grid.seeds\?"
    ):
        run(["experiment=smoke", "+methods.grid.seed=[1,2]"])


def test_sections_typed_as_mappings_take_keys_of_their_own():
    """``+key`` is refused where the schema declares the keys; a mapping's are its own (ssh's
    connect_options for asyncssh, a parameterisation's most states)."""
    ssh, _ = compose(["cluster=ssh", "+cluster.connect_options.port=2222"])
    assert dict(ssh.cluster.connect_options) == {"port": 2222}
    lm, _ = compose(["experiment=lm_smoke", "+training.max_states.neural=512"])
    assert lm.training.max_states.neural == 512


FLAGS = {
    "info_with_a_bad_override": (
        ["--info", "all", "experiment=nope"],
        "experiment=nope: no such experiment; allowed: coupled",
    ),
    "info_after_a_bad_override": (
        ["experiment=smoke", "methods.grid.horizon=abc", "--info"],
        "methods.grid.horizon: Value 'abc' of type 'str' could not be converted to Integer",
    ),
    "info_with_an_added_key": (["--info", "config", "+foo=1"], "foo: unknown key; allowed: kind"),
    "info_taking_an_override_for_its_choice": (
        ["--info", "experiment=smoke"],
        "--info/-i: invalid choice: 'experiment=smoke' (choose from 'all', 'config'",
    ),
    "hydra_help_with_a_bad_override": (
        ["--hydra-help", "experiment=nope"],
        "experiment=nope: no such experiment",
    ),
    "cfg_with_a_bad_override": (
        ["--cfg", "job", "+methods.grid.seed=[1]"],
        "methods.grid.seed: unknown key",
    ),
    "multirun_with_a_bad_override": (
        ["-m", "experiment=nope"],
        "experiment=nope: no such experiment",
    ),
    "multirun_with_a_bad_value_in_a_sweep": (
        ["-m", "experiment=smoke", "methods.grid.horizon=3,0"],
        "methods.grid.horizon: 0 is not allowed; allowed: integers >= 1",
    ),
    "multirun_with_a_sweep_it_cannot_make": (
        ["-m", "experiment=smoke", "methods.grid.horizon=interval(1,2)"],
        "BasicSweeper does not support sweep type : INTERVAL_SWEEP",
    ),
    "run_with_a_bad_override": (["--run", "experiment=nope"], "experiment=nope: no such"),
    "two_commands": (
        ["-m", "--cfg", "job"],
        "--multirun --cfg: one at a time; allowed: one of --run, --multirun, --cfg, --info",
    ),
    "resolve_without_cfg": (["--resolve"], "--resolve: shapes what --cfg shows; allowed: with"),
    "package_without_cfg": (["--package", "grid"], "--package: shapes what --cfg shows"),
    "shell_completion": (
        ["--shell-completion", "install=bash"],
        "--shell-completion: Hydra's completion does not reach python -m pipeline.sweep",
    ),
    "experimental_rerun": (
        ["--experimental-rerun", "config.pickle"],
        "--experimental-rerun: reads the .hydra/ folder a sweep does not write",
    ),
    "another_config": (
        ["--config-name", "mine"],
        "--config-name: the sweep composes its own config (the project's conf/); allowed: configs "
        "of your own in conf/ here or in $PIPELINE_CONFIG_DIR",
    ),
    "an_unknown_flag": (["--dry-run"], "--dry-run: is not a flag of Hydra's"),
}
"""Hydra's flags with a bad override, or as the sweep does not take them: (argv, message)."""


def refusal(argv: list[str], cwd, monkeypatch, capsys) -> str:
    """The one line ``python -m pipeline.sweep <argv>``, its ``main`` run in this process from
    ``cwd``, ends with: it exits with status 2, printing nothing else."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["pipeline.sweep", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == "", err
    (line,) = err.splitlines()
    assert line.startswith("error: "), line
    return line


@pytest.mark.parametrize("case", sorted(FLAGS))
def test_hydras_flags_refuse_in_one_line_with_exit_status_2(case, monkeypatch, capsys, tmp_path):
    argv, expected = FLAGS[case]
    line = refusal(argv, tmp_path, monkeypatch, capsys)
    assert expected in line, line
    assert list(tmp_path.iterdir()) == []  # not even Hydra's log folder


def test_a_store_name_too_long_for_the_file_system_is_refused_naming_its_limit(tmp_path):
    """The store's name leaves room for the names the sweep makes beside it; each folder to
    be made must fit a name. A name just short enough is taken, and what the sweep names
    after it fits."""
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")

    def problem(store: str) -> str | None:
        register()
        return check_overrides(["experiment=smoke", f"store={tmp_path}/{store}"])

    fits = "x" * (longest - NAME_MARGIN - 5) + ".zarr"
    assert problem("x" * 300 + ".zarr") == (
        f"store: the store's name 'xxxxxxxxxxxxxxxxxxxxx...' is 305 bytes long; the file "
        f"system of {tmp_path} allows {longest} in a name, and the sweep names what it makes "
        f"beside the store after it with up to {NAME_MARGIN} more (.<name>.<pid>.creating, "
        f"<name>.lock); allowed: a name of at most {longest - NAME_MARGIN} bytes"
    )
    assert f"is {len(fits) + 1} bytes long" in problem("x" + fits)
    assert problem(f"{'y' * 300}/{fits}") == (
        f"store: the folder name 'yyyyyyyyyyyyyyyyyyyyy...' is 300 bytes long; the file system "
        f"of {tmp_path} allows {longest} in a name; allowed: a name of at most {longest} bytes"
    )
    deep = "/".join(["z" * 200] * 21)  # each name fits, the path does not
    most = os.pathconf(tmp_path, "PC_PATH_MAX")
    assert f"; the file system of {tmp_path} allows {most} in a path" in problem(f"{deep}/{fits}")
    assert list(tmp_path.iterdir()) == []
    assert problem(fits) is None
    lock_path(tmp_path / fits).touch()
    (tmp_path / f".{fits}.4194304.discarded").mkdir()  # the longest name made beside a store


def _ranged(schema: type, prefix: str = ""):
    """``(key, Range)`` of every field of ``schema`` and its nested sections that declares one."""
    hints = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        hint = hints[field.name]
        inner = [t for t in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(t)]
        if "range" in field.metadata:
            yield f"{prefix}{field.name}", field.metadata["range"]
        elif inner:
            yield from _ranged(inner[0], f"{prefix}{field.name}.")


SECTIONS = {
    "training": "lm_smoke",
    "coupled": "coupled_smoke",
    "kernel_features": "kernel_features",
    "learning": "learning_smoke",
}
"""The experiment that sets each kind's section (the other keys: ``smoke``)."""


def test_every_declared_range_refuses_a_value_just_outside_it_at_its_key():
    """Every range on the schema is checked: each key set just below its least value (or at
    it, where the least is excluded, or above its most) is refused in one line naming it."""
    configs = {name: composed(f"experiment={name}") for name in ("smoke", *SECTIONS.values())}
    checked = []
    for key, rule in _ranged(sweep_config()):
        *parents, name = key.split(".")
        cfg = copy.deepcopy(configs[SECTIONS.get(parents[0], "smoke") if parents else "smoke"])
        section = OmegaConf.select(cfg, ".".join(parents)) if parents else cfg
        bound = section[rule.least] if isinstance(rule.least, str) else rule.least
        if bound is None:
            bound = rule.most
            outside = bound if rule.below else bound + 1
        else:
            outside = bound if rule.above else bound - 1
        current = section[name]
        OmegaConf.update(cfg, key, [outside] if isinstance(current, ListConfig) else outside)
        with pytest.raises(ConfigError) as error:
            validate(cfg)
        message = str(error.value)
        assert message.startswith(f"{key}: ") and "allowed: " in message, (key, message)
        assert "\n" not in message
        checked.append(key)
    expected = {
        "methods.grid.horizon",
        "methods.timing.max_repeats",
        "coupled.topp",
        "training.clip",
    }
    assert expected <= set(checked)
    assert len(checked) >= 50


def test_good_configurations_pass():
    assert first_error() is None
    assert first_error("methods.grid.methods={topp:[0.9],topk:[1,20],topp_states:[0.999]}") is None


def test_choosing_a_kind_sets_its_section_to_its_defaults_before_the_overrides():
    cfg = composed("kind=training", "training.max_epochs=3")
    assert cfg.kind == "training" and cfg.training.max_epochs == 3 and cfg.coupled is None
    alone = compose(["kind=training", "training.max_epochs=3"])[0]  # no experiment named
    assert alone.methods is None  # the default experiment is the methods kind's: left out
    assert alone.training == cfg.training and validate(alone).SECTION == "training"
    assert cfg.training.patience is None and cfg.training.lr_patience == 1  # the defaults


def test_an_override_of_the_methods_replaces_the_experiments():
    replaced = composed("experiment=methods", "methods.grid.methods={topk:[3]}")
    assert dict(replaced.methods.grid.methods) == {"topk": [3]}  # replaces, never merges


OLD_LAYOUT = """\
# @package _global_
grid:
  families: [bell]
  n_states: [12]
  methods: {topp: [0.9]}
  seeds: [3]
timing:
  enabled: false
"""
"""An experiment of the layout before the methods kind had its section."""


def test_a_key_of_the_old_layout_moves_into_the_methods_section_with_one_line(
    tmp_path, monkeypatch, capsys
):
    """An override and a config file of the old layout are accepted, each old key announced
    once on stderr with its new place, however often the config is composed."""
    monkeypatch.setattr(moved, "_announced", set())
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "old.yaml").write_text(OLD_LAYOUT)
    monkeypatch.setenv(USER_CONFIG, str(tmp_path))
    for _ in range(2):
        cfg = composed("experiment=old", "grid.horizon=4")
    assert capsys.readouterr().err.splitlines() == [
        "grid.horizon is deprecated: use methods.grid.horizon",
        "grid is deprecated: use methods.grid",
        "timing is deprecated: use methods.timing",
    ]
    section = cfg.methods
    assert list(section.grid.families) == ["bell"] and list(section.grid.seeds) == [3]
    assert section.grid.horizon == 4 and section.timing.enabled is False
    assert "grid" not in cfg and "timing" not in cfg
    validate(cfg)


def test_a_key_set_at_its_old_and_its_new_place_is_refused_in_one_line(tmp_path, monkeypatch):
    expected = (
        "grid.seeds: is set at its old place and at its new one, methods.grid.seeds; allowed: "
        "methods.grid.seeds alone (the top-level grid.seeds is deprecated)"
    )
    with pytest.raises(ConfigError) as error:
        compose(["experiment=smoke", "grid.seeds=[0]", "methods.grid.seeds=[1]"])
    assert str(error.value) == expected
    (tmp_path / "experiment").mkdir()  # a file of the old layout over one of the new
    (tmp_path / "experiment" / "mixed.yaml").write_text(
        "# @package _global_\ndefaults:\n  - smoke\ngrid:\n  seeds: [5]\n"
    )
    monkeypatch.setenv(USER_CONFIG, str(tmp_path))
    with pytest.raises(ConfigError) as error:
        compose(["experiment=mixed"])
    assert str(error.value) == expected


def assert_one_line_error(result, expected: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr and "Dask dashboard" not in result.stderr


def test_bad_configuration_end_to_end(tmp_path):
    """The command line's representative: exit status 2, one line, nothing written."""
    overrides, expected = BAD["k_not_integer"]
    result = sweep(*TINY, *overrides, cwd=tmp_path, timeout=120)
    assert_one_line_error(result, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even Hydra's log folder


def test_unwritable_store(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    for store, expected in [
        (
            f"{blocker}/results.zarr",
            f"store: cannot create {blocker}/results.zarr: {blocker} is not a directory",
        ),
        # accepted by a permission check (root may write anywhere), refused by the file system
        ("/proc/results.zarr", "store: cannot write /proc/results.zarr: /proc refuses new files ("),
        (
            str(blocker),
            f"store: {blocker} is a file; a store is a directory: give another path (store=)",
        ),
    ]:
        line = refusal([*TINY, f"store={store}"], tmp_path, monkeypatch, capsys)
        assert expected in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_store_of_another_grid(tmp_path, monkeypatch, capsys, caplog):
    """The sweep refuses a store of another grid in one line, before a cluster starts
    (``test_store.py`` replaces one with overwrite=true, in this process)."""
    path = tmp_path / "results.zarr"
    grid = MethodsGrid.from_config(
        composed("methods.grid.horizon=3", "methods.grid.families=[bell]")
    )
    ResultStore.open(path, SCHEMA, grid, {})
    caplog.set_level(logging.INFO)
    argv = [*TINY, "methods.grid.horizon=4", "methods.grid.families=[bell]", f"store={path}"]
    line = refusal(argv, tmp_path, monkeypatch, capsys)
    assert (
        "holds a different sweep: horizon is 3 in the store but 4 "
        "in this run; choose another store= or pass overwrite=true"
    ) in line, line
    assert "Dask scheduler" not in caplog.text


def test_a_checkout_reads_the_configs_of_its_top_level_once(monkeypatch, tmp_path):
    """In a checkout the project's configs are ``conf/`` and ``dask_cluster.yaml`` of the
    repository's top level, with no second copy in the package; run from there, they are the
    working directory's too, and nothing adds them to Hydra's search path again. A folder
    named both by ``$PIPELINE_CONFIG_DIR`` and as ``./conf`` is searched once."""
    assert CONFIG_DIR == REPOSITORY / "conf" and (CONFIG_DIR / "config.yaml").is_file()
    assert SHIPPED_CLUSTERS == REPOSITORY / "dask_cluster.yaml"
    assert not (REPOSITORY / "pipeline" / "conf").exists()
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.setenv(USER_CONFIG, str(CONFIG_DIR))
    assert user_configs() == [] and cluster_file().resolve() == SHIPPED_CLUSTERS
    assert not [o for o in replaceable(["experiment=smoke"]) if o.startswith("hydra.")]
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(USER_CONFIG, "conf")
    assert user_configs() == [(tmp_path / "conf").resolve()]
    assert replaceable([])[-1] == f"hydra.searchpath=[file://{(tmp_path / 'conf').resolve()}]"


def test_cluster_file_errors(tmp_path, monkeypatch, capsys):
    (tmp_path / "dask_cluster.yaml").write_text("mine:\n  kind: local\n  workers: 3\n")
    with pytest.raises(
        ConfigError,
        match=r"mine.workers: unknown key for a local cluster; "
        r"allowed: kind, n_workers",
    ):
        load_clusters(tmp_path / "dask_cluster.yaml")
    (tmp_path / "dask_cluster.yaml").write_text("mine:\n  kind: cloud\n")
    with pytest.raises(ConfigError, match="unknown kind 'cloud'"):
        load_clusters(tmp_path / "dask_cluster.yaml")
    assert "unknown kind 'cloud'" in refusal(TINY, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("mine:\n  kind: local\n  n_workers: abc\n", r"mine.n_workers: Value 'abc' .* Integer"),
        ("mine:\n  kind: local\n  memory_limit: [1]\n", r"mine.memory_limit: .*'list'"),
        ("mine:\n  kind: ssh\n  security: {temporary: maybe}\n", r"mine.security.temporary: "),
        ("mine: 5\n", r"mine: 5 is not allowed; allowed: a mapping"),
        ("- mine\n", r"holds a list; allowed: a mapping of names to entries"),
    ],
)
def test_a_wrong_typed_cluster_file_is_named_in_one_line(tmp_path, text, named):
    (tmp_path / "dask_cluster.yaml").write_text(text)
    with pytest.raises(ConfigError, match=named) as error:
        load_clusters(tmp_path / "dask_cluster.yaml")
    assert "\n" not in str(error.value)


def test_missing_optional_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # as if it were not installed
    with pytest.raises(ConfigError) as error, connect(composed("cluster=slurm").cluster):
        pass
    assert str(error.value) == (
        "cluster: cluster=slurm needs dask_jobqueue: pip install -e '.[jobqueue]' in the clone "
        "of pipeline"
    )


def test_cluster_file_security_section(tmp_path):
    path = tmp_path / "dask_cluster.yaml"
    path.write_text("mine:\n  kind: slurm\n  security: {temporary: true}\n")
    assert load_clusters(path)["mine"].security.temporary is True
    path.write_text("mine:\n  kind: slurm\n  security: {ca: x.pem}\n")
    with pytest.raises(ConfigError, match=r"mine.security.ca: unknown key for security; allowed"):
        load_clusters(path)
    path.write_text("mine:\n  kind: ssh\n  security: true\n")
    with pytest.raises(
        ConfigError, match=r"mine.security: True is not allowed; allowed: a mapping"
    ):
        load_clusters(path)


def test_every_key_of_the_cluster_file_is_documented():
    """Each key of every schema appears in dask_cluster.yaml's comments or entries."""
    text = SHIPPED_CLUSTERS.read_text()
    for schema in {*(backend.schema for backend in BACKENDS.values()), SecurityConfig}:
        for key in (f.name for f in dataclasses.fields(schema)):
            assert re.search(rf"^\s*#?\s*{key}:", text, re.MULTILINE), key
