"""Lakejoin's DAGs — thin adapters over ``lakejoin.spark.pipeline``; every task calls one stage.

- ``lakejoin_pipeline`` (manual, or from the UI's Trigger form): ingest -> one build task per
  index family -> publish (the snapshot with its join graph, unless the ``graph`` param is
  false) -> compact and quality_docs (Great Expectations Data Docs of the latest validations).
  The whole main job in one run.
- ``lakejoin_crawl`` (daily): one mapped ingest task per configured source (Airflow Variable
  ``lakejoin_sources``, a JSON list of specs; empty = the bundled lake through the local
  portal). The ``lakejoin_spark`` pool (1 slot) serializes their catalog commits. Emits
  ``lakejoin-crawl`` when done.
- ``lakejoin_index`` (scheduled by ``lakejoin-crawl``): rebuilds, per family, only the shards
  holding a dataset the crawls changed since that family's last build (each task's result names
  the shards it rewrote), publishes with the join graph (emits ``lakejoin-snapshot``), then
  compacts small files and builds the quality Data Docs.
- ``lakejoin_graph`` (scheduled by ``lakejoin-snapshot``): for a snapshot published without its
  join graph (``graph`` param false), computes it (``lakejoin.graph``: incrementally from the
  last one) and publishes it as the next snapshot of the line (the same table versions plus
  ``graph/``); does nothing for a snapshot that has its graph; emits ``lakejoin-graph``.

Tasks are idempotent (Delta commits; the snapshot row is written last) and retried with
exponential backoff. Every task that commits holds the lake's write lease
(``lakejoin.lake.lease``) while it runs, waiting up to the ``lease_wait`` param for another
writer (a CLI run, another DAG) and then failing, so Airflow retries it; the tasks of one DAG
run share one build id (``airflow:<dag_id>:<run_id>``), recorded in their commits and in the
snapshot they publish.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

import pendulum
from airflow.sdk import Asset, Param, Variable, dag, get_current_context, task

from lakejoin.index import FAMILIES

if TYPE_CHECKING:  # for annotations only: the tasks import the library where they run
    from lakejoin.config import LakeConfig

SNAPSHOT_ASSET = Asset("lakejoin-snapshot", uri="lakejoin://snapshots/latest")
CRAWL_ASSET = Asset("lakejoin-crawl", uri="lakejoin://crawl/finished")
GRAPH_ASSET = Asset(
    "lakejoin-graph", uri="lakejoin://graph/latest"
)  # not the snapshot Asset: that would schedule the graph again
START = pendulum.datetime(2026, 1, 1, tz="UTC")
DEFAULT_ARGS = {
    "retries": 2,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
    "pool": "lakejoin_spark",
}
LAKE_PARAMS = {
    "home": Param(None, type=["null", "string"], description="lake root; empty = $LAKEJOIN_HOME or ./.lakejoin"),
    "tables": Param(500, type="integer", minimum=1, description="bundled lake size (when no source is configured)"),
    "spark_master": Param(None, type=["null", "string"], description="Spark master URL; empty = local[*]"),
    "allow_private_hosts": Param(False, type="boolean", description="let portal sources reach private addresses"),
    "shards": Param(
        0,
        type="integer",
        minimum=0,
        description="shard count of a family's first build (0 = from the lake's size; later builds keep theirs)",
    ),
    "families": Param(
        list(FAMILIES), type="array", description="index families to build (the others' tasks do nothing)"
    ),
    "graph": Param(
        True,
        type="boolean",
        description="publish the join graph with the snapshot (false: lakejoin_graph computes it afterwards)",
    ),
    "lease_wait": Param(
        300,
        type="integer",
        minimum=0,
        description="seconds a task waits for another writer of the lake before failing (and being retried)",
    ),
}


def _config() -> LakeConfig:
    from lakejoin.config import LakeConfig

    params = get_current_context()["params"]
    home = params.get("home") or Variable.get("lakejoin_home", default="") or None
    return LakeConfig.from_args(home, params.get("spark_master") or None)


def _writer() -> dict:
    """The build id and lease wait of this task's commits (one build per DAG run)."""
    context = get_current_context()
    run = context["dag_run"]
    return {"build_id": f"airflow:{run.dag_id}:{run.run_id}", "wait": float(context["params"]["lease_wait"])}


def _ingest(sources: list[str]) -> dict:
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import RunOptions, ingest

    params = get_current_context()["params"]
    options = RunOptions(
        sources=sources, tables=params["tables"], allow_private_hosts=params["allow_private_hosts"], **_writer()
    )
    result = ingest(_config(), options, Progress())
    return {"changed": sorted(result.changed), "counts": result.counts, "errors": result.errors}


