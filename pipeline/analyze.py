"""``python -m pipeline.analyze <store> [--out DIR | --verify]``: figures and a report of a
sweep, or every chunk of its store checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.analysis import analyze
from pipeline.analysis.report import OutputError, verify
from pipeline.results import StoreError, damage, damage_line

WRITABLE = "a folder this user can write (made if missing)"
"""What ``--out`` allows."""


def _output_line(error: OutputError, given: bool) -> str:
    """The one line for a report folder that cannot be written: ``--out`` named where it was
    ``given``, else the default folder beside the store, and what to give instead."""
    if given:
        return f"--out: {error}; allowed: {WRITABLE}"
    return (
        f"cannot write the report beside the store, in {error.out}: {error.why}; "
        "give --out <a writable folder>"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.analyze",
        description="Write PNG figures and a Markdown report of a sweep's results store.",
    )
    parser.add_argument("store", type=Path, help="a results store, e.g. outputs/paper/results.zarr")
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for the report and figures (default: <store folder>/<store name>_report)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="read every chunk and print, per array, which are sound (exit 1 if one is not)",
    )
    args = parser.parse_args(argv)
    try:
        if args.verify:
            table, sound = verify(args.store)
            print(table)
            print(
                f"{args.store}: every chunk is sound"
                if sound
                else damage_line(args.store, damage(args.store))
            )
            return 0 if sound else 1
        written = analyze(args.store, args.out)
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OutputError as error:
        print(f"error: {_output_line(error, args.out is not None)}", file=sys.stderr)
        return 2
    print(f"report: {written.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
