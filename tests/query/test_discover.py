"""Search beyond one machine (issue #17) on one small lake in four shards, built once per session:

- past the memory budget the engine answers shard by shard, equal to the whole index in memory,
  through the engine, the CLI and the REST API, while the families that fit keep serving whole;
- batch discovery on Spark (``lakejoin.spark.discover``) equals the in-memory engine for every
  family on ``local[2]``, including a task failed on purpose and retried (no duplicate rows),
  and on a standalone cluster (a master and two workers on 127.0.0.1);
- bad input (unknown method, empty query set, missing snapshot, a missing shard file) is named.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import threading
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from testkit.cli import run_cli, without_timing
from testkit.on_spark import in_process
from testkit.query_lake import write_sources

from lakejoin import cli
from lakejoin.config import LakeConfig
from lakejoin.lake import snapshots
from lakejoin.query import QueryEngine, read_table_file
from lakejoin.query import engine as engine_module
from lakejoin.query.memory import MEMORY_LIMIT_VARIABLE
from lakejoin.query.sharded import ShardedFamily
from lakejoin.testing import generate_lake

pytestmark = pytest.mark.spark

N_SHARDS = 4
_lock = threading.Lock()

# (method, query table, columns, params): one or two queries per family and mode
CASES = [
    ("josie", "bakeoff_challenges.csv", ["baker"], {}),
    ("josie", "weather.csv", ["origin"], {}),
    ("lshensemble", "bakeoff_challenges.csv", ["baker"], {"threshold": 0.4, "verify": True}),
    ("lshensemble", "planes.csv", ["manufacturer"], {"threshold": 0.2}),
    ("mate", "bakeoff_challenges.csv", ["series", "episode"], {}),
    ("pexeso", "bakeoff_challenges.csv", ["baker"], {"tau": 0.05}),
    ("pexeso", "bakeoff_challenges.csv", ["baker"], {"tau": 0.05, "mode": "topk"}),
]


def build_sharded_lake(root: Path) -> LakeConfig:
    """The query lake's real tables and a dozen ``generate_lake`` tables, every family in four
    shards (built on first call, in this process: the module tests search, not the build)."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import RunOptions, run

    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    with _lock:
        if not snapshots.list_snapshots(config):
            sources = write_sources(root / "sources")
            generate_lake(sources / "generated", n_tables=12, seed=3, max_rows=300)
            with in_process():
                run(config, RunOptions(sources=[f"folder:{sources}"], shards=N_SHARDS), Progress(quiet=True))
    return config


@pytest.fixture(scope="session")
def sharded_lake(tmp_path_factory: pytest.TempPathFactory, spark) -> LakeConfig:
    return build_sharded_lake(tmp_path_factory.getbasetemp() / "sharded-lake")


@pytest.fixture(scope="module")
def in_memory(sharded_lake: LakeConfig) -> dict:
    """The whole-index answer of every case, and the lake's dataset ids by title."""
    engine = QueryEngine(sharded_lake)
    ids = {row["title"]: dataset_id for dataset_id, row in engine.snapshot().datasets.items()}
    answers = [
        engine.search(method, columns, dataset_id=ids[title], k=5, params=params)
        for method, title, columns, params in CASES
    ]
    return {"ids": ids, "answers": answers, "engine": engine}


def shard_budgets(config: LakeConfig) -> dict[str, int]:
    """For each method of ``CASES``, a budget under which MATE and PEXESO are served shard by
    shard (it holds the family's largest shard, not its whole index) while JOSIE and LSH
    Ensemble fit whole (under MATE's: the tests check each family is served as that says). One
    budget cannot do both: this lake's whole PEXESO index is smaller than MATE's largest shard."""
    loaded = QueryEngine(config).snapshot()
    largest = {family: max(ShardedFamily(loaded, family).load_bytes.values()) + 1 for family in ("mate", "pexeso")}
    return {method: largest.get(method, largest["mate"]) for method, *_ in CASES}


