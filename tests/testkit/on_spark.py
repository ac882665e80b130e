"""Runs that stay on Spark, or off it, whatever their size.

A run of a few small files parses them, and a build of a small lake indexes it, in the calling
process (``lakejoin.spark.pipeline.small_ingest``, ``lakejoin.spark.indexing.in_process``). A
test of the Spark path turns both off: in its process with :func:`on_spark`, in a child
process with :data:`ON_SPARK` in its environment. A test that only needs a lake built, not the
Spark path that builds it, keeps both in the calling process whatever the lake's size with
:func:`in_process`: the two paths write the same tables (tests/index/test_shards.py checks it),
and the calling process does it without Spark's task scheduling, Python workers and JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lakejoin.config import LOCAL_BUILD_ROWS, LOCAL_INGEST_BYTES, LOCAL_INGEST_FILES

ON_SPARK = {LOCAL_INGEST_FILES.name: "0", LOCAL_BUILD_ROWS.name: "0"}
IN_PROCESS = {
    LOCAL_INGEST_FILES.name: str(10**6),
    LOCAL_INGEST_BYTES.name: str(2**40),
    LOCAL_BUILD_ROWS.name: str(10**9),
}


@contextmanager
def on_spark() -> Iterator[None]:
    """Within the block, every ingest and index build of this process runs on Spark."""
    with _settings(ON_SPARK):
        yield


@contextmanager
def in_process() -> Iterator[None]:
    """Within the block, every ingest and index build of this process runs in it, however large."""
    with _settings(IN_PROCESS):
        yield


@contextmanager
def _settings(values: dict[str, str]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as settings:
        for name, value in values.items():
            settings.setenv(name, value)
        yield
