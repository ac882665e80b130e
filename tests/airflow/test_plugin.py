"""The Airflow plugin against a real ``airflow api-server`` on 127.0.0.1 with the test lake:
REST answers equal the CLI's, Airflow's authentication is enforced, bounds answer 4xx."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
import requests
from testkit.api_server import MAX_UPLOAD_BYTES, ApiServer
from testkit.cli import run_cli, without_timing

from lakejoin.query import QueryEngine
from lakejoin.query.join import provenance_of

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CASES = [
    ("josie", "bakeoff_challenges.csv", ["baker"], {}),
    ("lshensemble", "bakeoff_challenges.csv", ["baker"], {"threshold": 0.4, "verify": True}),
    ("mate", "bakeoff_challenges.csv", ["series", "episode"], {}),
    ("pexeso", "bakeoff_challenges.csv", ["baker"], {"tau": 0.05}),
    ("pexeso", "bakeoff_challenges.csv", ["baker"], {"tau": 0.05, "lower_bound": True}),
    ("auto", "weather.csv", ["origin"], {}),
]


def cli_flags(params: dict) -> list[str]:
    flags = []
    for key, value in params.items():
        flag = {"T": "--T", "initial_column": "--initial-column", "lower_bound": "--lower-bound"}.get(key, f"--{key}")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


@pytest.mark.parametrize(("method", "title", "columns", "params"), CASES, ids=[c[0] for c in CASES])
def test_rest_search_equals_the_cli(
    api_server: ApiServer, engine: QueryEngine, ids: dict, method: str, title: str, columns: list[str], params: dict
) -> None:
    if method in ("josie", "lshensemble", "mate", "pexeso") and method not in engine.snapshot().families():
        pytest.skip(f"{method} is not built in this lake")
    body = {"method": method, "dataset_id": ids[title], "columns": columns, "k": 5, "params": params}
    response = api_server.post("/lakejoin/api/search", json=body)
    assert response.status_code == 200, response.text
    rest = response.json()
    column_flag = ["--column", columns[0]] if len(columns) == 1 else ["--columns", ",".join(columns)]
    cli = run_cli(
        "search",
        method,
        "--home",
        str(engine.config.home),
        "--dataset",
        ids[title],
        *column_flag,
        "-k",
        "5",
        *cli_flags(params),
        "--json",
    )
    assert without_timing(rest) == without_timing(cli)
    assert rest["results"], f"{method} found nothing for {title}.{columns}"


def test_multipart_upload_equals_the_dataset_search(api_server: ApiServer, engine: QueryEngine, ids: dict) -> None:
    staged = engine.snapshot().staged_table(ids["bakeoff_challenges.csv"]).to_pandas()
    upload = staged.to_csv(index=False).encode()
    response = api_server.post(
        "/lakejoin/api/search",
        files={"file": ("my_challenges.csv", upload, "text/csv")},
        data={"method": "mate", "columns": "series,episode", "k": "6", "params": "{}"},
    )
    assert response.status_code == 200, response.text
    uploaded = response.json()
    by_dataset = api_server.post(
        "/lakejoin/api/search",
        json={"method": "mate", "dataset_id": ids["bakeoff_challenges.csv"], "columns": ["series", "episode"], "k": 5},
    ).json()
    own = ids["bakeoff_challenges.csv"]
    assert uploaded["query"]["file"] == "my_challenges.csv"
    strip = lambda rs: [{k: v for k, v in r.items() if k != "rank"} for r in rs if r["dataset_id"] != own]  # noqa: E731
    assert strip(uploaded["results"])[: len(by_dataset["results"])] == strip(by_dataset["results"])


def test_join_downloads_and_previews(api_server: ApiServer, ids: dict) -> None:
    body = {
        "method": "mate",
        "dataset_id": ids["bakeoff_challenges.csv"],
        "columns": ["series", "episode"],
        "policy": "first",
    }
    preview = api_server.post("/lakejoin/api/join", json={**body, "format": "json", "preview_rows": 3})
    assert preview.status_code == 200, preview.text
    assert len(preview.json()["preview"]) == 3 and preview.json()["rows"] == 1136
    download = api_server.post("/lakejoin/api/join", json={**body, "format": "parquet"})
    assert download.status_code == 200, download.text
    table = pq.read_table(io.BytesIO(download.content))
    assert provenance_of(table)["dataset_id"] == preview.json()["result"]["dataset_id"]
    assert json.loads(download.headers["X-Lakejoin-Provenance"])["snapshot_id"] == preview.json()["snapshot_id"]
    csv = api_server.post("/lakejoin/api/join", json={**body, "format": "csv"})
    assert csv.headers["content-type"].startswith("text/csv")
    assert pd.read_csv(io.StringIO(csv.text), dtype=str).shape == (1136, table.num_columns)


def test_catalog_routes(api_server: ApiServer, engine: QueryEngine) -> None:
    datasets = api_server.get("/lakejoin/api/datasets").json()
    assert datasets["snapshot_id"] == engine.snapshot().snapshot_id
    assert {d["title"] for d in datasets["datasets"]} >= {"weather.csv", "bakeoff_ratings.csv"}
    snapshots = api_server.get("/lakejoin/api/snapshots").json()
    assert snapshots[-1]["snapshot_id"] == datasets["snapshot_id"] and snapshots[-1]["status"] == "published"


@pytest.mark.parametrize(
    "path", ["/lakejoin/api/datasets", "/lakejoin/api/snapshots", "/lakejoin/search", "/lakejoin/static/search.js"]
)
def test_requests_without_a_valid_token_get_401(api_server: ApiServer, path: str) -> None:
    assert requests.get(f"{api_server.url}{path}", timeout=30).status_code == 401
    forged = {"Authorization": "Bearer " + api_server.token[:-4] + "AAAA"}
    assert requests.get(f"{api_server.url}{path}", headers=forged, timeout=30).status_code == 401
    assert requests.get(f"{api_server.url}{path}", headers=api_server.headers(), timeout=30).status_code == 200
    search = requests.post(
        f"{api_server.url}/lakejoin/api/search", json={"method": "josie", "columns": ["x"]}, timeout=30
    )
    assert search.status_code == 401


def test_the_ui_cookie_authenticates_too(api_server: ApiServer) -> None:
    response = requests.get(
        f"{api_server.url}/lakejoin/api/snapshots", cookies={"_token": api_server.token}, timeout=30
    )
    assert response.status_code == 200


def test_bounds_answer_4xx(api_server: ApiServer, ids: dict) -> None:
    oversized = b"name\n" + b"x" * (MAX_UPLOAD_BYTES + 1)
    too_big = api_server.post(
        "/lakejoin/api/search",
        files={"file": ("big.csv", oversized, "text/csv")},
        data={"method": "josie", "columns": "name"},
    )
    assert too_big.status_code == 413 and "limit" in too_big.json()["detail"]
    base = {"method": "josie", "dataset_id": ids["bakeoff_challenges.csv"], "columns": ["baker"]}
    assert api_server.post("/lakejoin/api/search", json={**base, "k": 1000}).status_code == 422
    assert api_server.post("/lakejoin/api/search", json={**base, "bogus": 1}).status_code == 422
    unknown_param = api_server.post("/lakejoin/api/search", json={**base, "params": {"tau": 0.1}})
    assert unknown_param.status_code == 400 and "unknown parameter" in unknown_param.json()["detail"]
    unknown_column = api_server.post("/lakejoin/api/search", json={**base, "columns": ["nope"]})
    assert unknown_column.status_code == 400 and "nope" in unknown_column.json()["detail"]
    missing = api_server.post("/lakejoin/api/search", json={**base, "dataset_id": "no-such"})
    assert missing.status_code == 404
    not_json = api_server.post(
        "/lakejoin/api/search", data="method=josie", headers={**api_server.headers(), "Content-Type": "text/plain"}
    )
    assert not_json.status_code == 415


def test_openapi_and_the_ui_registration(api_server: ApiServer) -> None:
    spec = requests.get(f"{api_server.url}/lakejoin/openapi.json", timeout=30).json()
    assert {"/api/search", "/api/join", "/api/datasets", "/api/snapshots"} <= set(spec["paths"])
    assert "multipart/form-data" in spec["paths"]["/api/search"]["post"]["requestBody"]["content"]
    assert requests.get(f"{api_server.url}/lakejoin/docs", timeout=30).status_code == 200
    plugins = api_server.get("/api/v2/plugins").json()["plugins"]
    lakejoin = next(p for p in plugins if p["name"] == "lakejoin")
    assert lakejoin["fastapi_apps"][0]["url_prefix"] == "/lakejoin"
    assert lakejoin["external_views"][0]["href"] == "/lakejoin/search"
    assert api_server.get("/lakejoin/search").headers["content-type"].startswith("text/html")
