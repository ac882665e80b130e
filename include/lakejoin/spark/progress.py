"""Progress of Spark stages on a terminal: counts, rate and ETA of the tasks a stage runs.

Spark's own console bar is off (it interleaves with everything else), so a stage runs its jobs
in a job group of its own and a daemon thread polls the status tracker for that group's tasks,
feeding ``lakejoin.progress.Progress.update``. The total grows as a stage plans further jobs;
the ETA is for the tasks planned so far. Job groups belong to the thread that sets them
(PySpark pins Python threads to JVM threads), so stages running side by side count apart.
Off a terminal (``--json``, ``--quiet``, Airflow) nothing polls.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import StatusTracker
from pyspark.sql import SparkSession

from lakejoin.progress import Progress

POLL_SECONDS = 0.5
_GROUP = "spark.jobGroup.id"


@contextmanager
def spark_tasks(
    spark: SparkSession | None, progress: Progress, label: str, poll_seconds: float = POLL_SECONDS
) -> Iterator[None]:
    """Show the tasks of the Spark jobs this thread starts inside the block (nothing when the
    stage runs without Spark: ``spark`` None)."""
    if spark is None or not progress.interactive:
        yield
        return
    context = spark.sparkContext
    previous = context.getLocalProperty(_GROUP)
    group = f"lakejoin-{label}-{uuid.uuid4().hex[:8]}"
    context.setJobGroup(group, label)
    stop = threading.Event()
    started = time.perf_counter()

    def draw() -> None:
        done, total = task_counts(context.statusTracker(), group)
        if total:
            progress.update(f"{label} tasks", done, total, started)

    def poll() -> None:
        while not stop.wait(poll_seconds):
            draw()

    poller = threading.Thread(target=poll, name=f"lakejoin-progress-{label}", daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        draw()  # the final count, so the line left on screen is the truth
        context.setLocalProperty(_GROUP, previous)  # type: ignore[arg-type]  # None removes the property again (PySpark's stub says str)
        progress.done()


def task_counts(tracker: StatusTracker, group: str) -> tuple[int, int]:
    """(completed, planned) tasks over the stages of the group's jobs. A finished job's stages
    that ran no task were skipped (their shuffle output was reused): they are not counted."""
    done = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None or (job.status == "SUCCEEDED" and stage.numCompletedTasks == 0):
                continue
            done += stage.numCompletedTasks
            total += stage.numTasks
    return done, total
