"""Hydra's record of a multirun, ``<hydra.sweep.dir>/multirun.yaml``, without secrets.

Hydra's basic sweeper saves the whole config of a multirun there before its first job,
secrets included (an SSH password in ``cluster.connect_options``, a token in
``hydra.job.env_set``, in the config and in the overrides Hydra records). A sweeper of our
own cannot take its place: Hydra instantiates only sweepers of its ``hydra_plugins``
package. ``SecretFreeRecord``, a Hydra callback (``hydra.callbacks`` in
``conf/config.yaml``), keeps them out instead: where the config holds a secret, it
links ``multirun.yaml`` to ``/dev/null`` before the sweeper saves (so the config in clear
goes nowhere), and puts the config redacted as the store's is (``provenance.redacted``) in
the link's place as the first job starts. A multirun stopped before that leaves the link,
which holds nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from pipeline.sweep.provenance import redacted

RECORD = "multirun.yaml"
"""The name of Hydra's record of a multirun, in ``hydra.sweep.dir``."""


def _replace(path: Path, make) -> None:
    """Put what ``make(temporary)`` makes at a temporary path beside ``path`` in its place,
    by a rename: ``path`` is whole at every moment."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    make(temporary)
    os.replace(temporary, path)


class SecretFreeRecord(Callback):
    """Hydra's record of a multirun with its secrets redacted (the module's docstring)."""

    def __init__(self) -> None:
        self.pending: tuple[Path, str] | None = None  # the record and its path, until a job

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        plain = OmegaConf.to_container(config, resolve=False)  # as Hydra saves it
        public = redacted(plain)
        if public == plain:
            return  # no secret: Hydra's record is the config as it is
        path = Path(config.hydra.sweep.dir) / RECORD
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _replace(path, lambda link: link.symlink_to(os.devnull))
        except OSError as error:
            # Hydra turns a callback's exception into a warning and goes on: stop here, or
            # the sweeper writes the secrets
            print(
                f"error: {path}: cannot keep the secrets of the config out of Hydra's record "
                f"of the multirun ({error.strerror}); allowed: secrets in files or in the "
                "environment, not in the config",
                file=sys.stderr,
            )
            sys.exit(2)
        self.pending = (path, OmegaConf.to_yaml(public))

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        if self.pending is not None:
            path, public = self.pending
            _replace(path, lambda record: record.write_text(public))
            self.pending = None
