"""Operators for DAGs: search the lake, and join a result onto a table, on the latest snapshot.

Both go through ``lakejoin.query`` (the engine the CLI and the REST API use), so a DAG task, a
``lakejoin search`` and a ``POST /lakejoin/api/search`` with the same arguments give the same
answer on the same snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, BaseOperator

from lakejoin.query import read_table_file
from lakejoin.query.join import write_table
from lakejoin_airflow.hooks import LakeHook

QUERY_FIELDS = ("method", "columns", "table_path", "dataset_id", "k", "method_params", "snapshot_id")


class LakeSearchOperator(BaseOperator):
    """Search the lake; the response (``{"snapshot_id", "method", "results", ...}``) goes to XCom.

    The query table is a file (``table_path``: CSV, TSV, JSON lines, Parquet) or a lake dataset
    (``dataset_id``); ``columns`` are its key column(s); ``method_params`` the method's parameters
    (``params`` is Airflow's own operator argument).
    """

    template_fields: Sequence[str] = QUERY_FIELDS + ("home",)

    def __init__(
        self,
        *,
        columns: list[str],
        method: str = "auto",
        table_path: str | None = None,
        dataset_id: str | None = None,
        k: int = 10,
        method_params: dict[str, Any] | None = None,
        snapshot_id: int | None = None,
        home: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.method, self.columns, self.table_path, self.dataset_id = method, columns, table_path, dataset_id
        self.k, self.method_params, self.snapshot_id, self.home = k, method_params or {}, snapshot_id, home

    def query_arguments(self) -> dict[str, Any]:
        columns = [self.columns] if isinstance(self.columns, str) else list(self.columns)
        return {
            "method": self.method,
            "columns": columns,
            "table": read_table_file(self.table_path) if self.table_path else None,
            "dataset_id": self.dataset_id or None,
            "k": int(self.k),
            "params": dict(self.method_params or {}),
            "snapshot_id": int(self.snapshot_id) if self.snapshot_id not in (None, "") else None,
        }

    def execute(self, context: Any) -> dict[str, Any]:
        response = LakeHook(self.home).get_engine().search(**self.query_arguments())
        self.log.info("snapshot %s, %s: %d result(s)", response["snapshot_id"], response["method"], len(response["results"]))
        return response


JOINS_ASSET = Asset("lakejoin-joins", uri="lakejoin://joins")


class LakeJoinOperator(LakeSearchOperator):
    """Search, join the result at ``rank`` onto the query table, write ``output_path`` (Parquet or
    CSV by suffix; a relative path lands under ``<lake home>/joins/``) and emit the Asset
    ``lakejoin-joins`` with the file and its provenance as the event's extra. Returns the join
    summary (to XCom)."""

    template_fields: Sequence[str] = LakeSearchOperator.template_fields + ("output_path", "rank", "how", "policy", "transform")

    def __init__(
        self,
        *,
        output_path: str,
        rank: int = 1,
        how: str = "left",
        policy: str = "first",
        transform: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [JOINS_ASSET])
        super().__init__(**kwargs)
        self.output_path, self.rank, self.how, self.policy, self.transform = output_path, rank, how, policy, transform

    def execute(self, context: Any) -> dict[str, Any]:
        hook = LakeHook(self.home)
        path = Path(self.output_path)
        if not path.is_absolute():
            path = hook.get_config().home / "joins" / path
        table, summary = hook.get_engine().join(
            **self.query_arguments(), rank=int(self.rank), how=self.how, policy=self.policy, transform=self.transform or None
        )
        files = [str(f) for f in write_table(table, path)]
        provenance = summary["provenance"]
        extra = {"files": files, **{k: provenance[k] for k in ("dataset_id", "table", "snapshot_id", "method", "rows_out")}}
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra
        self.log.info("joined %s (snapshot %s) -> %s", provenance["table"], provenance["snapshot_id"], files)
        return {**summary, "files": files}


class LakeRelatedOperator(BaseOperator):
    """The tables that join with a lake dataset, from the snapshot's join graph (``lakejoin
    related --dataset ID --json``) to XCom; ``graph.current`` false says the graph is an earlier
    snapshot's."""

    template_fields: Sequence[str] = ("dataset_id", "snapshot_id", "home")

    def __init__(self, *, dataset_id: str, snapshot_id: int | None = None, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dataset_id, self.snapshot_id, self.home = dataset_id, snapshot_id, home

    def execute(self, context: Any) -> dict[str, Any]:
        from lakejoin.graph import related

        snapshot_id = int(self.snapshot_id) if self.snapshot_id not in (None, "") else None
        answer = related(LakeHook(self.home).get_engine().snapshot(snapshot_id), self.dataset_id)
        self.log.info("snapshot %s, %s: %d related (graph current: %s)", answer["snapshot_id"], self.dataset_id, len(answer["related"]), answer["graph"]["current"])
        return answer
