# The README's two commands are `make demo` and `make test`; both install everything first.
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
export HF_HUB_OFFLINE := 1

.PHONY: install system-deps demo test test-install lint warm-kernels spark-archive bench docs airflow-setup clean

$(PY):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip uv

# Exact versions resolved and tested together (regenerate: uv pip compile pyproject.toml --extra dev -o requirements.lock).
# Bytecode is compiled at install (as pip does, uv does not by default): where the environment sets
# PYTHONDONTWRITEBYTECODE no process ever writes it, and every Airflow task, CLI call and Spark
# Python worker compiled its imports from source (importing GE and Airflow: 9.0 -> 3.8 CPU-s,
# tests/benchmarks/bench_parts.py imports).
install: $(PY) system-deps
	$(UV) pip install --python $(PY) --quiet --compile-bytecode -r requirements.lock
	$(UV) pip install --python $(PY) --quiet --no-deps -e .
	$(PY) -m compileall -q -j 0 include plugins dags spark_jobs >/dev/null

# Java for Spark, Chromium + chromedriver for the search page's browser test, PostgreSQL for Airflow's metadata
# DB (`make airflow` and the Airflow end-to-end tests): Debian packages.
system-deps:
	@command -v java >/dev/null || (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) || echo "chromium not installed: the browser test will be skipped"
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq postgresql)

# Main job on the embedded default: local Spark, local Delta lake, the bundled real-data lake (500 tables).
demo: install
	$(VENV)/bin/lakejoin run

# The whole check CI runs: lint and types first (half a minute), beside them the numba kernels compiled into their
# cache once (tests/testkit/warm_kernels.py: else every worker compiles them at once) and the Spark driver's class
# archive written (the suite starts dozens of Spark sessions), then every test, test modules
# spread over three worker processes (pytest-xdist; a module's tests stay in one worker, so its fixtures are built
# once), the longest modules first (tests/testkit/schedule.py); the slowest and costliest tests are listed at the end.
test: install
	$(MAKE) --no-print-directory -j3 lint warm-kernels spark-archive
	$(VENV)/bin/pytest -q -n 3 --dist loadfile --durations=15

warm-kernels: install
	$(PY) tests/testkit/warm_kernels.py

# The Spark driver JVM's class-data archive (lakejoin.spark.class_archive), once per environment: every later
# Spark session start maps it instead of loading Spark's classes again (about 3 s and 3 CPU-s less per start).
spark-archive: install
	$(PY) -m lakejoin.spark.class_archive

# Code hygiene (configured in pyproject.toml): lint, formatting and types. Fails on any finding.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Only the check that `pip install .` (pyproject's dependencies, not the lock) gives a working main job.
test-install: install
	$(VENV)/bin/pytest -q -m pip_install

bench: install
	for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b --quick || exit 1; done

# The documentation site (mkdocs.yml, docs/) into site/; its CLI and REST pages are generated from the code
# while it builds. `make test` builds it too (tests/test_docs.py), with --strict like this.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Apply airflow_settings.yaml (connections, pools, variables) to the configured Airflow DB.
airflow-setup: install
	$(VENV)/bin/airflow db migrate
	$(PY) -c "from pathlib import Path; from lakejoin.deploy import apply_settings; print(apply_settings(Path('airflow_settings.yaml')))"

# Airflow 3 on this machine (lakejoin.airflow_local): PostgreSQL on 127.0.0.1, LocalExecutor, the DAGs and
# plugin, airflow_settings.yaml; prints the UI address and login. State in .airflow/. SPARK=cluster adds a
# Spark standalone master + worker on 127.0.0.1 (spark_default points at it). Ctrl-C or `make airflow-stop`.
airflow: install spark-archive
	$(PY) -m lakejoin.airflow_local up $(if $(filter cluster,$(SPARK)),--spark-cluster)

airflow-stop:
	$(PY) -m lakejoin.airflow_local down

clean:
	rm -rf .lakejoin .pytest_cache
