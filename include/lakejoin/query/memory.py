"""How much memory loading a family's searcher takes, and refusing a load that would not fit.

Every searcher serves from memory. Past what the machine has, the alternative to a clear
refusal is the kernel's OOM killer taking the query process down (the Airflow API server, with
every other family's searcher in it). So before reading a family's index tables the query side
estimates the load's peak from the row counts in the Delta log (no data file is opened) and
refuses with :class:`IndexTooLarge` when it exceeds the memory this process may still use.

The bytes per row (each family's ``load_bytes_per_row``) are the peak resident memory of
``load`` measured on this project's indexes (JOSIE open-data and web-table sets, LSH Ensemble
signatures, MATE and PEXESO on the bundled lake, JOSIE's token dictionary on the
1,000,000-set lake of ``bench_scale.py``), with some headroom; the figures are in the
benchmarks history (docs). They are upper bounds for those shapes, not exact for every lake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from lakejoin.config import INDEX_MEMORY
from lakejoin.index import registry

MEMORY_LIMIT_VARIABLE = INDEX_MEMORY.name  # e.g. "8G": a fixed budget for one family's load
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


class IndexTooLarge(LookupError):
    """Loading the family's searcher would take more memory than this process may use."""


def parse_size(text: str) -> int:
    """Bytes in ``"512M"``, ``"8G"``, ``"8GiB"`` or a plain number (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{MEMORY_LIMIT_VARIABLE}={text!r} is not a size like 512M or 8G")
    number, unit = match.groups()
    return int(float(number) * 1024 ** " KMGT".index(unit.upper() or " "))


def estimated_load_bytes(family: str, rows: Mapping[str, int]) -> int:
    """Peak memory of loading ``family`` whose index tables hold ``rows`` (table -> row count)."""
    per_row = registry.family(family).load_bytes_per_row
    return sum(per_row.get(table, 0) * count for table, count in rows.items())


def available_bytes() -> int | None:
    """Memory this process may still take: the smaller of the kernel's MemAvailable and what the
    cgroup (a container's limit) leaves; ``$LAKEJOIN_INDEX_MEMORY`` replaces both. None: unknown."""
    configured = INDEX_MEMORY.read()
    if configured:
        return parse_size(configured)
    candidates = [v for v in (_meminfo_available(), _cgroup_headroom()) if v is not None]
    return min(candidates) if candidates else None


def check_fits(family: str, rows: Mapping[str, int], snapshot_id: int) -> None:
    """Raise :class:`IndexTooLarge` when loading ``family`` would not fit in memory."""
    needed, available = estimated_load_bytes(family, rows), available_bytes()
    if available is not None and needed > available:
        biggest = max(rows, key=lambda t: rows[t] * registry.family(family).load_bytes_per_row.get(t, 0))
        raise IndexTooLarge(
            f"the {family} index of snapshot {snapshot_id} needs about {_human(needed)} to load "
            f"({rows[biggest]:,} rows in index/{family}/{biggest}) and this process may use "
            f"{_human(available)}; serve it from a machine with more memory, or raise "
            f"${MEMORY_LIMIT_VARIABLE} if the estimate is too cautious for this lake"
        )


def _human(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_headroom() -> int | None:
    """cgroup v2 ``memory.max`` minus ``memory.current`` (None when unlimited or absent)."""
    folder = Path("/sys/fs/cgroup")
    try:
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((folder / "memory.current").read_text())
    except (OSError, ValueError):
        return None