def test_past_the_budget_the_engine_answers_shard_by_shard_as_in_memory(
    sharded_lake: LakeConfig, in_memory: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    budgets = shard_budgets(sharded_lake)
    engine = QueryEngine(sharded_lake)
    for (method, title, columns, params), whole in zip(CASES, in_memory["answers"]):
        monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(budgets[method]))
        sharded = engine.search(method, columns, dataset_id=in_memory["ids"][title], k=5, params=params)
        assert sharded["results"] == whole["results"], (method, title, params)
        assert whole["results"] or method == "lshensemble", f"{method} found nothing for {title}"
        if method in ("mate", "pexeso"):
            assert sharded["shards"]["searched"] == N_SHARDS and sharded["shards"]["read"] >= 1
        else:
            assert "shards" not in sharded  # fits: served whole, as before
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(budgets["mate"]))
    mate_query = {"dataset_id": in_memory["ids"]["bakeoff_challenges.csv"], "k": 5}
    first = engine.search("mate", ["series", "episode"], **mate_query)
    again = engine.search("mate", ["series", "episode"], **mate_query)
    assert again["results"] == first["results"]
    assert (
        1 <= first["shards"]["cached"] < N_SHARDS and again["shards"]["read"] == N_SHARDS - first["shards"]["cached"]
    )  # cached shards are not read again
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "1K")  # below any shard: refused, named
    with pytest.raises(LookupError, match="needs about"):
        QueryEngine(sharded_lake).search("mate", ["series", "episode"], **mate_query)


@pytest.mark.airflow
def test_past_the_budget_cli_and_rest_answer_as_in_memory(
    sharded_lake: LakeConfig, in_memory: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    budgets = shard_budgets(sharded_lake)
    for budget in sorted(set(budgets.values())):  # an API server per budget: it reads the budget at start
        monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(budget))
        monkeypatch.setattr(engine_module, "_engines", {})  # the CLI's in-process engine starts afresh
        cases = [(case, whole) for case, whole in zip(CASES, in_memory["answers"]) if budgets[case[0]] == budget]
        _cli_and_rest_answer_as_in_memory(sharded_lake, in_memory["ids"], cases, tmp_path / f"api-{budget}")


def _cli_and_rest_answer_as_in_memory(sharded_lake: LakeConfig, ids: dict, cases: list, api_root: Path) -> None:
    from testkit.api_server import start_api_server

    server = start_api_server(api_root, sharded_lake.home)
    try:
        for (method, title, columns, params), whole in cases:
            if method == "pexeso" and params.get("mode") == "topk":
                continue  # one PEXESO query is enough here (each embeds the query again)
            dataset_id = ids[title]
            column_flags = ["--column", columns[0]] if len(columns) == 1 else ["--columns", ",".join(columns)]
            flags = [
                f
                for key, value in params.items()
                for f in ([f"--{key}"] if value is True else [f"--{key}", str(value)])
            ]
            answered = run_cli(
                "search",
                method,
                "--home",
                str(sharded_lake.home),
                "--dataset",
                dataset_id,
                *column_flags,
                "-k",
                "5",
                *flags,
                "--json",
            )
            response = server.post(
                "/lakejoin/api/search",
                json={"method": method, "dataset_id": dataset_id, "columns": columns, "k": 5, "params": params},
            )
            assert response.status_code == 200, response.text
            assert answered["results"] == whole["results"] == response.json()["results"], (method, title)
            assert without_timing(answered) == without_timing(response.json())
            assert ("shards" in answered) == (method in ("mate", "pexeso"))
    finally:
        server.stop()


# --- batch discovery on Spark -------------------------------------------------------------------

# family -> (query set as the dataset titles it names, or "all"; columns; params)
BATCHES = {
    "josie": ("all", None, {}),
    "lshensemble": (
        ["bakeoff_challenges.csv", "planes.csv", "airports.csv", "weather.csv"],
        None,
        {"threshold": 0.4, "verify": True},
    ),
    "mate": (["bakeoff_challenges.csv", "bakeoff_ratings.csv", "bakeoff_episodes.csv"], ["series", "episode"], {}),
    "pexeso": (["bakeoff_challenges.csv"], ["baker"], {"tau": 0.05}),
}
K = 5


def batch_spec(family: str, ids: dict[str, str]) -> tuple[str, list[str] | None, dict]:
    titles, columns, params = BATCHES[family]
    return (titles if titles == "all" else ",".join(ids[t] for t in titles)), columns, params


def assert_same_ranking(got: list[dict], whole: list[dict], k: int) -> None:
    """Equal answers, except that a tie at the k-th score may keep other candidates (both exact)."""
    if got == whole:
        return
    score = {"overlap", "containment", "joinability", "matched"}
    key = lambda r: tuple(r.get(f) for f in sorted(score))  # noqa: E731
    assert len(got) == len(whole) == k, (got, whole)
    assert [key(r) for r in got] == [key(r) for r in whole]
    assert [r for r in got if key(r) != key(whole[-1])] == [r for r in whole if key(r) != key(whole[-1])]


