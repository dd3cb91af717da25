"""What every kind's report is made of: the figures and Markdown it writes (``save``, which
returns an ``Analysis``) and the lines on where, when and in how many runs its store was made
(``run_lines``). Imports neither Hydra nor Dask."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure

from pipeline.results.config import stored_config


class Analysis(NamedTuple):
    """What ``analyze`` wrote: the Markdown report and its PNG figures."""

    report: Path
    figures: list[Path]


def save(out: Path, figures: dict[str, Figure], report: str) -> Analysis:
    """Write each figure to ``out/<name>`` as PNG and ``report`` to ``out/report.md``."""
    for name, figure in figures.items():
        figure.savefig(out / name, dpi=90)
    path = out / "report.md"
    path.write_text(report)
    return Analysis(path, [out / name for name in figures])


def run_lines(attrs: dict, threads: str) -> list[str]:
    """The report lines on where and when a store was made: machine, Dask (``threads``: what
    its BLAS threads were), run times and commit, and how its runs differed."""
    return [
        f"- machine: {attrs.get('host', '?')}: {attrs.get('cpu', '?')}, "
        f"{attrs.get('memory', '?')} memory; BLAS {attrs.get('blas', '?')}",
        f"- Dask: {attrs.get('workers', '?')} workers; {threads}",
        f"- run: {attrs.get('start_time', '?')} to {attrs.get('end_time', '?')}, "
        f"commit {attrs.get('git_commit', '?')}",
        *runs_lines(attrs.get("runs") or []),
    ]


def _flat(value, prefix: str = "") -> dict[str, object]:
    """The leaves of a nested mapping by dotted key (``{"a": {"b": 1}}``: ``{"a.b": 1}``)."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    found: dict[str, object] = {}
    for key, inner in value.items():
        found |= _flat(inner, f"{prefix}.{key}" if prefix else str(key))
    return found


def runs_lines(runs: list[dict]) -> list[str]:
    """A line on a store made by more than one run (``runs``: the store's ``runs``
    attribute): how many, and every setting in which a later run's config or workers
    differed from the first's. A resume that would change a stored value is refused, so
    these are settings of how the runs ran (workers, threads, timing) or keys that grew
    the grid."""
    if len(runs) < 2:
        return []

    def settings(run: dict) -> dict[str, object]:
        flat = _flat(stored_config(run.get("config")))
        return flat | {"workers": run.get("workers"), "commit": run.get("git_commit")}

    first, changes = settings(runs[0]), {}
    for run in runs[1:]:
        for key, value in settings(run).items():
            if value != first.get(key) and key not in changes:
                changes[key] = f"{key}: {first.get(key)} -> {value}"
    differed = "; ".join(changes.values()) if changes else "nothing"
    return [
        f"- {len(runs)} runs made this store; the later ones differed from the first in: {differed}"
    ]
