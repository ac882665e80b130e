"""Compile the library's numba kernels into their on-disk cache once, before the test workers start.

The kernels are compiled on first call and cached beside their source (``cache=True``), so on a fresh
clone the first processes to build or search a lake each compile them: at the start of `make test` the
three workers, the Spark Python workers and the Airflow task processes all did, at once, the same
minute of CPU apiece. `make test` runs this beside the type check instead: a small generated lake is
built with every family and its join graph (the kernels a build and the graph use), then each search
method answers one query (the query-time kernels). The families are split over two processes, one
per core, each building and searching its own lake. Kernels only some tests call (the baselines,
the timed list reads) are left to those tests.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES, SEARCH_FAMILIES
from lakejoin.progress import Progress
from lakejoin.query import QueryEngine
from lakejoin.spark.pipeline import RunOptions, run
from lakejoin.testing import generate_lake

# about the same compile time each: JOSIE's kernels are the most, MATE's and PEXESO's together as many;
# the second process takes every family the first does not, so a new family is warmed too
FIRST = ("josie", "lshensemble", "qgram")
GROUPS = (FIRST, tuple(family for family in FAMILIES if family not in FIRST))


def warm(sources: Path, home: Path, families: tuple[str, ...]) -> None:
    """Build ``families`` on the tables of ``sources`` in this process, then search each."""
    config = LakeConfig(home=home, quiet=True)
    run(config, RunOptions(sources=[f"folder:{sources}"], shards=2, families=families), Progress(quiet=True))
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    dataset_id = max(loaded.datasets, key=lambda d: len(loaded.columns_of(d)))
    names = [column.name for column in loaded.columns_of(dataset_id)]
    for method in (f for f in families if f in SEARCH_FAMILIES):
        engine.search(method, names[:2] if method == "mate" else names[:1], dataset_id=dataset_id, k=5)


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lakejoin-warm-kernels-") as folder:
        sources = Path(folder) / "sources"
        generate_lake(sources, n_tables=12, seed=1, max_rows=300)
        # spawned, not forked: the parent's imported libraries may hold threads
        with ProcessPoolExecutor(len(GROUPS), mp_context=multiprocessing.get_context("spawn")) as pool:
            homes = [Path(folder) / f"home-{n}" for n in range(len(GROUPS))]
            list(pool.map(warm, [sources] * len(GROUPS), homes, GROUPS))
    print(f"numba kernels compiled and cached in {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