def assert_batch_equals_engine(out: Path, engine: QueryEngine, family: str, described: list[dict], params: dict) -> int:
    """Every query's rows in ``out`` equal the engine's answer; returns how many rows it holds."""
    from lakejoin.spark.discover import read_answers

    rows = read_answers(out)
    assert len({(r["query_id"], r["rank"]) for r in rows}) == len(rows)  # each (query, rank) once
    by_query: dict[int, list[dict]] = {}
    for row in rows:
        by_query.setdefault(row["query_id"], []).append(row)
    for query in described:
        got = by_query.get(query["query_id"], [])
        try:
            whole = engine.search(family, query["columns"], dataset_id=query["dataset_id"], k=K, params=params)[
                "results"
            ]
        except ValueError as error:
            assert [r["error"] for r in got] == [str(error)]  # noqa: PT017 (the engine's own error is the expected value)
            continue
        assert [r["rank"] for r in got] == list(range(1, len(got) + 1))
        assert_same_ranking([json.loads(r["result"]) for r in got], whole, K)
        assert all(r["method"] == family and r["parameters"] == json.dumps({"k": K, **params}) for r in got)
    return len(rows)


def test_batch_discovery_equals_the_engine_for_every_family_on_local(
    sharded_lake: LakeConfig, in_memory: dict, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakejoin.spark import discover as discover_module
    from lakejoin.spark.discover import discover, resolve_queries

    monkeypatch.setattr(
        discover_module, "query_slices", lambda shards, queries, cores: 3
    )  # each shard's queries in 3 tasks (the cluster test runs one task per shard)
    engine = in_memory["engine"]
    loaded = engine.snapshot()
    found = {}
    for family in BATCHES:
        spec, columns, params = batch_spec(family, in_memory["ids"])
        summary = discover(spark, sharded_lake, family, spec, tmp_path / family, k=K, params=params, columns=columns)
        assert summary["shards"] == N_SHARDS and summary["snapshot_id"] == loaded.snapshot_id
        found[family] = assert_batch_equals_engine(
            tmp_path / family, engine, family, resolve_queries(loaded, family, spec, columns), params
        )
    assert all(found.values()), found  # every family found something
    # a table file as the query set: the same answer as `lakejoin search --table`; a file with the
    # bytes of a lake table is that table, in both (not its own result)
    from lakejoin.spark.discover import read_answers

    airlines = loaded.staged_table(in_memory["ids"]["airlines.csv"]).to_pandas()
    mine, itself = tmp_path / "mine.csv", tmp_path / "airlines.csv"
    airlines[["carrier"]].to_csv(mine, index=False)
    airlines.to_csv(itself, index=False)
    for table, folder in ((mine, tmp_path / "file"), (itself, tmp_path / "itself")):
        discover(spark, sharded_lake, "josie", str(table), folder, k=K, columns=["carrier"])
        answers = [json.loads(r["result"]) for r in read_answers(folder)]
        assert answers == engine.search("josie", ["carrier"], table=read_table_file(table), k=K)["results"]
        in_lake = table == itself
        assert any(a["dataset_id"] == in_memory["ids"]["airlines.csv"] for a in answers) != in_lake


def test_search_with_spark_equals_the_engine(sharded_lake: LakeConfig, in_memory: dict, spark) -> None:
    dataset_id = in_memory["ids"]["bakeoff_challenges.csv"]
    answered = run_cli(
        "search",
        "lshensemble",
        "--home",
        str(sharded_lake.home),
        "--dataset",
        dataset_id,
        "--column",
        "baker",
        "-k",
        str(K),
        "--threshold",
        "0.4",
        "--spark",
        "--spark-master",
        "local[2]",
        "--json",
    )
    whole = in_memory["engine"].search("lshensemble", ["baker"], dataset_id=dataset_id, k=K, params={"threshold": 0.4})
    assert answered["spark"]["shards"] == N_SHARDS
    assert {k: v for k, v in answered.items() if k not in ("seconds", "spark")} == without_timing(whole)


def test_bad_input_is_named(sharded_lake: LakeConfig, in_memory: dict, spark, tmp_path: Path) -> None:
    from lakejoin.spark.discover import discover

    for method, spec, snapshot_id, message in [
        ("nope", "all", None, "unknown method 'nope'"),
        ("josie", str(tmp_path), None, "is empty"),
        ("josie", "all", 99, "snapshot 99 is not published"),
    ]:
        with pytest.raises((ValueError, LookupError), match=message):
            discover(spark, sharded_lake, method, spec, tmp_path / "out", snapshot_id=snapshot_id)
    broken = LakeConfig(home=tmp_path / "broken", spark_master="local[2]")
    shutil.copytree(sharded_lake.home, broken.home)
    victim = next((broken.home / "index" / "josie" / "postings").glob("shard=1/*.parquet"))
    victim.unlink()
    with pytest.raises(FileNotFoundError, match=r"shard 1 of index/josie/postings .* is missing on disk"):
        discover(spark, broken, "josie", "all", tmp_path / "out")
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            cli.main(
                [
                    "discover",
                    "josie",
                    "--home",
                    str(broken.home),
                    "--queries",
                    "all",
                    "--out",
                    str(tmp_path / "out"),
                    "--spark-master",
                    "local[2]",
                    "--json",
                ]
            )
            == 2
        )
    assert "is missing on disk" in json.loads(out.getvalue())["error"]
    assert not (tmp_path / "out").exists()  # nothing written


