"""The reference pages generated from the code when the docs build: every config key (the
schema's fields and their docstrings, ``pipeline.sweep.config.reference``), every cluster
back-end's keys, and every stored variable of every sweep kind (``pipeline.results``)."""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.results.registry import BUILTIN, KINDS
from pipeline.sweep.backends import BACKENDS, SecurityConfig
from pipeline.sweep.config.reference import Key, cluster_entries, experiments, keys
from pipeline.sweep.config.schema import (
    CONFIG_DIR,
    SHIPPED_CLUSTERS,
    group_defaults,
    sweep_config,
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(found: list[Key]) -> list[str]:
    rows = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    rows += [
        f"| `{key.name}` | `{_cell(key.type)}` | `{_cell(key.default)}` | "
        f"{_cell(key.allowed)} | {_cell(key.meaning)} |"
        for key in found
    ]
    return rows


def _entries() -> list[str]:
    """Every entry of the shipped ``dask_cluster.yaml``: what it is and what it sets."""
    lines = []
    for entry in cluster_entries(SHIPPED_CLUSTERS):
        kind = entry.values["cluster.kind"]
        schema = BACKENDS[kind].schema
        defaults = {key.name: ast.literal_eval(key.default) for key in keys(schema, "cluster.")}
        rows = [
            f"| `{name}` | `{_cell(repr(value))}` |"
            for name, value in entry.values.items()
            if defaults.get(name) != value
        ]
        table = f"#kind-{'slurm-or-pbs' if kind in ('slurm', 'pbs') else kind}"
        lines += ["", f"### cluster={entry.name}", "", entry.summary, ""]
        if rows:
            lines += [f"Kind `{kind}`, every key as [its table]({table}) says but", ""]
            lines += ["| key | value |", "|---|---|", *rows]
        else:
            lines += [f"Kind `{kind}`, every key as [its table]({table}) says."]
    return lines


def config_page() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Every key of `python -m pipeline.sweep`, read from the schema that checks it",
        "(`pipeline/sweep/config/schema.py` and each kind's `pipeline/kinds/<kind>/config.py`):",
        "set any on the command line (`key=value`) or",
        "in an experiment file. A value outside what is allowed stops the sweep with one",
        "line naming the key, before any cluster starts. The methods kind's keys sat at the",
        "top level of the config before its section (`grid.modes`, `timing.repeats`): they are",
        "still accepted, with one line on stderr naming the new place (`methods.grid.modes`).",
        "",
        "## Experiments",
        "",
        "| experiment | what it runs |",
        "|---|---|",
    ]
    lines += [
        f"| `experiment={e.name}` | {_cell(e.summary)} |"
        for e in experiments([CONFIG_DIR / "experiment"])
    ]
    lines += ["", "## Sweep keys", "", *_table(keys(sweep_config(), chosen=group_defaults()))]
    lines += [
        "",
        "## Cluster entries",
        "",
        "`cluster=<name>` picks an entry of `dask_cluster.yaml` (the working directory's,",
        "else the one the package ships); its keys depend on its `kind`. The default of a key",
        "is what an entry that leaves it out gets ([Cluster keys by kind](#cluster-keys-by-kind));",
        "the entries of the `dask_cluster.yaml` the package ships set some of them:",
        *_entries(),
        "",
        "## Cluster keys by kind",
    ]
    schemas = {}
    for backend in BACKENDS.values():
        schemas.setdefault(backend.schema, []).append(backend.kind)
    for schema, kinds in schemas.items():
        lines += ["", f"### kind: {' or '.join(kinds)}", "", *_table(keys(schema, "cluster."))]
    lines += ["", "### security", "", *_table(keys(SecurityConfig, "cluster.security."))]
    return "\n".join(lines) + "\n"


def results_page() -> str:
    lines = [
        "# Results reference",
        "",
        "What each kind of sweep stores, read from `pipeline.results`: every variable with its",
        "dims, units and meaning, and, where a finished cell may hold NaN, why (the variable's",
        "`missing` attribute). Open a store with `xr.open_zarr(path)`.",
    ]
    for name in BUILTIN:
        schema = KINDS[name].schema
        lines += [
            "",
            f"## {name}",
            "",
            f"Cell dims: {', '.join(f'`{d}`' for d in schema.dims)}.",
            "",
            "| variable | dims | units | meaning | NaN when |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{var}` | {', '.join(variable.dims)} | {_cell(variable.units)} | "
            f"{_cell(variable.long_name)} | {_cell(variable.missing)} |"
            for var, variable in schema.variables.items()
        ]
    return "\n".join(lines) + "\n"


def write(folder: Path) -> None:
    """Write ``config.md`` and ``results.md`` into ``folder``."""
    folder.mkdir(exist_ok=True)
    for name, text in (("config.md", config_page()), ("results.md", results_page())):
        path = folder / name
        if not path.exists() or path.read_text() != text:  # unchanged: not rebuilt
            path.write_text(text)
