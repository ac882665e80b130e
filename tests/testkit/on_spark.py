"""Runs that stay on Spark whatever their size.

A run of a few small files parses them, and a build of a small lake indexes it, in the calling
process (``lakejoin.spark.pipeline.small_ingest``, ``lakejoin.spark.indexing.in_process``). A
test of the Spark path turns both off: in its process with :func:`on_spark`, in a child
process with :data:`ON_SPARK` in its environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lakejoin.config import LOCAL_BUILD_ROWS, LOCAL_INGEST_FILES

ON_SPARK = {LOCAL_INGEST_FILES.name: "0", LOCAL_BUILD_ROWS.name: "0"}


@contextmanager
def on_spark() -> Iterator[None]:
    """Within the block, every ingest and index build of this process runs on Spark."""
    with pytest.MonkeyPatch.context() as settings:
        for name, value in ON_SPARK.items():
            settings.setenv(name, value)
        yield