# --- on a standalone cluster: a master and two workers on 127.0.0.1 ------------------------------

_ON_CLUSTER = """
import json, sys
from pathlib import Path
from lakejoin.config import LakeConfig
from lakejoin.spark.discover import discover
from lakejoin.spark.session import get_spark
home, url, out, batches = sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
spark = get_spark(url)
for family, (spec, columns, params) in batches.items():
    config = LakeConfig(home=Path(home))
    result = discover(spark, config, family, spec, out / family, k=int(sys.argv[5]), params=params, columns=columns)
    print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory):
    from testkit.spark_cluster import standalone_cluster

    logs = tmp_path_factory.mktemp("discover-cluster")
    with standalone_cluster(logs, workers=2, cores=1, memory="1g") as url:
        yield url, logs


@pytest.mark.slow
def test_batch_discovery_on_a_standalone_cluster_equals_the_engine_and_survives_a_failed_task(
    sharded_lake: LakeConfig, in_memory: dict, two_workers, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from lakejoin.spark.discover import FAIL_FIRST_ATTEMPT_VARIABLE, resolve_queries

    url, logs = two_workers
    batches = {family: batch_spec(family, in_memory["ids"]) for family in BATCHES}
    batches["josie"] = (
        in_memory["ids"]["bakeoff_challenges.csv"] + "," + in_memory["ids"]["planes.csv"],
        None,
        {},
    )  # `all` ran on local[2]
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        FAIL_FIRST_ATTEMPT_VARIABLE: "2",
    }
    completed = subprocess.run(
        [sys.executable, "-c", _ON_CLUSTER, str(sharded_lake.home), url, str(tmp_path), json.dumps(batches), str(K)],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    executor_logs = "".join(path.read_text(errors="replace") for path in logs.rglob("stderr"))
    assert (
        "failing this task's first attempt on purpose" in executor_logs
    )  # shard 2's task failed once, and Spark retried it
    assert [json.loads(line)["shards"] for line in completed.stdout.splitlines()] == [N_SHARDS] * len(BATCHES)
    loaded = in_memory["engine"].snapshot()
    for family, (spec, columns, params) in batches.items():
        assert assert_batch_equals_engine(
            tmp_path / family, in_memory["engine"], family, resolve_queries(loaded, family, spec, columns), params
        )
    master_log = (logs / "master.log").read_text()
    # it ran on the cluster's two workers (a worker that registers before the master is elected
    # leader registers again a few seconds later: count workers, not registrations)
    assert (
        len(set(re.findall(r"Registering worker (\S+)", master_log))) == 2 and "Registering app lakejoin" in master_log
    )


@pytest.mark.slow
@pytest.mark.airflow
def test_the_discover_dag_submits_the_job_to_spark_default(
    sharded_lake: LakeConfig, in_memory: dict, two_workers, tmp_path: Path
) -> None:
    import sys

    from airflow_harness import prepare_airflow, run_dag_test

    from lakejoin.spark.discover import resolve_queries

    url, _ = two_workers
    host, port = url.rsplit(":", 1)
    env = prepare_airflow(tmp_path / "airflow")
    env.update(
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps(
            {
                "conn_type": "spark",
                "host": host,
                "port": int(port),
                "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
            }
        ),
        PATH=f"{Path(sys.executable).parent}:{env['PATH']}",  # spark-submit from the pyspark installation
        SPARK_LOCAL_IP="127.0.0.1",
    )
    spec, columns, params = batch_spec("mate", in_memory["ids"])
    out = tmp_path / "answers"
    conf = {
        "method": "mate",
        "queries": spec,
        "columns": columns,
        "k": K,
        "method_params": params,
        "out": str(out),
        "home": str(sharded_lake.home),
    }
    result = run_dag_test(env, "lakejoin_discover.py", "lakejoin_discover", conf)
    assert result["state"] == "success", result
    returned = result["returned"]["discover"]
    assert returned["out"] == str(out) and returned["rows"] > 0
    rows = assert_batch_equals_engine(
        out, in_memory["engine"], "mate", resolve_queries(in_memory["engine"].snapshot(), "mate", spec, columns), params
    )
    assert rows == returned["rows"]
