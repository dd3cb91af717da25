"""The README's two commands are the ones CI and users run."""

from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def quick_start() -> list[str]:
    text = (REPOSITORY / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_two_commands_run_the_sweep_and_the_tests():
    run, test = quick_start()
    assert run.endswith("python -m pipeline.sweep")
    assert '".[test]"' in test and test.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPOSITORY / ".ci" / "run").read_text().splitlines()
    assert quick_start()[1] in ci
