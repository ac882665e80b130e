"""Shared fixtures: one Spark session for the whole test run (starting one costs ~10 s)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LAKEJOIN_SHUFFLE_PARTITIONS", "4")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def spark():
    from lakejoin.spark.session import get_spark

    return get_spark("local[2]")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout (benchmarks, fixtures, notes)."""
    if not SHARED.exists():
        pytest.skip("../shared is not beside this checkout")
    return SHARED
