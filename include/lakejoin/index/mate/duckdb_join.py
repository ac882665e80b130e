"""Brute-force n-ary joinability in DuckDB: the oracle for tests and the baseline for benchmarks.

Eq. 1/2 evaluated literally: join the query's distinct key tuples with the lake's cells once per
key column, each join on the same (dataset, row) and a column not used by the earlier ones, so
every one-to-one mapping Y' that any row supports is enumerated; count distinct query tuples
per (dataset, mapping) and keep each dataset's best mapping. No index, no filter, no pruning.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import pandas as pd
import pyarrow as pa

from lakejoin.normalize import normalize_value


class DuckDBJoin:
    """The lake's cells (``CELLS_SCHEMA``) loaded into DuckDB once, queried per key."""

    def __init__(self, cells: pa.Table, threads: int | None = None):
        self.con = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.register("cells_arrow", cells.select(["dataset_id", "column_id", "row_id", "value"]))
        self.con.execute("CREATE TABLE cells AS SELECT * FROM cells_arrow")
        self.con.unregister("cells_arrow")

    def joinability(
        self, query: pd.DataFrame, columns: list[str], exclude_datasets: Iterable[str] = ()
    ) -> pd.DataFrame:
        """One row per dataset with ȷ > 0: dataset_id, joinability, m0..m{m-1} (best mapping).

        Ties between mappings go to the smallest column-id tuple, as in ``MateSearcher``.
        """
        keys = pd.DataFrame({f"k{i}": query[c].map(normalize_value) for i, c in enumerate(columns)})
        keys = keys.dropna().drop_duplicates().reset_index(drop=True)
        keys["qid"] = range(len(keys))
        self.con.register("q", keys)
        m = len(columns)
        joins = ["JOIN cells c0 ON c0.value = q.k0"]
        for i in range(1, m):
            earlier = ", ".join(f"c{j}.column_id" for j in range(i))
            joins.append(
                f"JOIN cells c{i} ON c{i}.dataset_id = c0.dataset_id AND c{i}.row_id = c0.row_id "
                f"AND c{i}.value = q.k{i} AND c{i}.column_id NOT IN ({earlier})"
            )
        mapping = ", ".join(f"c{i}.column_id AS m{i}" for i in range(m))
        ordered = ", ".join(f"m{i}" for i in range(m))
        excluded = list(exclude_datasets)
        sql = f"""
            WITH hits AS (
                SELECT DISTINCT c0.dataset_id, {mapping}, q.qid FROM q {" ".join(joins)}
                WHERE NOT list_contains($excluded, c0.dataset_id)
            ), scored AS (
                SELECT dataset_id, {ordered}, count(*) AS joinability FROM hits GROUP BY ALL
            )
            SELECT * FROM scored
            QUALIFY row_number() OVER (PARTITION BY dataset_id ORDER BY joinability DESC, {ordered}) = 1
            ORDER BY joinability DESC, dataset_id
        """
        try:
            return self.con.execute(sql, {"excluded": excluded}).df()
        finally:
            self.con.unregister("q")

    def search(
        self, query: pd.DataFrame, columns: list[str], k: int = 10, exclude_datasets: Iterable[str] = ()
    ) -> list[dict]:
        """Top-k in ``MateSearcher.search``'s shape (without sample and rows verified)."""
        best = self.joinability(query, columns, exclude_datasets).head(k)
        return [
            {
                "dataset_id": row.dataset_id,
                "joinability": int(row.joinability),
                "mapping": {c: int(getattr(row, f"m{i}")) for i, c in enumerate(columns)},
            }
            for row in best.itertuples(index=False)
        ]
