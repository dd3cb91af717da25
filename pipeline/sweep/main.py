"""The sweep's command line (``python -m pipeline.sweep``): overrides to store, one-line errors.

Hydra composes the config (so its flags, multirun and ``--cfg`` work); a flag the sweep
does not take, a bad override, a bad value or a store that cannot be used, in any job of a
multirun, is reported in one line before Hydra starts (``check_overrides``), so nothing is
written and no cluster starts. Running the same command again resumes: only cells not yet
done are computed.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import hydra
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from pipeline.results import open_results
from pipeline.sweep.backends import NoWorkers
from pipeline.sweep.config import compose, register, replaceable
from pipeline.sweep.config.compose import (
    CONFIG_DIR,
    VERSION_BASE,
    compose_with_hydra,
    sweep_jobs,
    without_default_sweep,
)
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.moved import normalise
from pipeline.sweep.engine import default_store, prepare, sweep
from pipeline.sweep.help import text as help_text
from pipeline.sweep.provenance import shown_config


def store_path(cfg) -> Path:
    """``store`` if set; else ``outputs/<experiment>/results.zarr`` (a multirun job's own dir)."""
    if cfg.store:
        return Path(cfg.store)
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        return Path(hydra_cfg.runtime.output_dir) / "results.zarr"
    return default_store(hydra_cfg.runtime.choices["experiment"])


def run(cfg) -> int:
    """The sweep of a config Hydra composed (a config file of the old layout moved into the
    methods section first, ``moved.normalise``), with its summary; the exit status (1 if any
    cell failed)."""
    hydra = HydraConfig.get()
    without_default_sweep(cfg, hydra.runtime.choices["experiment"], hydra.overrides.task)
    normalise(cfg, hydra.overrides.task)
    outcome = sweep(cfg, store_path(cfg))
    print(outcome.kind.summary(open_results(outcome.store).load()))
    print(f"results: {outcome.store}  (xr.open_zarr({str(outcome.store)!r}))")
    failed = outcome.failed
    for line in [*failed.lines(), failed.closing()] if failed else []:
        print(line, file=sys.stderr)
    return 1 if failed else 0


@hydra.main(version_base=VERSION_BASE, config_path=str(CONFIG_DIR), config_name="config")
def _hydra_main(cfg) -> None:
    try:
        status = run(cfg)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except NoWorkers as error:
        print(
            f"error: {error}; finished cells are stored: run the same command to resume",
            file=sys.stderr,
        )
        sys.exit(1)
    if status:
        sys.exit(status)


JOB_NAME = Path(__file__).stem
"""Hydra's name of the sweep's job (the name of the file of its main function)."""
OWN_CONFIG = (
    "the sweep composes its own config (the project's conf/); allowed: configs of your own in "
    "conf/ here or in $PIPELINE_CONFIG_DIR (experiment=NAME reads <folder>/experiment/NAME.yaml)"
)


def _check_flags(args: argparse.Namespace) -> None:
    """Raise ``ConfigError`` for a flag of Hydra's the sweep does not take, or in a combination
    Hydra would answer with a traceback."""
    commands = {
        "--run": args.run,
        "--multirun": args.multirun,
        "--cfg": args.cfg is not None,
        "--info": args.info is not None,
        "--shell-completion": args.shell_completion,
    }
    given = [flag for flag, on in commands.items() if on]
    if len(given) > 1:
        raise ConfigError(" ".join(given), "one at a time; allowed: one of " + ", ".join(commands))
    if given == ["--shell-completion"]:
        raise ConfigError(
            "--shell-completion",
            "Hydra's completion does not reach python -m pipeline.sweep; allowed: --help for "
            "the most used keys, --cfg job for every key",
        )
    if args.experimental_rerun is not None:
        raise ConfigError(
            "--experimental-rerun",
            "reads the .hydra/ folder a sweep does not write (it would hold secrets in clear); "
            "allowed: the same command again, which resumes",
        )
    for flag in ("config_path", "config_name", "config_dir"):
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}", OWN_CONFIG)
    for flag in ("package", "resolve"):
        if getattr(args, flag) and args.cfg is None:
            raise ConfigError(f"--{flag}", "shapes what --cfg shows; allowed: with --cfg")


def arguments(argv: list[str]) -> argparse.Namespace:
    """Hydra's arguments of the command line ``argv`` (its flags and overrides); ``ConfigError``
    (one line) for what Hydra's parser refuses and for flags the sweep does not take."""
    parser = get_args_parser()
    parser.exit_on_error = False
    try:
        args, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as error:
        raise ConfigError(error.argument_name or "arguments", error.message) from None
    if unknown:
        raise ConfigError(
            unknown[0], "is not a flag of Hydra's; allowed: key=value, the flags of --hydra-help"
        )
    _check_flags(args)
    return args


def _planned_store(cfg, experiment: str, overrides: list[str], *, multirun: bool) -> Path:
    """The store a job of the command line writes (``store_path``, before Hydra runs):
    ``store``; a multirun job's own, made under ``hydra.sweep.dir``; or the experiment's."""
    if cfg.store:
        return Path(cfg.store)
    if multirun:
        hydra_cfg = compose_with_hydra(overrides, job_name=JOB_NAME).hydra
        return Path(hydra_cfg.sweep.dir) / "results.zarr"
    return default_store(experiment)


def check_overrides(argv: list[str]) -> str | None:
    """Check the command line ``argv`` once, before Hydra starts, so a rejected one writes
    nothing (not even Hydra's log folder): the one line saying what is wrong (a flag it does
    not take, a bad override, a bad value, a store it cannot use), or None.

    Every job of a multirun is composed and checked; ``--cfg``, ``--info`` and
    ``--hydra-help``, which run nothing, need only their overrides to compose.
    """
    try:
        args = arguments(argv)
        runs = args.cfg is None and args.info is None and not args.hydra_help
        for overrides in sweep_jobs(args.overrides) if args.multirun else [args.overrides]:
            cfg, experiment = compose(overrides)
            if runs:
                prepare(cfg, _planned_store(cfg, experiment, overrides, multirun=args.multirun))
    except ConfigError as error:
        return str(error)
    return None


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: register configs, report bad overrides in one line, run under Hydra."""
    if sys.argv[1:2] == ["--version"]:
        from pipeline import __version__

        print(f"pipeline {__version__}")
        return
    if any(flag in ("--help", "-h") for flag in sys.argv[1:]):
        print(help_text())
        return
    try:
        register()
        problem = check_overrides(sys.argv[1:])
        # Hydra's --cfg would print secrets: the same config, redacted as in the store
        shown = None if problem else shown_config(arguments(sys.argv[1:]), job_name=JOB_NAME)
    except ConfigError as error:
        problem = str(error)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    if shown is not None:
        sys.stdout.write(shown)
        return
    sys.argv[1:] = replaceable(sys.argv[1:])
    signal.signal(signal.SIGTERM, _stop)
    try:
        _hydra_main()
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished cells are stored; run the same command to resume",
            file=sys.stderr,
        )
        sys.exit(130)


if __name__ == "__main__":
    main()
