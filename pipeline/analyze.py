"""``python -m pipeline.analyze <store> [--out DIR]``: figures and a report of a sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.analysis import analyze, default_output
from pipeline.results import StoreError


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
    args = parser.parse_args(argv)
    try:
        written = analyze(args.store, args.out or default_output(args.store))
    except StoreError as error:
        parser.error(str(error))
    print(f"report: {written.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
