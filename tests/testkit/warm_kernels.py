"""Compile the library's numba kernels into their on-disk cache once, before the test workers start.

The kernels are compiled on first call and cached beside their source (``cache=True``), so on a fresh
clone the first processes to build or search a lake each compile them: at the start of `make test` the
three workers, the Spark Python workers and the Airflow task processes all did, at once, the same
minute of CPU apiece. `make test` runs this beside the type check instead: a small generated lake is
built in this process with every family and its join graph (the kernels a build and the graph use),
then each search method answers one query (the query-time kernels). Kernels only some tests call
(the baselines, the timed list reads) are left to those tests.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from lakejoin.config import LakeConfig
from lakejoin.index import SEARCH_FAMILIES
from lakejoin.progress import Progress
from lakejoin.query import QueryEngine
from lakejoin.spark.pipeline import RunOptions, run
from lakejoin.testing import generate_lake


def warm(root: Path) -> None:
    sources = root / "sources"
    generate_lake(sources, n_tables=12, seed=1, max_rows=300)
    config = LakeConfig(home=root / "home", quiet=True)
    run(config, RunOptions(sources=[f"folder:{sources}"], shards=2), Progress(quiet=True))
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    dataset_id = max(loaded.datasets, key=lambda d: len(loaded.columns_of(d)))
    names = [column.name for column in loaded.columns_of(dataset_id)]
    for method in SEARCH_FAMILIES:
        engine.search(method, names[:2] if method == "mate" else names[:1], dataset_id=dataset_id, k=5)


if __name__ == "__main__":
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lakejoin-warm-kernels-") as folder:
        warm(Path(folder))
    print(f"numba kernels compiled and cached in {time.perf_counter() - started:.0f} s", file=sys.stderr)
