"""``lakejoin_search``: search the lake and join a result onto the query table, from "Trigger DAG".

The params form takes the query (a table file path on the workers, or a lake ``dataset_id``),
its key column(s), the method (``auto`` picks one) and the join options. ``search`` pushes the
ranked results to XCom; ``join`` (when ``join`` is ticked) writes the augmented table and emits
the ``lakejoin-joins`` Asset. Both run on the latest published snapshot (or ``snapshot_id``).
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from lakejoin.query import METHODS
from lakejoin.query.join import HOWS, POLICIES
from lakejoin_airflow.operators import ON_DEMAND_DAG, LakeJoinOperator, LakeSearchOperator

QUERY = {
    "method": "{{ params.method }}",
    "columns": "{{ params.columns }}",
    "table_path": "{{ params.table_path }}",
    "dataset_id": "{{ params.dataset_id }}",
    "k": "{{ params.k }}",
    "method_params": "{{ params.method_params }}",
    "snapshot_id": "{{ params.snapshot_id }}",
}


@dag(
    dag_id="lakejoin_search",
    **ON_DEMAND_DAG,
    params={
        "method": Param("auto", enum=list(METHODS), description="josie, lshensemble, mate, pexeso, transform, or auto"),
        "dataset_id": Param(
            None, type=["null", "string"], description="query dataset in the lake (or give table_path)"
        ),
        "table_path": Param(
            None,
            type=["null", "string"],
            description="query table file on the workers (CSV, TSV, JSON lines, Parquet)",
        ),
        "columns": Param(
            ["baker"], type="array", minItems=1, maxItems=8, items={"type": "string"}, description="query key column(s)"
        ),
        "k": Param(10, type="integer", minimum=1, maximum=100),
        "method_params": Param(
            {}, type="object", description='method parameters, e.g. {"threshold": 0.5, "verify": true}'
        ),
        "snapshot_id": Param(None, type=["null", "integer"], description="empty = latest published snapshot"),
        "join": Param(True, type="boolean", description="join the result at `rank` onto the query table"),
        "rank": Param(1, type="integer", minimum=1, maximum=100),
        "how": Param("left", enum=list(HOWS)),
        "policy": Param("first", enum=list(POLICIES), description="one-to-many: first, aggregate, explode"),
        "transform": Param(
            None,
            type=["null", "string"],
            description="empty, learn (the default method), cst, cst+, cst++, autojoin, or a program text",
        ),
        "output_path": Param(
            "joined.parquet", type="string", description=".parquet or .csv; relative = under <lake home>/joins/"
        ),
    },
)
def lakejoin_search() -> None:
    """Search from the trigger form, then join the chosen result when ``join`` is ticked."""
    search = LakeSearchOperator(task_id="search", **QUERY)

    @task.short_circuit
    def join_requested(params: dict | None = None) -> bool:
        return bool(params and params["join"])

    join = LakeJoinOperator(
        task_id="join",
        **QUERY,
        rank="{{ params.rank }}",
        how="{{ params.how }}",
        policy="{{ params.policy }}",
        transform="{{ params.transform }}",
        output_path="{{ params.output_path }}",
    )
    search >> join_requested() >> join


search_dag = lakejoin_search()
