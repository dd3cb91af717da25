"""``python -m pipeline.sweep --help``: what the command does, its most used keys, examples
and the experiments, with every key's meaning read from the schema (``config.reference``)."""

from __future__ import annotations

import textwrap

from pipeline.sweep.config.compose import user_configs
from pipeline.sweep.config.reference import experiments, keys
from pipeline.sweep.config.schema import CONFIG_DIR, sweep_config

MOST_USED = (
    "grid.families",
    "grid.n_states",
    "grid.methods",
    "grid.horizon",
    "grid.seeds",
    "grid.modes",
    "store",
    "overwrite",
    "timing.enabled",
    "max_cells",
)
"""The keys ``--help`` shows; ``--cfg job`` and the documentation list all of them."""

EXAMPLES = """\
  python -m pipeline.sweep experiment=smoke
  python -m pipeline.sweep experiment=methods 'grid.methods={topp:[0.5,0.9]}' grid.seeds=[0,1]
  python -m pipeline.sweep experiment=file model.file.path=my_hmm.npz cluster=machine"""


def _one_line(text: str, width: int) -> str:
    """The first sentence of ``text``, cut at a word to ``width`` characters."""
    sentence = text.replace("``", "").split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= width else sentence[: width - 3].rsplit(" ", 1)[0] + "..."


def _kind_lines(width: int) -> list[str]:
    """``kind=NAME``: every installed kind, wrapped under the key."""
    from pipeline.sweep.kinds import installed  # the kinds' modules import the config

    names = ", ".join(
        f"{name} ({kind.SECTION}.*)" if kind.SECTION else f"{name} (grid.*, the default)"
        for name, kind in installed().items()
    )
    text = f"the kind of sweep, each reading its own keys: {names}"
    return textwrap.wrap(text, width - 2, initial_indent=f"  {'kind=NAME':16} ",
                         subsequent_indent=" " * 19)  # fmt: skip


def text(width: int = 100) -> str:
    """The help: what the command does, the most used keys (one line each), three examples,
    the experiments, and where to read the rest."""
    meanings = {key.name: key for key in keys(sweep_config())}
    lines = [
        "usage: python -m pipeline.sweep [experiment=NAME] [key=value ...]",
        "",
        "Runs a grid of HMM approximation experiments (models x sizes x methods x settings x",
        "seeds x modes) on a Dask cluster and stores each cell's error, bound and runtime in a",
        "resumable zarr store (default outputs/<experiment>/results.zarr); run the same command",
        "again to resume. Read the store with xr.open_zarr; report on it with",
        "python -m pipeline.analyze <store>.",
        "",
        "Most used keys (key=value; lists as [a,b], mappings as {k:[v]}):",
    ]
    for name in MOST_USED:
        lines.append(f"  {name:16} {_one_line(meanings[name].meaning, width - 19)}")
    lines += [
        "  cluster=NAME     where the work runs: an entry of dask_cluster.yaml (local, machine,",
        "                   address, slurm, pbs, ssh; a dask_cluster.yaml here replaces the",
        "                   shipped one)",
        *_kind_lines(width),
        "",
        "Examples:",
        EXAMPLES,
        "",
        "Experiments (experiment=NAME; your own: conf/experiment/NAME.yaml here, or in",
        "$PIPELINE_CONFIG_DIR/experiment/):",
    ]
    folders = [CONFIG_DIR / "experiment", *(folder / "experiment" for folder in user_configs())]
    for experiment in experiments(folders):
        lines.append(f"  {experiment.name:16} {_one_line(experiment.summary, width - 19)}")
    lines += [
        "",
        "Every key with its meaning: --cfg job shows the composed config; the documentation's",
        "configuration reference lists each key's meaning, default and allowed values.",
        "Hydra's own flags: --hydra-help.",
    ]
    return "\n".join(lines)
