"""Portal -> CKAN crawler -> ingestion, over real HTTP on 127.0.0.1 (issue: crawl open-data portals).

The crawler's own tests cover the HTTP rules; these check what the lake ends up holding.
"""

from __future__ import annotations

import socket

import pandas as pd
import pytest

from lakejoin.config import LakeConfig
from lakejoin.lake import catalog
from lakejoin.lake.schemas import DATASETS
from lakejoin.portal import Faults, serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import RunOptions, ingest

pytestmark = pytest.mark.spark

FAST_RETRIES = {"requests_per_second": 0, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 6}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def crawl(config, url, **options):
    run = RunOptions(
        sources=[f"ckan:{url}"],
        allow_private_hosts=True,
        source_options={**FAST_RETRIES, **options.pop("source_options", {})},
        **options,
    )
    return ingest(config, run, Progress(quiet=True))


def stored(config):
    return catalog.load_datasets(config.table_path(DATASETS))


@pytest.fixture(scope="module")
def portal_lake(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("portal")
    tables = write_real_tables(root, 24)
    config = LakeConfig.from_args(str(tmp_path_factory.mktemp("home")), "local[2]", quiet=True)
    port = free_port()
    with serve(root, port=port) as portal:
        first = crawl(config, portal.url)
    return config, root, tables, port, first


def test_a_crawl_lands_every_table(portal_lake):
    config, _, tables, _, first = portal_lake
    rows = stored(config)
    assert first.counts["listed"] == len(tables) == first.counts["active"]
    assert {r["status"] for r in rows.values()} == {"active"}
    assert all(r["metadata_modified"] and r["source"].startswith("ckan:") for r in rows.values())


def test_recrawl_downloads_nothing_then_exactly_four_datasets_change(portal_lake):
    config, root, tables, port, _ = portal_lake
    before = stored(config)
    with serve(root, port=port) as portal:
        again = crawl(config, portal.url)
        assert portal.stats["bodies"] == 0
    assert again.changed == set() and {d: r["version"] for d, r in stored(config).items()} == {
        d: r["version"] for d, r in before.items()
    }

    csvs = sorted(p for p in tables if p.suffix == ".csv")
    for path in csvs[:2]:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        frame.iloc[:, 0] = frame.iloc[:, 0] + "x"
        frame.to_csv(path, index=False)
    csvs[2].unlink()
    pd.DataFrame({"code": ["a", "b"], "label": ["alpha", "beta"]}).to_csv(root / "added_table.csv", index=False)
    with serve(root, port=port) as portal:
        changed = crawl(config, portal.url)
    after = stored(config)
    assert len(changed.changed) == 4
    statuses = sorted((after[d]["status"], after[d]["version"]) for d in changed.changed)
    assert statuses == [("active", 1), ("active", 2), ("active", 2), ("removed", 1)]
    untouched = set(before) - changed.changed
    assert all(after[d]["version"] == before[d]["version"] and after[d]["status"] == "active" for d in untouched)


def test_faults_never_fail_the_crawl_or_lose_what_was_stored(portal_lake):
    config, root, _tables, port, _ = portal_lake
    before = stored(config)
    csvs = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.csv"))
    for name in csvs[:4]:  # new content for the fault targets, so the crawler must fetch them
        frame = pd.read_csv(root / name, dtype=str, keep_default_na=False)
        pd.concat([frame, frame.head(1)]).to_csv(root / name, index=False)
    faults = Faults(
        error_rate=0.1,
        rate_limit_rate=0.05,
        retry_after_s=0,
        truncate={csvs[0]},
        html={csvs[1]},
        oversize={csvs[2]},
        oversize_bytes=4096,
        seed=7,
    )
    with serve(root, port=port, faults=faults) as portal:
        result = crawl(config, portal.url, max_bytes=1 << 20)
        assert portal.stats["fault_500"] > 0
    after = stored(config)
    for dataset_id, row in before.items():
        if row["status"] == "active":
            assert after[dataset_id]["status"] == "active", after[dataset_id]  # a good version is never lost
    troubled = {d for d, r in after.items() if r["reason"]}
    assert len(troubled) >= 2  # the HTML page and the oversized file at least
    assert all(after[d]["reason"] for d in troubled)
    assert result.counts["listed"] == len(after) - sum(r["status"] == "removed" for r in after.values())
