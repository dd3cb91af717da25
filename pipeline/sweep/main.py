"""The sweep's command line (``python -m pipeline.sweep``): overrides to store, one-line errors.

Hydra composes the config (so its flags, multirun and ``--cfg`` work); a bad override, a
bad value or a store that cannot be used is reported in one line before Hydra starts
(``check_overrides``), so nothing is written and no cluster starts. Running the same
command again resumes: only cells not yet done are computed.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from pipeline.results import open_results
from pipeline.sweep.backends import NoWorkers
from pipeline.sweep.config import ConfigError, compose, register, replaceable
from pipeline.sweep.config.compose import CONFIG_DIR, VERSION_BASE
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
    """The sweep of a config Hydra composed, with its summary; the exit status (1 if any
    cell failed)."""
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


def check_overrides(overrides: list[str]) -> str | None:
    """Compose and check the config once, before Hydra starts, so a rejected config writes
    nothing (not even Hydra's log folder): the one line saying what is wrong (a bad
    override, a bad value, a store it cannot use), or None.

    Hydra's flags (``-m``, ``--cfg``, ``--help``...) and sweep syntax are left to Hydra.
    """
    if any(o.startswith("-") for o in overrides):
        return None
    try:
        cfg, experiment = compose(overrides)
        prepare(cfg, Path(cfg.store) if cfg.store else default_store(experiment))
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
        # Hydra's --cfg would print secrets: the same config, redacted as in the store
        shown = shown_config(sys.argv[1:], job_name=Path(__file__).stem)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if shown is not None:
        sys.stdout.write(shown)
        return
    problem = check_overrides(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
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
