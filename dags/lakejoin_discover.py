"""``lakejoin_discover``: batch discovery on the Spark cluster, from "Trigger DAG".

The params form takes the method (one index family), the queries (a table file or folder on the
workers, dataset ids, or ``all``: the lake against itself), k, the method's parameters and the
output table. One task submits ``spark_jobs/discover.py`` with ``spark-submit`` on the
``spark_default`` connection (``LakeDiscoverOperator``); its output, a Delta table of ranked
answers, is the ``lakejoin-discoveries`` Asset.
"""

from __future__ import annotations

from airflow.sdk import Param, dag

from lakejoin.index import SEARCH_FAMILIES
from lakejoin_airflow.operators import ON_DEMAND_DAG, LakeDiscoverOperator


@dag(
    dag_id="lakejoin_discover",
    **ON_DEMAND_DAG,
    params={
        "method": Param("josie", enum=list(SEARCH_FAMILIES), description="the index family to search with"),
        "queries": Param(
            "all",
            type="string",
            description="a table file or folder on the workers, dataset ids (comma-separated), or all",
        ),
        "columns": Param(
            [],
            type="array",
            maxItems=8,
            items={"type": "string"},
            description="only these query columns (MATE: the composite key, required)",
        ),
        "k": Param(10, type="integer", minimum=1, maximum=100),
        "method_params": Param(
            {}, type="object", description='method parameters, e.g. {"threshold": 0.5, "verify": true}'
        ),
        "snapshot_id": Param(None, type=["null", "integer"], description="empty = latest published snapshot"),
        "out": Param(
            "latest", type="string", description="output Delta table; relative = under <lake home>/discoveries/"
        ),
        "home": Param(
            None,
            type=["null", "string"],
            description="lake home (empty = the lakejoin_home variable, else $LAKEJOIN_HOME)",
        ),
    },
)
def lakejoin_discover() -> None:
    """Batch discovery of a query set on Spark, written as a Delta table."""
    LakeDiscoverOperator(
        task_id="discover",
        pool="lakejoin_spark",
        method="{{ params.method }}",
        queries="{{ params.queries }}",
        columns="{{ params.columns }}",
        k="{{ params.k }}",
        method_params="{{ params.method_params }}",
        snapshot_id="{{ params.snapshot_id }}",
        out="{{ params.out }}",
        home="{{ params.home }}",
    )


discover_dag = lakejoin_discover()
