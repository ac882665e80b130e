"""Search the lake for tables joinable with a query column (or composite key), on one snapshot.

    lakejoin search {josie,lshensemble,mate,pexeso,transform,auto} (--table FILE | --dataset ID) \
        (--column NAME | --columns A,B) [-k 10] [--snapshot N] \
        [--threshold T --verify] [--tau X --T Y --model M --exact | --lower-bound] [--semantic] \
        [--candidates N --sample S --budget SECONDS --learner cst++] --json

Text output is one aligned row per result: rank, dataset, column(s), the method's score and
evidence (a few matched values or value pairs). Scores are exact counts and shares; PEXESO's
are lower bounds, marked "≥", only with ``--lower-bound``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tabulate import tabulate

from lakejoin.config import LakeConfig
from lakejoin.index import registry
from lakejoin.query import METHODS, engine_for, read_table_file
from lakejoin.query.engine import LOCAL_LIMITS
from lakejoin.query.params import flag_help

NAME = "search"

# flag -> (params key, argparse options); only flags given on the command line become params. The
# help is lakejoin.query.params' (the search page and the REST docs say the same).
FAMILY_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "--threshold": ("threshold", {"type": float, "help": flag_help("threshold")}),
    "--verify": ("verify", {"action": "store_true", "default": None, "help": flag_help("verify")}),
    "--tau": ("tau", {"type": float, "help": flag_help("tau")}),
    "--T": ("T", {"type": float, "help": flag_help("T")}),
    "--mode": ("mode", {"choices": ["threshold", "topk"], "help": flag_help("mode")}),
    "--model": ("model", {"help": flag_help("model")}),
    "--exact": ("exact", {"action": "store_true", "default": None, "help": flag_help("exact")}),
    "--lower-bound": ("lower_bound", {"action": "store_true", "default": None, "help": flag_help("lower_bound")}),
    "--initial-column": ("initial_column", {"help": flag_help("initial_column")}),
    "--semantic": ("semantic", {"action": "store_true", "default": None, "help": flag_help("semantic")}),
    "--candidates": ("candidates", {"type": int, "help": flag_help("candidates")}),
    "--sample": ("sample", {"type": int, "help": flag_help("sample")}),
    "--budget": ("budget", {"type": float, "help": flag_help("budget")}),
    "--learner": ("learner", {"help": flag_help("learner")}),
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
    """Add the query arguments and ``--spark`` (answer by batch discovery on Spark)."""
    add_query_arguments(parser)
    parser.add_argument(
        "--spark",
        action="store_true",
        help="answer through batch discovery on Spark (one task per shard; a family method only)",
    )
    parser.add_argument(
        "--spark-master", help="with --spark: Spark master URL (default local[*] or $LAKEJOIN_SPARK_MASTER)"
    )


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
    """Search one snapshot, locally or on Spark (``--spark``)."""
    if args.spark:
        return _run_on_spark(args)
    return engine_for(LakeConfig.from_args(args.home), LOCAL_LIMITS).search(**query_arguments(args))


def _run_on_spark(args: argparse.Namespace) -> dict[str, Any]:
    from lakejoin.spark.discover import search_on_spark
    from lakejoin.spark.session import get_spark

    config = LakeConfig.from_args(args.home, args.spark_master, quiet=True)
    query = query_arguments(args)
    return search_on_spark(
        get_spark(config.spark_master),
        config,
        args.method,
        query["columns"],
        table_file=args.table,
        dataset_id=args.dataset,
        k=args.k,
        params=query["params"],
        snapshot_id=args.snapshot,
    )


EVIDENCE_WIDTH = 60  # characters of evidence per row; the JSON output has all of it
EVIDENCE_ITEMS = 3


def _lsh_containment(r: dict[str, Any]) -> str:
    return f"{r['containment']:.3f}" if r.get("containment") is not None else f"≈ {r['containment_estimate']:.3f}"


def _pexeso_jn(r: dict[str, Any]) -> str:
    return f"{'' if r['joinability_exact'] else '≥ '}{r['joinability']:.3f} ({r['matched']:,})"


# method -> (score header, one result's score): counts as integers, shares with three decimals
SCORES: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "josie": ("overlap (containment)", lambda r: f"{r['overlap']:,} ({r['containment']:.3f})"),
    "lshensemble": ("containment", _lsh_containment),
    "mate": ("keys (share)", lambda r: f"{r['joinability']:,} ({r['share']:.3f})"),
    "pexeso": ("jn (records)", _pexeso_jn),
    "transform": ("rows joined (share)", lambda r: f"{r['matched']:,} ({r['joinability']:.3f})"),
}


def score_text(method: str, result: dict[str, Any]) -> str:
    """``result``'s score with its name, e.g. ``jn (records) 1.000 (40)`` (``SCORES``)."""
    name, score = SCORES[method]
    return f"{name} {score(result)}"


def _value(value: Any) -> str:
    return f"({', '.join(map(str, value))})" if isinstance(value, list) else str(value)


def _evidence(r: dict[str, Any]) -> str:
    parts = [r["reason"]] if r.get("reason") else []
    parts += [r["program"]] if r.get("program") else []
    if "overlap" in r and r.get("containment_estimate") is not None:  # auto: JOSIE with LSH Ensemble's estimate
        parts.append(f"LSH ≈ {r['containment_estimate']:.3f}")
    if r.get("matched_sample"):
        parts.append("; ".join(_value(v) for v in r["matched_sample"][:EVIDENCE_ITEMS]))
    if r.get("sample_pairs"):
        parts.append("; ".join(f"{_value(q)} ~ {_value(x)}" for q, x in r["sample_pairs"][:EVIDENCE_ITEMS]))
    text = " | ".join(parts)
    return text if len(text) <= EVIDENCE_WIDTH else text[: EVIDENCE_WIDTH - 1] + "…"


def summarize(result: dict[str, Any]) -> str:
    """One aligned row per result: rank, dataset, column(s), score and evidence."""
    picked = f" (auto: {result['auto']['reason']})" if "auto" in result else ""
    lines = [f"snapshot {result['snapshot_id']}, {result['method']}{picked}, {len(result['results'])} result(s)"]
    if not result["results"]:
        return lines[0] + (f": {result['message']}" if result.get("message") else "")
    if result["query"].get("in_lake"):
        lines.append(f"the query table is the lake's {result['query']['in_lake']}: not listed as a result")
    header, score = SCORES[result["method"]]
    family = registry.REGISTRY.get(result["method"])  # None: transform, which no one family answers
    ranked = "quality" in result["results"][0]  # auto: ranked by join quality
    rows = []
    for r in result["results"]:
        column = ", ".join(map(str, r["column"])) if isinstance(r["column"], list) else r["column"]
        quality = [f"{r['quality']:.2f}"] if ranked else []
        rows.append([r["rank"], r["table"] or r["dataset_id"], column, *quality, score(r), _evidence(r)])
    headers = [
        "rank",
        "table",
        "columns" if family is not None and family.multi_column else "column",
        *(["quality"] if ranked else []),
        header,
        "evidence",
    ]
    align = ("right", "left", "left", *(["right"] if ranked else []), "right", "left")
    lines.append(tabulate(rows, headers, disable_numparse=True, colalign=align))
    if not all(r.get("joinability_exact", True) for r in result["results"]):
        lines.append("≥: a lower bound (--lower-bound stops counting a column once it reaches T)")
    if family is not None:
        lines += family.result_notes(result["results"])
    return "\n".join(lines)
