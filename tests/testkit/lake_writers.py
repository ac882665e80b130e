"""Checks on a lake's write history shared by the writer tests and the Airflow end-to-end tests."""

from __future__ import annotations

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots


def assert_one_writer_at_a_time(config: LakeConfig) -> None:
    """No commit of another build falls within the span of a CLI run's commits (a run holds the
    lease throughout; a DAG run's tasks each hold it for themselves, so others may commit between)."""
    commits = [
        (commit["timestamp"], delta.commit_build(commit) or "unrecorded")
        for table in [*snapshots.lake_tables(config), "catalog/snapshots"]
        for commit in delta.history(config.table_path(table))
    ]
    runs = {build for _, build in commits if not build.startswith("airflow:")}
    assert runs
    for run in runs:
        mine = [t for t, build in commits if build == run]
        inside = [(t, build) for t, build in commits if build != run and min(mine) <= t <= max(mine)]
        assert not inside, (run, inside)
