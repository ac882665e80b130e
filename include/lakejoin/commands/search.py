"""Search the lake for tables joinable with a query column (or composite key), on one snapshot.

    lakejoin search {josie,lshensemble,mate,pexeso,auto} (--table FILE | --dataset ID) \
        (--column NAME | --columns A,B) [-k 10] [--snapshot N] \
        [--threshold T --verify] [--tau X --T Y --model M --exact] [--semantic] --json
"""

from __future__ import annotations

import argparse
from typing import Any

from lakejoin.config import LakeConfig
from lakejoin.query import METHODS, engine_for, read_table_file
from lakejoin.query.engine import LOCAL_LIMITS

NAME = "search"

# flag -> (params key, argparse options); only flags given on the command line become params.
FAMILY_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "--threshold": ("threshold", {"type": float, "help": "LSH Ensemble: containment threshold t* in (0, 1] (default 0.5)"}),
    "--verify": ("verify", {"action": "store_true", "default": None, "help": "LSH Ensemble: verify candidates (exact containment)"}),
    "--tau": ("tau", {"type": float, "help": "PEXESO: distance threshold, a fraction of the maximum distance (default 0.06)"}),
    "--T": ("T", {"type": float, "help": "PEXESO: joinability threshold in (0, 1], a share of the query's records (default 0.6)"}),
    "--mode": ("mode", {"choices": ["threshold", "topk"], "help": "PEXESO: every column with jn >= T (threshold, default) or the k columns with most matches (topk)"}),
    "--model": ("model", {"help": "PEXESO: embedding model (must be the index's)"}),
    "--exact": ("exact", {"action": "store_true", "default": None, "help": "PEXESO: exact joinability and full record mapping"}),
    "--initial-column": ("initial_column", {"help": "MATE: the query column whose posting lists are fetched first"}),
    "--semantic": ("semantic", {"action": "store_true", "default": None, "help": "auto: search semantically (PEXESO)"}),
}


def add_query_arguments(parser: argparse.ArgumentParser) -> None:
    """The query arguments ``search`` and ``join`` share."""
    parser.add_argument("method", choices=METHODS)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--table", help="query table file (CSV, TSV, JSON lines or Parquet)")
    source.add_argument("--dataset", help="query dataset_id in the lake")
    columns = parser.add_mutually_exclusive_group(required=True)
    columns.add_argument("--column", help="one query column")
    columns.add_argument("--columns", help="several query columns, comma-separated (a composite key)")
    parser.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    parser.add_argument("--snapshot", type=int, help="search this snapshot (default: the latest published)")
    for flag, (_, options) in FAMILY_FLAGS.items():
        parser.add_argument(flag, dest=FAMILY_FLAGS[flag][0], **options)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_query_arguments(parser)


def query_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of ``QueryEngine.search`` from the parsed flags."""
    columns = [args.column] if args.column is not None else [c.strip() for c in args.columns.split(",") if c.strip()]
    params = {key: getattr(args, key) for key, _ in FAMILY_FLAGS.values() if getattr(args, key) is not None}
    return {
        "method": args.method,
        "columns": columns,
        "table": read_table_file(args.table) if args.table else None,
        "dataset_id": args.dataset,
        "k": args.k,
        "params": params,
        "snapshot_id": args.snapshot,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    return engine_for(LakeConfig.from_args(args.home), LOCAL_LIMITS).search(**query_arguments(args))


def summarize(result: dict[str, Any]) -> str:
    picked = f" (auto: {result['auto']['reason']})" if "auto" in result else ""
    lines = [f"snapshot {result['snapshot_id']}, {result['method']}{picked}, {len(result['results'])} result(s)"]
    for r in result["results"]:
        column = ",".join(r["column"]) if isinstance(r["column"], list) else r["column"]
        score = next((f"{key}={r[key]:.3g}" for key in ("overlap", "containment", "containment_estimate", "joinability") if r.get(key) is not None), "")
        lines.append(f"{r['rank']:>3}  {score:<22} {r['table']}  [{column}]  {r['dataset_id']}")
    return "\n".join(lines)
