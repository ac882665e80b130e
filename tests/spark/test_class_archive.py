"""The Spark driver's class-data archive (lakejoin.spark.class_archive): built once, mapped by every
later session start, and never left half-written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakejoin.config import SPARK_CLASS_ARCHIVE, SPARK_JAVA_OPTIONS
from lakejoin.spark import class_archive

pytestmark = [pytest.mark.spark]

SESSION = "from lakejoin.spark.session import get_spark; print(get_spark('local[1]').range(10).count())"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The environment's archive, which `make test` writes before the tests (`make spark-archive`),
    or, where there is none, one built for this module."""
    installed = class_archive.archive_path()
    if installed is not None and installed.is_file():
        return installed
    folder = tmp_path_factory.mktemp("class-archive")
    built = class_archive.build(folder / "spark.jsa")
    assert [p.name for p in folder.iterdir()] == ["spark.jsa"]  # no partial file left beside it
    return built


def test_a_built_archive_is_mapped_by_the_next_session_start(archive: Path, tmp_path: Path) -> None:

    loaded = tmp_path / "classes.log"
    options = " ".join(filter(None, [SPARK_JAVA_OPTIONS.read(), f"-Xlog:class+load=info:file={loaded}"]))
    environment = {**os.environ, SPARK_CLASS_ARCHIVE.name: str(archive), SPARK_JAVA_OPTIONS.name: options}
    session = subprocess.run(
        [sys.executable, "-c", SESSION], env=environment, capture_output=True, text=True, timeout=300, check=False
    )
    assert session.returncode == 0, session.stderr[-3000:]
    assert session.stdout.split() == ["10"]
    assert "[cds]" not in session.stderr
    from_archive = [line for line in loaded.read_text().splitlines() if "shared objects file (top)" in line]
    assert sum("org.apache.spark." in line for line in from_archive) > 1000, len(from_archive)


def test_a_failed_build_raises_and_leaves_the_archive_there_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"the archive of an earlier build")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # the session cannot start its JVM
    with pytest.raises(RuntimeError, match="the session that loads the classes failed"):
        class_archive.build(archive)
    assert archive.read_bytes() == b"the archive of an earlier build"
    assert [p.name for p in tmp_path.iterdir()] == ["spark.jsa"]


def test_the_driver_maps_an_archive_only_when_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "spark.jsa"
    monkeypatch.setenv(SPARK_CLASS_ARCHIVE.name, str(archive))
    assert class_archive.driver_options() == ""
    archive.write_bytes(b"")
    assert class_archive.driver_options().startswith(f"-XX:SharedArchiveFile={archive} ")
    monkeypatch.setenv(SPARK_CLASS_ARCHIVE.name, "off")
    assert class_archive.archive_path() is None
    assert class_archive.driver_options() == ""
    monkeypatch.delenv(SPARK_CLASS_ARCHIVE.name)
    assert class_archive.archive_path().parent == Path(sys.prefix) / "share" / "lakejoin"


def test_the_discover_operator_hands_the_archive_to_its_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "plugins"))
    from lakejoin_airflow.operators import LakeDiscoverOperator

    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"")
    monkeypatch.setenv(SPARK_CLASS_ARCHIVE.name, str(archive))
    plain = LakeDiscoverOperator(task_id="discover", method="mate", queries="all", out="answers")
    assert plain.spark_conf() == {"spark.driver.extraJavaOptions": class_archive.driver_options()}
    own = {"spark.driver.extraJavaOptions": "-Dmine=1", "spark.executor.cores": "1"}
    assert LakeDiscoverOperator(task_id="own", method="mate", queries="all", out="o", conf=own).spark_conf() == own
    monkeypatch.setenv(SPARK_CLASS_ARCHIVE.name, "off")
    assert plain.spark_conf() == {}
