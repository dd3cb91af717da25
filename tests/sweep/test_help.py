"""``python -m pipeline.sweep --help`` says what the command does, its most used keys with their
meanings from the schema, examples and every experiment; ``--version`` the version."""

import sys

import pytest

from pipeline import __version__
from pipeline.sweep.config.reference import keys
from pipeline.sweep.config.schema import CONFIG_DIR, sweep_config
from pipeline.sweep.help import MOST_USED, text
from pipeline.sweep.main import main

from helpers import REPOSITORY


def _printed(capsys, monkeypatch, *argv: str) -> str:
    monkeypatch.setattr(sys, "argv", ["pipeline.sweep", *argv])
    main()
    return capsys.readouterr().out


def test_help_starts_with_what_the_command_does_and_lists_every_experiment(capsys, monkeypatch):
    """From the repository's top level, whose ``conf/`` is the project's: each experiment
    once."""
    monkeypatch.chdir(REPOSITORY)
    shown = _printed(capsys, monkeypatch, "--help")
    lines = shown.splitlines()
    assert lines[0].startswith("usage: python -m pipeline.sweep") and "Hydra" not in lines[0]
    assert "powered by Hydra" not in shown and len(lines) < 80  # a screen, with methods.*
    assert max(map(len, lines)) <= 110
    for name in MOST_USED:
        (line,) = [line for line in lines if line.startswith(f"  {name} ")]
        assert len(line.split(maxsplit=1)[1]) > 10, line  # its meaning, from the schema
    for path in (CONFIG_DIR / "experiment").glob("*.yaml"):
        assert sum(line.startswith(f"  {path.stem} ") for line in lines) == 1, path.stem
    assert shown.count("python -m pipeline.sweep experiment=") >= 3  # the examples


def test_every_key_of_the_schema_has_a_meaning_where_help_reads_it():
    found = {key.name: key for key in keys(sweep_config())}
    assert {"methods.grid.horizon", "methods.timing.enabled", "max_cells", "store"} <= set(found)
    assert not {"grid.horizon", "timing.enabled"} & set(found)  # the old layout's: not listed
    assert all(found[name].meaning for name in MOST_USED)


def test_help_wraps_every_description_and_cuts_none():
    shown = text()
    lines = shown.splitlines()
    assert max(map(len, lines)) <= 100
    assert not [line for line in lines if line.rstrip().endswith("...")]
    joined = " ".join(shown.split())
    overwrite = {key.name: key for key in keys(sweep_config())}["overwrite"].meaning
    assert overwrite.split(". ")[0] + "." in joined  # its whole first sentence
    assert "(required, except for a family whose parameters fix its size, a model file's)" in joined


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_and_version_start_no_sweep(flag, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert "usage:" in _printed(capsys, monkeypatch, "experiment=smoke", flag)
    assert _printed(capsys, monkeypatch, "--version").strip() == f"pipeline {__version__}"
    assert list(tmp_path.iterdir()) == []
