"""``python -m pipeline.sweep --help``: what the command does, its most used keys, examples
and the experiments, with every key's meaning read from the schema (``config.reference``)."""

from __future__ import annotations

import re
import textwrap

from pipeline.sweep.config.compose import user_configs
from pipeline.sweep.config.reference import experiments, keys
from pipeline.sweep.config.schema import CONFIG_DIR, sweep_config
from pipeline.sweep.kind import installed

MOST_USED = (
    "methods.grid.families",
    "methods.grid.n_states",
    "methods.grid.methods",
    "methods.grid.horizon",
    "methods.grid.seeds",
    "methods.grid.modes",
    "store",
    "overwrite",
    "methods.timing.enabled",
    "max_cells",
)
"""The keys ``--help`` shows; ``--cfg job`` and the documentation list all of them."""

COLUMN = max(map(len, MOST_USED))
"""The width of the keys' column, the longest key's."""

EXAMPLES = """\
  python -m pipeline.sweep experiment=smoke
  python -m pipeline.sweep experiment=methods 'methods.grid.methods={topp:[0.5,0.9]}'
  python -m pipeline.sweep experiment=file methods.model.file.path=my_hmm.npz cluster=machine"""


def _first_sentence(text: str) -> str:
    """The first sentence of ``text``, whole, without its literal marks (````)."""
    plain = " ".join(text.replace("``", "").split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", plain, maxsplit=1)[0]


def _entry(name: str, text: str, width: int, column: int = 16) -> list[str]:
    """``name`` in ``column`` columns and ``text`` wrapped beside it to ``width`` columns,
    never cut."""
    return textwrap.wrap(
        text, width, initial_indent=f"  {name:{column}} ", subsequent_indent=" " * (column + 3),
        break_on_hyphens=False,
    )  # fmt: skip


def _kind_lines(width: int) -> list[str]:
    """``kind=NAME``: every installed kind, wrapped under the key."""
    names = ", ".join(
        f"{name} ({kind.SECTION}.*{', the default' if name == 'methods' else ''})"
        for name, kind in installed().items()
    )
    return _entry(
        "kind=NAME", f"the kind of sweep, each reading its own keys: {names}", width, COLUMN
    )


def text(width: int = 100) -> str:
    """The help, no line past ``width`` columns: what the command does, the most used keys
    (each with the first sentence of its meaning, wrapped), three examples, the experiments
    (their summaries, wrapped), and where to read the rest."""
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
        lines += _entry(name, _first_sentence(meanings[name].meaning), width, COLUMN)
    lines += [
        *_entry(
            "cluster=NAME", f"where the work runs: {meanings['cluster'].allowed}", width, COLUMN
        ),
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
        lines += _entry(experiment.name, experiment.summary, width)
    lines += [
        "",
        "Every key with its meaning: --cfg job shows the composed config; the documentation's",
        "configuration reference lists each key's meaning, default and allowed values.",
        "Hydra's own flags: --hydra-help.",
    ]
    return "\n".join(lines)
