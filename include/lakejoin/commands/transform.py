"""``lakejoin transform``: learn the transformations that make two CSV columns joinable, and join.

    lakejoin transform --source a.csv --source-column name --target b.csv --target-column email \
        [--method cst|cst+|cst++|autojoin] [--direction auto|forward|backward|longer] --json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from lakejoin.transform import DEFAULT_METHOD, METHODS, learn_and_join
from lakejoin.transform.join import DIRECTIONS

NAME = "transform"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the source and target CSV columns, the learning method and the direction."""
    parser.add_argument("--source", required=True, help="CSV file holding the column to transform")
    parser.add_argument("--source-column", required=True)
    parser.add_argument("--target", required=True, help="CSV file holding the column to join with")
    parser.add_argument("--target-column", required=True)
    parser.add_argument("--method", choices=sorted(METHODS), default=DEFAULT_METHOD)
    parser.add_argument("--direction", choices=DIRECTIONS, default="auto")


def read_column(path: str, column: str) -> list[str]:
    """One CSV column as text (pandas, dtype=str, no NA guessing); ValueError if unusable."""
    if not Path(path).is_file():
        raise ValueError(f"CSV file not found: {path}")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path} as CSV: {exc}") from None
    if column not in frame.columns:
        raise ValueError(f"column {column!r} not in {path}; columns: {list(frame.columns)}")
    return frame[column].tolist()


def run(args: argparse.Namespace) -> dict:
    """Learn the transformations from the two columns and join them (``learn_and_join``)."""
    return learn_and_join(
        read_column(args.source, args.source_column),
        read_column(args.target, args.target_column),
        method=args.method,
        direction=args.direction,
    )


def summarize(result: dict) -> str:
    """One aligned row per learned transformation: used for the join (*), the share of the
    example pairs it covers (and how many), the rows it joined, the program."""
    head = f"{result['method']} ({result['direction']}), {len(result['pairs'])} joined pairs, {result['seconds']:.2f} s"
    if not any(t["used"] for t in result["transformations"]):
        return head + "\nno transformation found"
    rows = [
        ["*" if t["used"] else "", f"{t['coverage']:.3f} ({t['covered_pairs']:,})", f"{t['joined']:,}", t["program"]]
        for t in result["transformations"]
    ]
    headers = ["used", "covers (example pairs)", "joined", "program"]
    return head + "\n" + tabulate(rows, headers, disable_numparse=True, colalign=("center", "right", "right", "left"))
