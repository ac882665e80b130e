"""Operators for DAGs: search the lake, and join a result onto a table, on the latest snapshot;
batch discovery on a Spark cluster (``LakeDiscoverOperator``, through ``spark-submit``).

Both go through ``lakejoin.query`` (the engine the CLI and the REST API use), so a DAG task, a
``lakejoin search`` and a ``POST /lakejoin/api/search`` with the same arguments give the same
answer on the same snapshot.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, BaseOperator
from typing_extensions import override

from lakejoin.commands.search import FAMILY_FLAGS
from lakejoin.lake import delta
from lakejoin.query import read_table_file
from lakejoin.query.join import write_table
from lakejoin.spark import class_archive
from lakejoin_airflow.hooks import LakeHook

QUERY_FIELDS = ("method", "columns", "table_path", "dataset_id", "k", "method_params", "snapshot_id")
# The DAG arguments of the on-demand DAGs built on these operators (lakejoin_search, lakejoin_related,
# lakejoin_discover): run from the Trigger form only, their templated params rendered as native values.
ON_DEMAND_DAG: dict[str, Any] = {
    "schedule": None,
    "start_date": pendulum.datetime(2026, 1, 1, tz="UTC"),
    "catchup": False,
    "render_template_as_native_obj": True,
    "tags": ["lakejoin"],
}


class LakeSearchOperator(BaseOperator):
    """Search the lake; the response (``{"snapshot_id", "method", "results", ...}``) goes to XCom.

    The query table is a file (``table_path``: CSV, TSV, JSON lines, Parquet) or a lake dataset
    (``dataset_id``); ``columns`` are its key column(s); ``method_params`` the method's parameters
    (``params`` is Airflow's own operator argument).
    """

    template_fields: tuple[str, ...] = (*QUERY_FIELDS, "home")

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
        """The engine's search arguments from the (rendered) fields: the query table read from
        ``table_path``, ``columns`` as a list, ``k`` and ``snapshot_id`` as integers."""
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

    @override
    def execute(self, context: Any) -> dict[str, Any]:
        response = LakeHook(self.home).get_engine().search(**self.query_arguments())
        self.log.info(
            "snapshot %s, %s: %d result(s)", response["snapshot_id"], response["method"], len(response["results"])
        )
        return response


JOINS_ASSET = Asset("lakejoin-joins", uri="lakejoin://joins")


class LakeJoinOperator(LakeSearchOperator):
    """Search, join the result at ``rank`` onto the query table, write ``output_path`` (Parquet or
    CSV by suffix; a relative path lands under ``<lake home>/joins/``) and emit the Asset
    ``lakejoin-joins`` with the file and its provenance as the event's extra. Returns the join
    summary (to XCom)."""

    template_fields: tuple[str, ...] = LakeSearchOperator.template_fields + (
        "output_path",
        "rank",
        "how",
        "policy",
        "transform",
    )

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

    @override
    def execute(self, context: Any) -> dict[str, Any]:
        hook = LakeHook(self.home)
        path = Path(self.output_path)
        if not path.is_absolute():
            path = hook.get_config().home / "joins" / path
        table, summary = hook.get_engine().join(
            **self.query_arguments(),
            rank=int(self.rank),
            how=self.how,
            policy=self.policy,
            transform=self.transform or None,
        )
        files = [str(f) for f in write_table(table, path)]
        provenance = summary["provenance"]
        extra = {
            "files": files,
            **{k: provenance[k] for k in ("dataset_id", "table", "snapshot_id", "method", "rows_out")},
        }
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra
        self.log.info("joined %s (snapshot %s) -> %s", provenance["table"], provenance["snapshot_id"], files)
        return {**summary, "files": files}


DISCOVERIES_ASSET = Asset("lakejoin-discoveries", uri="lakejoin://discoveries")
DISCOVER_JOB = Path(__file__).resolve().parents[2] / "spark_jobs" / "discover.py"


class LakeDiscoverOperator(SparkSubmitOperator):
    """Batch discovery (``spark_jobs/discover.py``) submitted with ``spark-submit`` on the Spark
    connection ``conn_id`` (``spark_default``): the answers of ``method`` for every query of
    ``queries`` (a table file, a folder, dataset ids or ``all``) written as a Delta table at
    ``out`` (relative: under ``<lake home>/discoveries/``). Emits the Asset
    ``lakejoin-discoveries`` with the table's path, version and rows as the event's extra, and
    returns them (to XCom). The lake home must be a path the cluster's executors see."""

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "method",
        "queries",
        "out",
        "k",
        "method_params",
        "columns",
        "snapshot_id",
        "home",
    )

    def __init__(
        self,
        *,
        method: str,
        queries: str,
        out: str,
        k: int = 10,
        method_params: dict[str, Any] | None = None,
        columns: list[str] | None = None,
        snapshot_id: int | None = None,
        home: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [DISCOVERIES_ASSET])
        kwargs.setdefault("env_vars", {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
        super().__init__(application=str(DISCOVER_JOB), name="lakejoin-discover", **kwargs)
        self.method, self.queries, self.out, self.k = method, queries, out, k
        self.method_params, self.columns, self.snapshot_id, self.home = method_params or {}, columns, snapshot_id, home

    # The summary goes to XCom; SparkSubmitOperator.execute is typed as returning None.
    @override
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        home = LakeHook(self.home).get_config().home
        out = Path(self.out) if Path(self.out).is_absolute() else home / "discoveries" / self.out
        self.application_args = [
            "--home",
            str(home),
            self.method,
            "--queries",
            str(self.queries),
            "--out",
            str(out),
            "-k",
            str(int(self.k)),
            *self._optional_arguments(),
        ]
        self.conf = self.spark_conf()
        super().execute(context)
        table = delta.open_table(out)
        extra = {
            "out": str(out),
            "version": table.version(),
            "rows": delta.row_count(out, opened=table),
            "method": self.method,
        }
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra
        self.log.info("discover %s: %s rows -> %s (version %s)", self.method, extra["rows"], out, extra["version"])
        return extra

    def spark_conf(self) -> dict[str, Any]:
        """The job's Spark properties: the operator's ``conf``, and where it sets no driver JVM
        options, the Spark class archive for the driver (in client mode it runs on this machine),
        as ``get_spark``'s drivers map it."""
        conf = dict(self.conf or {})
        archive_options = class_archive.driver_options()
        if archive_options:
            conf.setdefault("spark.driver.extraJavaOptions", archive_options)
        return conf

    def _optional_arguments(self) -> list[str]:
        columns = [self.columns] if isinstance(self.columns, str) else list(self.columns or [])
        arguments = ["--columns", ",".join(columns)] if columns else []
        if self.snapshot_id not in (None, ""):
            arguments += ["--snapshot", str(int(self.snapshot_id))]
        flags = {key: flag for flag, (key, _) in FAMILY_FLAGS.items()}
        for key, value in dict(self.method_params or {}).items():
            if key not in flags:
                raise ValueError(f"unknown parameter {key!r} for {self.method}; known: {sorted(flags)}")
            arguments += [flags[key]] if value is True else [] if value is False else [flags[key], str(value)]
        return arguments


class LakeRelatedOperator(BaseOperator):
    """The tables that join with a lake dataset, from the snapshot's join graph (``lakejoin
    related --dataset ID [--rank quality|overlap] --json``: each neighbour table once, best join
    first) to XCom; ``graph.current`` false says the graph is an earlier snapshot's."""

    template_fields: Sequence[str] = ("dataset_id", "snapshot_id", "home", "rank")

    def __init__(
        self,
        *,
        dataset_id: str,
        snapshot_id: int | str | None = None,  # a str: a template rendering to the id
        home: str | None = None,
        rank: str = "quality",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dataset_id, self.snapshot_id, self.home, self.rank = dataset_id, snapshot_id, home, rank

    @override
    def execute(self, context: Any) -> dict[str, Any]:
        from lakejoin.graph import related

        snapshot_id = int(self.snapshot_id) if self.snapshot_id not in (None, "") else None
        answer = related(LakeHook(self.home).get_engine().snapshot(snapshot_id), self.dataset_id, rank=self.rank)
        self.log.info(
            "snapshot %s, %s: %d related (graph current: %s)",
            answer["snapshot_id"],
            self.dataset_id,
            len(answer["related"]),
            answer["graph"]["current"],
        )
        return answer
