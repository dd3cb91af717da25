"""The ``pipeline`` command: ``pipeline sweep <overrides>`` is ``python -m pipeline.sweep``,
``pipeline analyze <store>`` is ``python -m pipeline.analyze``; ``pipeline --version``."""

from __future__ import annotations

import sys

COMMANDS = {"sweep": "run a sweep (python -m pipeline.sweep)", "analyze": "report on a store"}
USAGE = "usage: pipeline {sweep,analyze} [arguments] | pipeline --version"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        from pipeline import __version__

        print(f"pipeline {__version__}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        lines = [USAGE, *(f"  {name:8} {meaning}" for name, meaning in COMMANDS.items())]
        print("\n".join(lines), file=sys.stderr if argv else sys.stdout)
        return 2 if argv else 0
    command, rest = argv[0], argv[1:]
    if command == "analyze":
        from pipeline.analyze import main as analyze

        return analyze(rest)
    from pipeline.sweep.main import main as sweep

    sys.argv = [f"{sys.argv[0]} sweep", *rest]
    sweep()
    return 0


if __name__ == "__main__":
    sys.exit(main())
