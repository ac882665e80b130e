"""Both portal crawlers against the local portal over real tables, over real HTTP on 127.0.0.1:
full crawl, unchanged re-crawl, conditional GET, change/delete/add, and a faulty portal."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lakejoin.portal import Faults, serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.sources import Resource, SourceUnavailable, open_source

KINDS = ("ckan", "socrata")
FAST = {"allow_private_hosts": True, "requests_per_second": 0, "backoff_base_s": 0.01, "backoff_max_s": 0.05}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def remember(resources: Iterable[Resource], previous: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What ingestion stores per dataset: fetched ones get a new row, unchanged and failed ones
    keep the stored row, datasets not yielded are gone."""
    rows = {}
    for r in resources:
        if r.local_path is not None:
            rows[r.dataset_id] = {
                "url": r.url,
                "etag": r.etag,
                "last_modified": r.last_modified,
                "metadata_modified": r.metadata_modified,
                "content_sha256": sha256(r.local_path),
            }
        elif r.dataset_id in previous:
            rows[r.dataset_id] = dict(previous[r.dataset_id])
    return rows


def crawl(spec: str, previous: Mapping[str, Mapping[str, Any]], workdir: Path, **options: Any) -> dict[str, Resource]:
    if spec.startswith("socrata:"):
        options.setdefault("export_page_rows", 100_000)  # one export page per table here
    resources = list(open_source(spec, **FAST, **options).resources(previous, workdir))
    assert len({r.dataset_id for r in resources}) == len(resources), "a dataset was yielded twice"
    return {r.dataset_id: r for r in resources}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("portal")
    write_real_tables(root, 30, parquet_every=6)
    return root


@pytest.mark.parametrize("kind", KINDS)
def test_full_crawl_fetches_every_table_with_its_real_content(kind: str, tables: Path, tmp_path: Path) -> None:
    files = sorted(p for p in tables.rglob("*") if p.is_file())
    with serve(tables) as portal:
        got = crawl(f"{kind}:{portal.url}", {}, tmp_path, page_size=7)
    assert len(got) == len(files)
    assert all(r.local_path is not None and r.error is None for r in got.values())
    by_title = {r.title: r for r in got.values()}
    for path in files:
        resource = by_title[path.stem]
        assert resource.publisher == path.parent.name.lower()
        assert resource.license and resource.metadata_modified
        expected = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        fetched = (
            pd.read_parquet(resource.local_path) if resource.format == "parquet" else pd.read_csv(resource.local_path)
        )
        assert fetched.shape == expected.shape
        assert list(fetched.columns) == list(expected.columns)
        assert resource.local_path.parent == tmp_path and path.stem not in resource.local_path.name


@pytest.mark.parametrize("kind", KINDS)
def test_unchanged_recrawl_downloads_no_bodies(kind: str, tables: Path, tmp_path: Path) -> None:
    with serve(tables) as portal:
        first = crawl(f"{kind}:{portal.url}", {}, tmp_path)
        stored = remember(first.values(), {})
        bodies = portal.stats["bodies"]
        second = crawl(f"{kind}:{portal.url}", stored, tmp_path)
        assert portal.stats["bodies"] == bodies
    assert second.keys() == first.keys()
    assert all(r.unchanged and r.local_path is None for r in second.values())


@pytest.mark.parametrize("kind", KINDS)
def test_without_stored_metadata_a_conditional_get_answers_304(kind: str, tables: Path, tmp_path: Path) -> None:
    with serve(tables) as portal:
        stored = remember(crawl(f"{kind}:{portal.url}", {}, tmp_path).values(), {})
        validators_only = {k: {**row, "metadata_modified": None} for k, row in stored.items()}
        bodies = portal.stats["bodies"]
        again = crawl(f"{kind}:{portal.url}", validators_only, tmp_path)
        assert portal.stats["bodies"] == bodies
        assert portal.stats["not_modified"] == len(stored)
    assert all(r.unchanged for r in again.values())


