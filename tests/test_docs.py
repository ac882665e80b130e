"""The documentation: the site builds with ``mkdocs build --strict`` (a broken link, a missing page or
a docstring mkdocstrings cannot read fails), its CLI and REST pages come from the code, the README
stays a user's page, and every benchmark can write its table into the site."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in ("getting-started", "concepts", "architecture", "operations", "benchmarks", "methods/josie"):
        assert (site / page / "index.html").exists(), page


def test_the_cli_reference_names_every_command_and_flag(site: Path) -> None:
    from lakejoin.cli import build_parser

    page = (site / "reference" / "cli" / "index.html").read_text()
    _, modules = build_parser()
    for name in modules:
        assert f'id="{name}"' in page, name
    assert "--lower-bound" in page and "--retain" in page and "--spark-master" in page


def test_the_rest_reference_lists_every_route_of_the_app(site: Path) -> None:
    sys.path.insert(0, str(ROOT / "plugins"))
    from lakejoin_airflow.api import app

    page = (site / "reference" / "rest" / "index.html").read_text()
    for path in app.openapi()["paths"]:
        assert f"/lakejoin{path}" in page, path


def test_a_method_page_shows_its_parameters_from_the_code(site: Path) -> None:
    from lakejoin.query.params import METHOD_SPECS

    page = (site / "methods" / "pexeso" / "index.html").read_text()
    for spec in METHOD_SPECS["pexeso"].params:
        assert f"<code>{spec.name}</code>" in page, spec.name


def test_the_architecture_page_names_every_package(site: Path) -> None:
    page = (site / "architecture" / "index.html").read_text()
    library = ROOT / "include"
    for init in (library / "lakejoin").rglob("__init__.py"):
        package = ".".join(init.parent.relative_to(library).parts)
        assert f"<code>{package}</code>" in page, package


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    for package in ("include", "plugins"):
        (copy / package).symlink_to(ROOT / package)
    concepts = copy / "docs" / "concepts.md"
    concepts.write_text(concepts.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    built = build(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr


def test_the_readme_is_a_users_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "make demo" in readme and "make test" in readme


def test_every_benchmark_script_can_write_its_table_into_the_docs() -> None:
    scripts = sorted((ROOT / "tests" / "benchmarks").glob("bench_*.py"))
    assert scripts
    for script in scripts:
        assert "run_with_docs(main)" in script.read_text(), script.name


def test_a_benchmark_fragment_holds_command_machine_date_and_output(tmp_path: Path) -> None:
    script = tmp_path / "bench_demo.py"
    script.write_text(
        "import subprocess, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests' / 'benchmarks')!r})\n"
        "from report import run_with_docs\n"
        "def main():\n"
        "    print('args', sys.argv[1:])\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"row from a child process\")'], check=True)\n"
        "    return 3\n"
        "sys.exit(run_with_docs(main))\n"
    )
    fragment = tmp_path / "out" / "demo.md"
    ran = subprocess.run(
        [sys.executable, str(script), "--quick", "--markdown", str(fragment), "-k", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 3
    assert "args ['--quick', '-k', '5']" in ran.stdout  # still shown as it runs, without the docs option
    text = fragment.read_text()
    assert f"`python {script} --quick -k 5`" in text
    assert "cores" in text and "GiB" in text and "load average" in text and " UTC" in text
    assert "args ['--quick', '-k', '5']\nrow from a child process\n```" in text


def test_the_settings_reference_lists_every_setting(site: Path) -> None:
    from lakejoin.config import SETTINGS

    page = (site / "reference" / "settings" / "index.html").read_text()
    for name, declared in SETTINGS.items():
        assert name in page and declared.kind.value in page, name
