"""Run the main job: ingest every source, build the indexes, publish a snapshot."""

from __future__ import annotations

import argparse

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.sources.bundled import DEFAULT_TABLES

NAME = "run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the sources, lake size, families, publishing and sharding options."""
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="SPEC",
        help="folder:PATH, ckan:URL or socrata:URL (repeatable); none = the bundled real-data lake",
    )
    parser.add_argument(
        "--tables", default=str(DEFAULT_TABLES), help=f"bundled lake size: a number or 'all' (default {DEFAULT_TABLES})"
    )
    parser.add_argument("--spark-master", help="Spark master URL (default local[*] or $LAKEJOIN_SPARK_MASTER)")
    parser.add_argument(
        "--allow-private-hosts", action="store_true", help="let portal sources reach private/loopback addresses"
    )
    parser.add_argument("--max-bytes", type=int, help="largest file accepted (bytes)")
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"index families to build (default {','.join(FAMILIES)}; empty = none)",
    )
    parser.add_argument("--no-publish", action="store_true", help="build everything but do not publish a snapshot")
    parser.add_argument(
        "--no-graph", action="store_true", help="publish without the join graph (`lakejoin graph` computes it later)"
    )
    parser.add_argument(
        "--shards",
        type=int,
        help="shard count of a family's first build (default: from the lake's size; later builds keep theirs)",
    )
    add_wait_argument(parser)


def add_wait_argument(parser: argparse.ArgumentParser) -> None:
    """``--wait``, for the commands that write to the lake (they hold its write lease)."""
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for another writer of the lake to finish (default: fail at once)",
    )


def run(args: argparse.Namespace) -> dict:
    """Check the options and run the main pipeline (``lakejoin.spark.pipeline.run``)."""
    from lakejoin.spark.pipeline import RunOptions
    from lakejoin.spark.pipeline import run as run_pipeline

    tables = None if args.tables == "all" else int(args.tables)
    if tables is not None and tables < 1:
        raise ValueError("--tables must be a positive number or 'all'")
    families = tuple(f for f in args.families.split(",") if f)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown index families {unknown}: choose from {', '.join(FAMILIES)}")
    if args.wait < 0:
        raise ValueError("--wait must be 0 or more seconds")
    options = RunOptions(
        sources=args.source,
        tables=tables,
        allow_private_hosts=args.allow_private_hosts,
        publish=not args.no_publish,
        graph=not args.no_graph,
        families=families,
        wait=args.wait,
    )
    if args.max_bytes:
        options.max_bytes = args.max_bytes
    if args.shards is not None:
        if args.shards < 1:
            raise ValueError("--shards must be at least 1")
        options.shards = args.shards
    config = LakeConfig.from_args(args.home, args.spark_master, quiet=args.quiet or args.json)
    return run_pipeline(config, options)


def summarize(result: dict) -> str:
    """The run's summary: datasets, columns, cells, index builds, graph, snapshot and the first errors."""
    d = result["datasets"]
    lines = [
        "Lakejoin run finished",
        f"  datasets : {d.get('active', 0)} active, {d.get('quarantined', 0)} quarantined, {d.get('removed', 0)} "
        f"removed ({d.get('rewritten', 0)} new or changed this run)",
        f"  columns  : {result['columns']}",
        f"  cells    : {result['cells']}",
        *[f"  {family:<9}: {_build_line(build)}" for family, build in result.get("index_builds", {}).items()],
        *([f"  graph    : {_graph_line(result['graph'])}"] if "graph" in result else []),
        f"  snapshot : {result.get('snapshot_id', 'not published (--no-publish)')}",
        *([f"  quality  : {_docs_line(result['quality_docs'])}"] if "quality_docs" in result else []),
        f"  lake     : {result['home']}",
        f"  time     : {result['seconds']} s",
    ]
    lines += [f"  ! {dataset}: {reason}" for dataset, reason in list(result["errors"].items())[:10]]
    return "\n".join(lines)


def _docs_line(docs: dict) -> str:
    if "error" in docs:
        return f"Data Docs not built: {docs['error']}"
    return (
        f"Data Docs at {docs['index']} ({docs['rendered']} validation page(s) rendered)"
        if docs["index"]
        else "no validations yet"
    )


def _build_line(build: dict) -> str:
    shards = build["shards_rewritten"]
    which = (
        "every shard"
        if len(shards) == build["n_shards"]
        else f"shard(s) {', '.join(map(str, shards[:8]))}{' ...' if len(shards) > 8 else ''}"
    )
    kind = (
        f"full build ({build['reason']})"
        if build["build"] == "full"
        else f"incremental, {build['changed_datasets']} changed dataset(s)"
    )
    return f"{kind}: {len(shards)} of {build['n_shards']} shards rewritten ({which}) in {build['seconds']} s"


def _graph_line(stats: dict) -> str:
    edges = sum(kind.get("edges", 0) for kind in stats.values() if isinstance(kind, dict))
    how = "full" if stats.get("full") else f"incremental, {stats.get('changed_datasets', 0)} datasets changed"
    return f"{edges} edges ({how}, {stats.get('seconds', 0)} s)"