@task
def build_index(family: str) -> dict:
    """One family's build: only the shards holding a dataset changed since its last build.
    Returns what it did (full or incremental, shards rewritten, rows per table)."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import build_indexes

    params = get_current_context()["params"]
    selected = family in params["families"]
    builds = (
        build_indexes(_config(), Progress(), families=(family,), shards=params.get("shards") or None, **_writer())
        if selected
        else {}
    )
    return builds[family].to_json() if family in builds else {"family": family, "build": "none", "shards_rewritten": []}


@task(outlets=[SNAPSHOT_ASSET])
def publish(builds: list[dict]) -> int:
    """Publish a snapshot pinning the builds' index versions (and the join graph unless ``params.graph`` is false)."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import publish as publish_stage

    stats = {"index_builds": {b["family"]: b for b in builds}}
    graph = bool(get_current_context()["params"].get("graph", True))
    return publish_stage(_config(), stats, Progress(), graph=graph, **_writer()).snapshot_id


@task
def compact(snapshot_id: int) -> dict:
    """Maintenance after the publish: compact the files appends and shard swaps left behind."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import compact as compact_stage

    return {"after_snapshot": snapshot_id, "compacted": compact_stage(_config(), Progress(), **_writer())}


@task
def quality_docs(snapshot_id: int) -> dict:
    """Great Expectations Data Docs of the snapshot's latest validations (a failure to build
    them is a warning in the result, never a failed run)."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import quality_docs as quality_docs_stage

    return {"after_snapshot": snapshot_id, **quality_docs_stage(_config(), Progress())}


@dag(
    dag_id="lakejoin_pipeline",
    schedule=None,
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lakejoin"],
    params={
        **LAKE_PARAMS,
        "sources": Param(
            [], type="array", description="source specs (folder:PATH, ckan:URL, socrata:URL); empty = bundled lake"
        ),
    },
)
def lakejoin_pipeline() -> None:
    """The main job: ingest, build every index family in parallel, publish, then compact and render Data Docs."""

    @task
    def ingest() -> dict:
        return _ingest(list(get_current_context()["params"]["sources"]))

    built = build_index.expand(family=list(FAMILIES))
    ingest() >> built  # the builds read the cells ingest commits; `>> publish(...)` would order only publish
    published = publish(built)
    compact(published)
    quality_docs(published)


@dag(
    dag_id="lakejoin_crawl",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lakejoin"],
    params=LAKE_PARAMS,
)
def lakejoin_crawl() -> None:
    """Crawl every source of Variable ``lakejoin_sources`` (none: the bundled lake), then emit the crawl Asset."""

    @task
    def configured_sources() -> list[list[str]]:
        specs = json.loads(Variable.get("lakejoin_sources", default="[]"))
        return [[spec] for spec in specs] or [[]]  # [] = the bundled lake through the local portal

    @task
    def crawl(sources: list[str]) -> dict:
        return _ingest(sources)

    @task(outlets=[CRAWL_ASSET])
    def crawl_finished(results: list[dict]) -> dict:
        return {
            "changed": sorted({d for r in results for d in r["changed"]}),
            "errors": {k: v for r in results for k, v in r["errors"].items()},
        }

    crawl_finished(crawl.expand(sources=configured_sources()))


@dag(
    dag_id="lakejoin_index",
    schedule=[CRAWL_ASSET],
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lakejoin"],
    params=LAKE_PARAMS,
)
def lakejoin_index() -> None:
    """After a crawl: rebuild every index family, publish a snapshot, then compact and render Data Docs."""
    published = publish(build_index.expand(family=list(FAMILIES)))
    compact(published)
    quality_docs(published)


@dag(
    dag_id="lakejoin_graph",
    schedule=[SNAPSHOT_ASSET],
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lakejoin"],
    params={key: LAKE_PARAMS[key] for key in ("home", "lease_wait")}
    | {"k": Param(10, type="integer", minimum=1, maximum=100, description="neighbours per column or key")},
)
def lakejoin_graph() -> None:
    """Compute the latest snapshot's join graph and publish it."""

    @task(outlets=[GRAPH_ASSET])
    def join_graph() -> dict:
        from lakejoin.graph import refresh

        return refresh(_config(), k=int(get_current_context()["params"]["k"]), **_writer())

    join_graph()


pipeline_dag = lakejoin_pipeline()
crawl_dag = lakejoin_crawl()
index_dag = lakejoin_index()
graph_dag = lakejoin_graph()
