"""Every ``python -m pipeline.sweep`` command the documentation gives passes the checks the
sweep runs before Hydra and any cluster (``check_overrides``): the README, the docs, the
reports' READMEs and the experiments' comments. A config key that is renamed, or a
section that comes to refuse a documented narrowing of an experiment, fails here rather
than on a user's first try. What a command reads that an earlier step makes or fetches (a
trained model, a fetched corpus, a user's own file) may be missing: its one-line error is
allowed, in a working folder of its own where nothing of this repository's outputs is."""

import re
import shlex
from pathlib import Path

import pytest

from pipeline.sweep.main import check_overrides

from helpers import REPOSITORY, readme_blocks

COMMAND = re.compile(r"^(?:\.venv/bin/)?python -m pipeline\.sweep\b")
INLINE = re.compile(r"`((?:\.venv/bin/)?python -m pipeline\.sweep\b[^`]*)`")

PLACEHOLDERS = ("job|hydra|all", "cluster=mycluster")
"""Commands that stand for a family of them, or name a config the reader writes."""

MADE_FIRST = ("does not exist", "is not a file", "fetch it once: python -m pipeline.corpus")
"""The errors of an input an earlier documented step makes or fetches."""

PLUG_INS = "docs/guide/plugins.md"
"""Its commands run the example plug-ins, which a reader installs first."""


def _pages() -> list[Path]:
    return [
        REPOSITORY / "README.md",
        *sorted((REPOSITORY / "docs").rglob("*.md")),
        *sorted((REPOSITORY / "reports").rglob("README.md")),
    ]


def _joined(lines: list[str]) -> list[str]:
    """``lines`` with each backslash continuation joined to the line before."""
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
        else:
            joined.append(line.strip())
    return joined


def documented() -> dict[str, str]:
    """Each documented sweep command, with the first page that gives it: the lines of the
    pages' fenced blocks and their inline code, and the experiments' comment lines."""
    found: dict[str, str] = {}
    for page in _pages():
        name = str(page.relative_to(REPOSITORY))
        blocks = [b for shell in ("bash", "console", "sh") for b in readme_blocks(shell, name)]
        lines = [line for block in blocks for line in _joined(block.splitlines())]
        lines += INLINE.findall(page.read_text())
        for line in lines:
            if COMMAND.match(line):
                found.setdefault(line.split(" # ")[0].strip(), name)
    for config in sorted((REPOSITORY / "conf" / "experiment").glob("*.yaml")):
        comments = [line[1:].strip() for line in config.read_text().splitlines() if line[:1] == "#"]
        for line in _joined(comments):
            if COMMAND.match(line):
                found.setdefault(line, str(config.relative_to(REPOSITORY)))
    return found


COMMANDS = documented()
CHECKED = sorted(
    command
    for command, page in COMMANDS.items()
    if page != PLUG_INS and not any(p in command for p in PLACEHOLDERS)
)


def test_the_documentation_gives_the_commands_it_is_known_to_give():
    """The extraction finds what the pages hold: the quick start's, each paper's experiment,
    a command continued over lines, one in an experiment's comment."""
    assert "python -m pipeline.sweep" in COMMANDS
    for experiment in ("smoke", "paper", "coupled", "lm_scaling", "scale_10m", "learning"):
        assert f"python -m pipeline.sweep experiment={experiment}" in COMMANDS
    continued = [c for c, page in COMMANDS.items() if page == "conf/experiment/paper.yaml"]
    assert any("training.clusters=0" in c and "store=" in c for c in continued), continued
    assert len(CHECKED) >= len(COMMANDS) - 4  # the plug-ins' two and the two placeholders


def _id(command: str) -> str:
    return command.split("pipeline.sweep", 1)[1].strip()[:60] or "(no overrides)"


@pytest.mark.parametrize("command", CHECKED, ids=_id)
def test_a_documented_sweep_command_passes_the_sweeps_checks(command, tmp_path, monkeypatch):
    page = COMMANDS[command]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no corpus fetched
    words = shlex.split(command)[3:]
    overrides = [w for w in words if not w.startswith("store=")]
    problem = check_overrides([*overrides, f"store={tmp_path / 'results.zarr'}"])
    assert problem is None or any(reason in problem for reason in MADE_FIRST), (page, problem)
    assert problem is None or "\n" not in problem
