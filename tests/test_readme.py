"""The README's commands are the ones CI and users run, and every one of them runs as
written: the worked example (the session's smoke sweep, its Python, its report, the help)
and the documentation's build."""

import shutil
import subprocess
import sys

import xarray as xr

from helpers import REPOSITORY, readme_blocks, readme_commands


def quick_start() -> list[str]:
    return [line for line in readme_blocks("bash")[0].splitlines() if line.strip()]


def test_two_commands_install_and_run_the_sweep_and_the_tests():
    run, test = quick_start()
    assert "pip install -e ." in run and run.endswith("python -m pipeline.sweep")
    assert '".[test]"' in test and test.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPOSITORY / ".ci" / "run").read_text().splitlines()
    assert quick_start()[1] in ci


def test_the_readme_is_a_door_not_the_manual():
    assert len((REPOSITORY / "README.md").read_bytes()) <= 8 * 1024


def test_the_worked_example_runs_as_written(smoke, tmp_path):
    """After the smoke sweep (the session's, run as the README says): its Python block, then
    every other command but the docs' build, in a copy of the sweep's folder (one grows its
    store)."""
    store, swept = smoke
    assert "bell        20            topp      0.9" in swept.stdout
    cwd = tmp_path / "example"
    shutil.copytree(store.parents[2], cwd)
    for block in readme_blocks("python"):
        subprocess.run([sys.executable, "-c", block], cwd=cwd, check=True, timeout=120)
    for command in readme_commands():
        if "sphinx" in command or command[1:] == ["-m", "pipeline.sweep", "experiment=smoke"]:
            continue
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr)
    assert (cwd / "outputs" / "smoke" / "results_report" / "report.md").is_file()
    grown = xr.open_zarr(cwd / "outputs" / "smoke" / "results.zarr")
    assert grown.sizes["seed"] == 3 and bool(grown.done.where(grown.in_grid, True).all())


def test_the_documentation_builds_as_the_readme_says_with_warnings_as_errors(tmp_path):
    """The README's build command, in a copy of what it reads (the docs, the committed
    reports they show, the changelog): a warning fails it (``-W``), and so does a cell of the
    library guide or the tutorial that raises, both run by the build."""
    for name in ("docs", "reports"):
        shutil.copytree(
            REPOSITORY / name,
            tmp_path / name,
            ignore=shutil.ignore_patterns("_build", "_generated", "generated"),
        )
    shutil.copy(REPOSITORY / "CHANGELOG.md", tmp_path)
    (command,) = [c for c in readme_commands() if "sphinx" in c]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    html = tmp_path / "docs" / "_build" / "html"
    assert (html / "reference" / "config.html").is_file()
    library = (html / "library.html").read_text()
    assert "transition row 0 sums to 0.9" in library  # a cell's output: the guide ran
    tutorial = (html / "tutorial.html").read_text()
    figures = [image.name for image in (html / "_images").iterdir() if image.name in tutorial]
    assert figures, "the tutorial's figure was drawn by the build"
