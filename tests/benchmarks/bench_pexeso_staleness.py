"""How PEXESO search slows as vectors are inserted with kept pivots (``index/pexeso/update.py``).

Lake: synthetic unit vectors (``--dim``, default 24). The full build indexes 150 columns drawn
from 8 topics around one direction; the inserted columns come from 8 topics around another
(a lake gaining a new domain: the worst case for pivots selected before it arrived). For each
inserted share, the inserted columns are mapped with the full build's pivots and grid bounds
and posted, as an incremental build does (one partition), and the same columns are also built
afresh. Both answer the same 20 queries (noisy subsets of old and new columns; τ = 0.06,
T = 0.6) and must return the same columns; printed: the inserted share, the share outside the
grid bounds, exact distance computations per query of both and their ratio. ``--given`` fixes
|P| = 5, m = 3 in both builds (default: the cost model chooses). A run takes about a minute.
Run: ``.venv/bin/python tests/benchmarks/bench_pexeso_staleness.py [--given]``.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
from report import run_with_docs

from lakejoin.index.pexeso import build_in_memory, load
from lakejoin.index.pexeso.build import MAPPED_SCHEMA, PartitionPlan, cells_table, vector_list

SHARES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 9.0)  # inserted vectors per vector of the full build
QUERIES = 20


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def topic_columns(rng: np.random.Generator, anchor: np.ndarray, n_columns: int, first_id: int) -> dict[int, np.ndarray]:
    """``n_columns`` columns, each from one of 8 topics around ``anchor``."""
    dim = len(anchor)
    topics = unit(anchor + 0.6 * rng.normal(size=(8, dim)) / np.sqrt(dim))
    return {
        first_id + c: unit(
            topics[rng.integers(8)] + rng.normal(scale=1 / np.sqrt(dim), size=(int(rng.integers(20, 120)), dim))
        )
        for c in range(n_columns)
    }


def insert(tables: dict[str, pa.Table], columns: dict[int, np.ndarray]) -> tuple[dict[str, pa.Table], int]:
    """``tables`` (one partition, one shard) with ``columns`` mapped by the kept pivots and
    bounds and posted, as ``lakejoin.spark.pexeso`` inserts; also the count outside the bounds."""
    s = tables["params"].to_pylist()[0]
    pivots = np.asarray(tables["pivots"].sort_by("pivot")["vector"].to_pylist(), np.float32)
    plan = PartitionPlan(
        0, pivots, np.asarray(s["lo"]), np.asarray(s["hi"]), s["levels"], s["chosen_by"], s["sample_size"]
    )
    vectors = np.concatenate(list(columns.values()))
    column_ids = np.concatenate([np.full(len(v), c, np.int64) for c, v in columns.items()])
    vector_ids = np.concatenate([np.arange(len(v), dtype=np.int64) for v in columns.values()])
    zeros = np.zeros(len(vectors), np.int32)
    mapped, cells = plan.map(vectors)
    new = pa.table(
        {
            "shard": zeros,
            "partition": zeros,
            "dataset_id": pa.nulls(len(vectors), pa.string()),
            "column_id": column_ids,
            "vector_id": vector_ids,
            "value": pa.nulls(len(vectors), pa.string()),
            "vector": vector_list(vectors, pa.float32()),
            "mapped": vector_list(mapped, pa.float64()),
            "inserted": np.ones(len(vectors), dtype=bool),
        },
        schema=MAPPED_SCHEMA,
    )
    grown = {
        **tables,
        "mapped": pa.concat_tables([tables["mapped"], new]),
        "cells": pa.concat_tables([tables["cells"], cells_table(zeros, zeros, cells, column_ids, vector_ids)]),
    }
    return grown, int(plan.outside(mapped).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dim", type=int, default=24)
    parser.add_argument("--given", action="store_true", help="|P| = 5, m = 3 instead of the cost model's choice")
    args = parser.parse_args()
    options = {"n_pivots": 5, "levels": 3} if args.given else {}
    rng = np.random.default_rng(5)
    anchors = unit(rng.normal(size=(2, args.dim)))
    base = topic_columns(rng, anchors[0], 150, 0)
    extra = topic_columns(rng, anchors[1], 1400, len(base))
    built = build_in_memory(base, **options)
    n_base = built["mapped"].num_rows
    shape = built["params"].to_pylist()[0]
    print(f"full build: {len(base)} columns, {n_base} vectors, |P|={shape['n_pivots']} m={shape['levels']}")
    print("inserted share  outside share  dist/q incremental  dist/q fresh  ratio  fresh |P|×m")
    queries = np.random.default_rng(9)
    for share in SHARES:
        added, total = {}, 0
        for c, v in extra.items():
            if total >= share * n_base:
                break
            added[c], total = v, total + len(v)
        grown, outside = insert(built, added)
        everything = {**base, **added}
        fresh = build_in_memory(everything, **options)
        incremental, rebuilt = load(grown), load(fresh)
        work = np.zeros(2)
        for j in range(QUERIES):
            pool = list(added) if j % 2 else list(base)
            source = everything[pool[queries.integers(len(pool))]]
            size = min(30, len(source))
            query = unit(
                source[queries.choice(len(source), size, replace=False)]
                + queries.normal(scale=0.02, size=(size, args.dim))
            )
            answers = []
            for i, searcher in enumerate((incremental, rebuilt)):
                answers.append({r["column_id"] for r in searcher.search(query, 0.06, 0.6)})
                work[i] += searcher.last_stats.distances
            assert answers[0] == answers[1], "the incremental index must answer as the fresh build"
        p = fresh["params"].to_pylist()[0]
        n = total + n_base
        print(
            f"{total / n:14.2f}  {outside / n:13.3f}  {work[0] / QUERIES:18.0f}  {work[1] / QUERIES:12.0f}  "
            f"{work[0] / work[1]:5.2f}  {p['n_pivots']}×{p['levels']}"
        )


if __name__ == "__main__":
    run_with_docs(main)
