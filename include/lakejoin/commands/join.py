"""Search, then join a result onto the query table and write it (Parquet or CSV) with provenance.

    lakejoin join {josie,lshensemble,mate,pexeso,auto} (--table FILE | --dataset ID) \
        (--column NAME | --columns A,B) [--rank 1] [--how left|inner] \
        [--policy first|aggregate|explode] [--transform [learn|cst|cst+|cst++|autojoin|PROGRAM]] \
        [--prefix P] --out FILE [--format parquet|csv] [family params as for search] --json
"""

from __future__ import annotations

import argparse
from typing import Any

from lakejoin.commands.search import add_query_arguments, query_arguments, score_text
from lakejoin.config import LakeConfig
from lakejoin.query import engine_for
from lakejoin.query.engine import LOCAL_LIMITS
from lakejoin.query.join import FORMATS, HOWS, POLICIES, write_table
from lakejoin.transform import DEFAULT_METHOD, LEARN, METHODS

NAME = "join"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the query arguments of ``search`` and the join's rank, kind, policy, transform and output."""
    add_query_arguments(parser)
    parser.add_argument("--rank", type=int, default=1, help="join the result at this rank (default 1)")
    parser.add_argument("--how", choices=HOWS, default="left")
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        default="first",
        help="one-to-many matches: first row, aggregate values, or one row per match",
    )
    parser.add_argument(
        "--transform",
        nargs="?",
        const=LEARN,
        help=(
            f"learn a transformation ({LEARN} = {DEFAULT_METHOD}, the default when no value is given; or one of "
            f"{', '.join(METHODS)}) or apply a program text to the query key"
        ),
    )
    parser.add_argument("--prefix", help="prefix of the joined columns (default: the found table's name)")
    parser.add_argument("--out", required=True, help="output file (.parquet or .csv)")
    parser.add_argument("--format", choices=FORMATS, help="output format (default: from --out's suffix)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Search, join the chosen result onto the query table and write it to ``--out``."""
    engine = engine_for(LakeConfig.from_args(args.home), LOCAL_LIMITS)
    table, summary = engine.join(
        **query_arguments(args),
        rank=args.rank,
        how=args.how,
        policy=args.policy,
        transform=args.transform,
        prefix=args.prefix,
    )
    files = write_table(table, args.out, args.format)
    return {**summary, "files": [str(f) for f in files]}


def summarize(result: dict[str, Any]) -> str:
    """One line: the joined table, its score and the rows and files written."""
    r = result["result"]
    return (
        f"joined {r['table']} ({r['dataset_id']}, rank {r['rank']}, {result['method']}: "
        f"{score_text(result['method'], r)}, snapshot {result['snapshot_id']}): "
        f"{result['rows']} rows x {len(result['columns'])} columns -> {', '.join(result['files'])}"
    )