@pytest.mark.parametrize("kind", KINDS)
def test_change_two_delete_one_add_one_changes_exactly_those(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "tables"
    files = write_real_tables(root, 12)
    with serve(root) as portal:
        spec = f"{kind}:{portal.url}"
        first = crawl(spec, {}, tmp_path / "w1")
        stored = remember(first.values(), {})
        title_to_id = {r.title: r.dataset_id for r in first.values()}

        changed, deleted = files[1:3], files[4]
        for path in changed:
            frame = pd.read_csv(path)
            frame.iloc[: len(frame) - 1].to_csv(path, index=False)
            later = path.stat().st_mtime + 5
            os.utime(path, (later, later))
        deleted.unlink()
        added = write_real_tables(tmp_path / "more", 13)[-1]
        (root / "added").mkdir()
        added = Path(added.replace(root / "added" / added.name))

        bodies = portal.stats["bodies"]
        after = crawl(spec, stored, tmp_path / "w2")
        assert portal.stats["bodies"] - bodies == 3

    assert title_to_id[deleted.stem] not in after
    fetched = {r.title for r in after.values() if r.local_path is not None}
    assert fetched == {p.stem for p in changed} | {added.stem}
    assert all(r.unchanged for r in after.values() if r.title not in fetched)
    for path in changed:
        dataset_id = title_to_id[path.stem]
        assert sha256(after[dataset_id].local_path) != stored[dataset_id]["content_sha256"]


@pytest.mark.parametrize("kind", KINDS)
def test_faulty_portal_crawl_finishes_and_every_dataset_is_fetched_or_explained(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "tables"
    files = [p.relative_to(root).as_posix() for p in write_real_tables(root, 24)]
    truncated, html, oversized, wrong_type = files[5], files[9], files[13], files[17]
    faults = Faults(
        error_rate=0.10,
        rate_limit_rate=0.03,
        retry_after_s=1,
        truncate={truncated},
        html={html},
        oversize={oversized},
        wrong_type={wrong_type},
        oversize_bytes=16 * 2**20,
        seed=7,
    )
    with serve(root, faults=faults) as portal:
        got = crawl(f"{kind}:{portal.url}", {}, tmp_path / "w", page_size=5, max_retries=6, max_bytes=8 * 2**20)
        stats = portal.stats
    assert stats["fault_500"] > 0 and stats["fault_429"] > 0
    assert len(got) == len(files)
    by_title = {r.title: r for r in got.values()}
    errors = {title: r.error for title, r in by_title.items() if r.error}
    assert all((r.local_path is None) == bool(r.error) for r in got.values())
    assert set(errors) == {Path(truncated).stem, Path(html).stem, Path(oversized).stem}
    assert "truncated" in errors[Path(truncated).stem]
    assert "html" in errors[Path(html).stem]
    assert "too large" in errors[Path(oversized).stem]
    assert by_title[Path(wrong_type).stem].local_path is not None  # sniffed as CSV despite text/html
    assert not list((tmp_path / "w").glob("*.part"))


@pytest.mark.parametrize("kind", KINDS)
def test_listing_failure_raises_source_unavailable(kind: str, tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    with (
        serve(tmp_path / "t", faults=Faults(error_rate=1.0)) as portal,
        pytest.raises(SourceUnavailable, match="HTTP 500"),
    ):
        crawl(f"{kind}:{portal.url}", {}, tmp_path, max_retries=1)


@pytest.mark.parametrize("kind", KINDS)
def test_loopback_portal_is_refused_without_the_flag(kind: str, tables: Path, tmp_path: Path) -> None:
    with serve(tables) as portal:
        source = open_source(f"{kind}:{portal.url}")
        with pytest.raises(SourceUnavailable, match="non-public address"):
            list(source.resources({}, tmp_path))
        assert portal.stats["requests"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_option_is_a_clear_error(kind: str) -> None:
    with pytest.raises(ValueError, match="unknown option"):
        open_source(f"{kind}:http://example.org", max_byte=10)
