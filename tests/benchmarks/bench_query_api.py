"""REST search latency per method, and searches under concurrency while a snapshot is published.

    .venv/bin/python tests/benchmarks/bench_query_api.py [--quick] [--root DIR]

1. Builds (or reuses, under ``--root``) the test lake of ``tests/test_query_lake.py`` and starts a
   real ``airflow api-server`` with the plugin (``tests/test_plugin.start_api_server``).
2. Warm latency: per method, the same query sent N times to ``POST /lakejoin/api/search``, against
   the baseline of calling ``QueryEngine.search`` in-process on the same query (what the CLI does
   once its snapshot is loaded): p50 / p95 of both and the REST/in-process ratio of the p50s.
3. Concurrency: 8 clients x 50 queries (methods mixed) while the main thread publishes new
   snapshots; reports errors (must be 0), throughput, and checks that every response names a
   snapshot that was published.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from report import run_with_docs

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from testkit.api_server import start_api_server  # noqa: E402
from testkit.query_lake import build_query_lake  # noqa: E402

from lakejoin.lake import snapshots  # noqa: E402
from lakejoin.query import QueryEngine  # noqa: E402

QUERIES = {
    "josie": ("bakeoff_challenges.csv", ["baker"], {}),
    "lshensemble": ("bakeoff_challenges.csv", ["baker"], {"threshold": 0.5}),
    "mate": ("bakeoff_challenges.csv", ["series", "episode"], {}),
    "pexeso": ("bakeoff_challenges.csv", ["baker"], {}),
    "auto": ("planes.csv", ["tailnum"], {}),
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def body(ids: dict[str, str], method: str) -> dict:
    title, columns, params = QUERIES[method]
    return {"method": method, "dataset_id": ids[title], "columns": columns, "k": 10, "params": params}


def latency(server, engine: QueryEngine, ids: dict[str, str], repeats: int) -> list[tuple]:
    rows = []
    for method in QUERIES:
        if method != "auto" and method not in engine.snapshot().families():
            continue
        request = body(ids, method)
        requests.post(
            f"{server.url}/lakejoin/api/search", json=request, headers=server.headers(), timeout=600
        ).raise_for_status()  # warm
        rest, local = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            requests.post(
                f"{server.url}/lakejoin/api/search", json=request, headers=server.headers(), timeout=600
            ).raise_for_status()
            rest.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.search(
                request["method"], request["columns"], dataset_id=request["dataset_id"], k=10, params=request["params"]
            )
            local.append(time.perf_counter() - started)
        rows.append(
            (method, percentile(rest, 0.5), percentile(rest, 0.95), percentile(local, 0.5), percentile(local, 0.95))
        )
    return rows


def concurrent(server, home: Path, ids: dict[str, str], clients: int, per_client: int, publishes: int) -> dict:
    from lakejoin.config import LakeConfig

    config = LakeConfig(home=home)
    methods = [m for m in QUERIES if m == "auto" or m in QueryEngine(config).snapshot().families()]
    seen: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        session = requests.Session()
        for i in range(per_client):
            method = methods[(number + i) % len(methods)]
            try:
                response = session.post(
                    f"{server.url}/lakejoin/api/search", json=body(ids, method), headers=server.headers(), timeout=600
                )
                with lock:
                    if response.status_code != 200:
                        errors.append(f"{method}: {response.status_code} {response.text[:200]}")
                    else:
                        seen.append(response.json()["snapshot_id"])
            except requests.RequestException as error:
                with lock:
                    errors.append(f"{method}: {error}")

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, n) for n in range(clients)]
        latest = snapshots.resolve(config)
        for _ in range(publishes):
            time.sleep(1.0)
            snapshots.publish(config, latest.table_versions, {"benchmark_republish": True})
        for future in futures:
            future.result()
    elapsed = time.perf_counter() - started
    published = {s.snapshot_id for s in snapshots.list_snapshots(config) if s.status == snapshots.PUBLISHED}
    return {
        "queries": clients * per_client,
        "errors": errors,
        "seconds": elapsed,
        "by_snapshot": {s: seen.count(s) for s in sorted(set(seen))},
        "unpublished": sorted(set(seen) - published),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 repeats per method, 4 clients x 10 queries")
    parser.add_argument(
        "--root", default="/tmp/lakejoin-bench-query", help="lake and Airflow home (the lake is reused when present)"
    )
    args = parser.parse_args(argv)
    repeats, clients, per_client = (10, 4, 10) if args.quick else (50, 8, 50)
    root = Path(args.root)
    started = time.perf_counter()
    lake = build_query_lake(root / "lake")
    print(f"lake ready in {time.perf_counter() - started:.0f} s at {lake.home}")
    started = time.perf_counter()
    server = start_api_server(root / "api-server", lake.home)
    print(f"api-server ready in {time.perf_counter() - started:.0f} s at {server.url}")
    try:
        engine = QueryEngine(lake)
        ids = {row["title"]: dataset_id for dataset_id, row in engine.snapshot().datasets.items()}
        print(f"\nwarm search latency, {repeats} queries per method (ms)")
        print(
            f"{'method':<12} {'REST p50':>9} {'REST p95':>9} {'engine p50':>11} {'engine p95':>11} "
            f"{'REST/engine p50':>16}"
        )
        for method, rest50, rest95, local50, local95 in latency(server, engine, ids, repeats):
            print(
                f"{method:<12} {rest50 * 1e3:9.1f} {rest95 * 1e3:9.1f} {local50 * 1e3:11.1f} {local95 * 1e3:11.1f} "
                f"{rest50 / local50:15.2f}x"
            )
        result = concurrent(server, lake.home, ids, clients, per_client, publishes=2)
        print(f"\n{clients} clients x {per_client} queries while 2 snapshots were published:")
        print(
            f"  {result['queries']} queries in {result['seconds']:.1f} s ({result['queries'] / result['seconds']:.1f} "
            "queries/s)"
        )
        print(f"  errors: {len(result['errors'])}  {result['errors'][:3]}")
        print(
            f"  responses per snapshot: {result['by_snapshot']}; naming an unpublished snapshot: "
            f"{result['unpublished'] or 'none'}"
        )
        return 1 if result["errors"] or result["unpublished"] else 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(run_with_docs(main))
