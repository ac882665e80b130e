"""``lakejoin_related``: the tables that join with a lake dataset, from "Trigger DAG".

The params form takes the dataset id and the ranking (``quality``: the best join first;
``overlap``: the raw overlaps). One task (``LakeRelatedOperator``) reads the snapshot's join
graph and pushes each neighbour table once, with the reason, to XCom.
"""

from __future__ import annotations

from airflow.sdk import Param, dag

from lakejoin.graph.store import RANKS
from lakejoin_airflow.operators import ON_DEMAND_DAG, LakeRelatedOperator


@dag(
    dag_id="lakejoin_related",
    **ON_DEMAND_DAG,
    params={
        "dataset_id": Param(type="string", minLength=1, description="a dataset of the lake"),
        "rank": Param("quality", enum=list(RANKS), description="quality: best join first"),
        "snapshot_id": Param(None, type=["null", "integer"], description="empty = latest published snapshot"),
    },
)
def lakejoin_related() -> None:
    """The related tables of one dataset, from the join graph."""
    LakeRelatedOperator(
        task_id="related",
        dataset_id="{{ params.dataset_id }}",
        rank="{{ params.rank }}",
        snapshot_id="{{ params.snapshot_id }}",
    )


related_dag = lakejoin_related()
