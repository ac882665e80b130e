"""Lakejoin pipeline: ingest -> build each index family -> publish a snapshot.

Thin adapter over ``lakejoin.spark.pipeline``: every task calls one library stage. Publishing
emits the ``lakejoin-snapshot`` Asset, which schedules whatever consumes new snapshots.
Params (the Trigger DAG form): ``home`` (lake root), ``sources`` (specs; empty = the bundled
real-data lake), ``tables`` (bundled lake size), ``spark_master``.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import Asset, Param, dag, get_current_context, task

from lakejoin.index import FAMILIES

SNAPSHOT_ASSET = Asset("lakejoin-snapshot", uri="lakejoin://snapshots/latest")
CRAWL_ASSET = Asset("lakejoin-crawl", uri="lakejoin://crawl/finished")

DEFAULT_ARGS = {"retries": 2, "retry_delay": timedelta(seconds=30), "retry_exponential_backoff": True, "pool": "lakejoin_spark"}


def _config():
    from lakejoin.config import LakeConfig

    params = get_current_context()["params"]
    return LakeConfig.from_args(params.get("home") or None, params.get("spark_master") or None)


@dag(
    dag_id="lakejoin_pipeline",
    schedule=[CRAWL_ASSET],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lakejoin"],
    params={
        "home": Param("", type="string", description="lake root; empty = $LAKEJOIN_HOME or ./.lakejoin"),
        "sources": Param([], type="array", description="source specs (folder:PATH, ckan:URL, socrata:URL); empty = bundled lake"),
        "tables": Param(500, type="integer", minimum=1, description="bundled lake size"),
        "spark_master": Param("", type="string", description="Spark master URL; empty = local[*]"),
        "allow_private_hosts": Param(False, type="boolean"),
    },
)
def lakejoin_pipeline():
    @task
    def ingest() -> dict:
        from lakejoin.progress import Progress
        from lakejoin.spark.pipeline import RunOptions, ingest as ingest_stage

        params = get_current_context()["params"]
        options = RunOptions(sources=list(params["sources"]), tables=params["tables"], allow_private_hosts=params["allow_private_hosts"])
        result = ingest_stage(_config(), options, Progress())
        return {"changed": sorted(result.changed), "counts": result.counts, "errors": result.errors}

    @task
    def build_index(family: str, ingested: dict) -> dict:
        from lakejoin.progress import Progress
        from lakejoin.spark.pipeline import build_indexes

        return build_indexes(_config(), set(ingested["changed"]), Progress(), families=(family,))

    @task(outlets=[SNAPSHOT_ASSET])
    def publish(ingested: dict, index_rows: list[dict]) -> int:
        from lakejoin.progress import Progress
        from lakejoin.spark.pipeline import publish as publish_stage

        stats = {"datasets": ingested["counts"], "changed_datasets": len(ingested["changed"]), "index_rows": {k: v for rows in index_rows for k, v in rows.items()}}
        return publish_stage(_config(), stats, Progress()).snapshot_id

    ingested = ingest()
    built = build_index.partial(ingested=ingested).expand(family=list(FAMILIES))
    publish(ingested, built)


pipeline_dag = lakejoin_pipeline()
