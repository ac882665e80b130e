"""The Lakejoin REST API and search page, a FastAPI app the Airflow 3 API server mounts at
``/lakejoin`` (``plugins/lakejoin_plugin.py``).

Routes (all answer in the CLI's JSON shapes, see ``lakejoin.query.engine``):

- ``POST /lakejoin/api/search``: JSON ``{"method", "dataset_id", "columns", "k", "params",
  "snapshot_id"}``, or ``multipart/form-data`` with a table ``file`` and the same fields
  (``columns`` and ``params`` as JSON text, or ``columns`` comma-separated);
- ``POST /lakejoin/api/join``: the search fields plus ``rank, how, policy, transform, prefix``
  and ``format``: ``json`` (a preview of ``preview_rows`` rows), ``parquet`` or ``csv`` (a
  download; the provenance is in Parquet's metadata and in the ``X-Lakejoin-Provenance`` header);
- ``POST /lakejoin/api/columns``: the columns of an uploaded table, profiled as the lake profiles
  its own (for the search page);
- ``GET /lakejoin/api/catalog?q=&offset=&limit=``: tables found by title, publisher, source or
  column name, paged (``lakejoin.query.catalog``); ``GET /lakejoin/api/datasets/{id}/columns``: a
  table's columns with their profile (type, distinct, nulls, key candidate);
- ``GET /lakejoin/api/methods``: every method's parameters (type, default, bounds, help) and the
  join's options (``lakejoin.query.params``), from which the search page builds its forms;
- ``GET /lakejoin/api/status``: the background load of the latest snapshot (started with the API
  server, so the first search does not pay it) and the upload limit;
- ``GET /lakejoin/api/datasets``, ``GET /lakejoin/api/snapshots``;
- ``GET /lakejoin/api/datasets/{dataset_id}/related``: the tables that join with it, from the
  snapshot's join graph (``lakejoin related``'s JSON, ``lakejoin.graph.store.related``);
- ``GET /lakejoin/dataset?id=...``: the dataset page (profile, related tables grouped by joining
  columns, the neighbourhood as SVG, a join preview);
- ``GET /lakejoin/api/datasets/{dataset_id}/quality``: the dataset's latest Great Expectations
  validation (version, success, drift, the GE results in brief) and links to its Data Docs pages;
- ``GET /lakejoin/quality-docs/...``: the Data Docs site (``<home>/quality/docs``), and
  ``GET /lakejoin/quality/{dataset_id}``: a redirect to the dataset's latest validation page;
- ``GET /lakejoin/search``: the search page (plain HTML + JS, calls the routes above).

Authentication is Airflow's own: every route depends on :func:`authenticated_user`, which
resolves the caller with ``airflow.api_fastapi.core_api.security.get_user`` (a JWT in
``Authorization: Bearer``, or the Airflow UI's ``_token`` cookie, validated by the configured
auth manager) and asks the auth manager whether the user may use the custom view ``Lakejoin``.
No credential, a bad signature or an expired token all answer 401; a valid user without the
permission gets 403. OpenAPI docs are at ``/lakejoin/docs``.

Bounds: uploads above ``LAKEJOIN_MAX_UPLOAD_BYTES`` (default 16 MiB) get 413 before they are
parsed; query tables above the engine's row limits get 413; ``k``, ``rank``, the column count
and unknown or mistyped parameters get 400/422 with a message naming the problem.
"""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import pyarrow.parquet as pq
from airflow.api_fastapi.core_api.security import bearer_scheme
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from lakejoin import graph as join_graph
from lakejoin.config import MAX_UPLOAD_BYTES
from lakejoin.quality import docs as quality_docs
from lakejoin.query import METHODS, QueryEngine, QueryTable, read_table_file
from lakejoin.query import catalog as lake_catalog
from lakejoin.query import params as method_params
from lakejoin.query.engine import QueryTooLarge
from lakejoin.query.join import HOWS, POLICIES, provenance_of
from lakejoin.query.memory import IndexTooLarge
from lakejoin.query.warmup import READY, Warmup

STATIC = Path(__file__).parent / "static"
DEFAULT_MAX_UPLOAD_BYTES = MAX_UPLOAD_BYTES.default
RESOURCE_NAME = "Lakejoin"


def max_upload_bytes() -> int:
    """The largest upload the API accepts, in bytes (``LAKEJOIN_MAX_UPLOAD_BYTES``)."""
    return MAX_UPLOAD_BYTES.read()


# --- authentication ------------------------------------------------------------------------


async def authenticated_user(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)
) -> Any:
    """The Airflow user of the request, or 401 (no/invalid/expired token) / 403 (not permitted)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user

    try:
        user = await get_user(request, None, credentials)
    except HTTPException as error:
        # Airflow answers a malformed token with 403; for this API any unusable credential is 401.
        detail = error.detail if error.status_code == 401 else f"Not authenticated: {error.detail}"
        raise HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"}) from None
    if not get_auth_manager().is_authorized_custom_view(method="GET", resource_name=RESOURCE_NAME, user=user):
        raise HTTPException(403, f"user {user.get_name()!r} may not use {RESOURCE_NAME}")
    return user


# --- request bodies ------------------------------------------------------------------------


class SearchBody(BaseModel):
    """A search: the query table is the lake dataset ``dataset_id`` (JSON) or the uploaded ``file``."""

    model_config = ConfigDict(extra="forbid")
    method: Literal[METHODS] = "auto"  # type: ignore[valid-type]
    dataset_id: str | None = None
    columns: list[str] = Field(min_length=1, max_length=8)
    k: int = Field(10, ge=1, le=100)
    params: dict[str, Any] = Field(default_factory=dict, description=method_params.params_doc())
    snapshot_id: int | None = None


class JoinBody(SearchBody):
    """A search request plus the join's rank, kind, policy, transformation, prefix and output format."""

    rank: int = Field(1, ge=1, le=100)
    how: Literal[HOWS] = "left"  # type: ignore[valid-type]
    policy: Literal[POLICIES] = "first"  # type: ignore[valid-type]
    transform: str | None = None
    prefix: str | None = None
    format: Literal["json", "parquet", "csv"] = "json"
    preview_rows: int = Field(20, ge=0, le=1000)


def _request_body_doc(model: type[BaseModel]) -> dict[str, Any]:
    form = model.model_json_schema()
    form["properties"] = {
        **{k: v for k, v in form["properties"].items() if k != "dataset_id"},
        "file": {"type": "string", "format": "binary", "description": "query table (CSV, TSV, JSON lines, Parquet)"},
        "columns": {
            "type": "string",
            "description": 'JSON list or comma-separated, e.g. ["series","episode"] or series,episode',
        },
        "params": {"type": "string", "description": "JSON object of method parameters. " + method_params.params_doc()},
    }
    form.pop("additionalProperties", None)
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": model.model_json_schema()},
                "multipart/form-data": {"schema": form},
            },
        }
    }


# --- app -----------------------------------------------------------------------------------


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Airflow's API server runs its mounted apps' lifespans: load the lake while it starts."""
    warmup.start()
    yield


app = FastAPI(
    title="Lakejoin",
    description=(
        "Joinable-table search over the Lakejoin lake, on the latest published snapshot. Authenticate like Airflow's "
        "API: `POST /auth/token`, then `Authorization: Bearer <token>`."
    ),
    version="1",
    dependencies=[Depends(authenticated_user)],
    lifespan=_lifespan,
)

_engine: QueryEngine | None = None


def engine() -> QueryEngine:
    """The process's engine for the lake named by the Variable ``lakejoin_home`` or ``$LAKEJOIN_HOME``."""
    global _engine
    if _engine is None:
        from airflow.models.variable import Variable

        from lakejoin_airflow.hooks import HOME_VARIABLE, lake_engine

        _engine = lake_engine(None, Variable.get(HOME_VARIABLE, default_var=""))
    return _engine


warmup = Warmup(engine)


@app.exception_handler(QueryTooLarge)
async def _too_large(request: Request, error: QueryTooLarge) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=413)


@app.exception_handler(IndexTooLarge)
async def _index_too_large(request: Request, error: IndexTooLarge) -> JSONResponse:
    # the server is healthy and other methods still answer; this one needs a bigger machine
    return JSONResponse({"detail": str(error)}, status_code=503)


@app.exception_handler(ValueError)
async def _bad_request(request: Request, error: ValueError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=400)


@app.exception_handler(LookupError)
async def _not_found(request: Request, error: LookupError) -> JSONResponse:
    return JSONResponse({"detail": str(error.args[0]) if error.args else str(error)}, status_code=404)


@app.post("/api/search", summary="Search the lake for joinable tables", openapi_extra=_request_body_doc(SearchBody))
async def search(request: Request) -> dict[str, Any]:
    """A JSON body or a multipart form with the query table; the answer is ``lakejoin search --json``'s."""
    body, table = await _read_request(request, SearchBody)
    return await run_in_threadpool(engine().search, **_search_arguments(body, table))


@app.post("/api/join", summary="Join a search result onto the query table", openapi_extra=_request_body_doc(JoinBody))
async def join(request: Request) -> Response:
    """The joined table as JSON (``preview_rows`` rows), Parquet or CSV (provenance in ``X-Lakejoin-Provenance``)."""
    body, table = await _read_request(request, JoinBody)
    joined, summary = await run_in_threadpool(
        engine().join,
        **_search_arguments(body, table),
        rank=body.rank,
        how=body.how,
        policy=body.policy,
        transform=body.transform,
        prefix=body.prefix,
    )
    if body.format == "json":
        return JSONResponse({**summary, "preview": joined.slice(0, body.preview_rows).to_pylist()})
    buffer = io.BytesIO()
    if body.format == "parquet":
        pq.write_table(joined, buffer)
        media = "application/vnd.apache.parquet"
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(joined.replace_schema_metadata(None), buffer)
        media = "text/csv"
    name = f"{summary['result']['dataset_id']}-joined.{body.format}"
    headers = {
        "Content-Disposition": f'attachment; filename="{name}"',
        "X-Lakejoin-Provenance": json.dumps(provenance_of(joined), default=str),
    }
    return Response(buffer.getvalue(), media_type=media, headers=headers)


@app.post("/api/columns", summary="The columns of an uploaded table with their profile")
async def columns(request: Request) -> dict[str, Any]:
    """The uploaded table is profiled, not stored."""
    _form, table = await _read_form(request)
    if table is None:
        raise HTTPException(400, "upload a table as the multipart field 'file'")
    return {"table": table.name, "columns": lake_catalog.uploaded_profile(table.table), "rows": table.table.num_rows}


@app.get("/api/status", summary="The background load of the latest snapshot, and the upload limit")
async def status() -> dict[str, Any]:
    """Reads what the warm-up recorded; loads nothing itself (the snapshot's families and table
    count are added once the warm-up is ready). A warm-up that failed (no snapshot yet, most often) is
    begun again (at most every ``RETRY_SECONDS``), so the first snapshot published after the server started
    is reported."""
    warmup.start()
    answer: dict[str, Any] = {"warmup": warmup.status(), "max_upload_bytes": max_upload_bytes()}
    if answer["warmup"]["state"] == READY:
        loaded = await run_in_threadpool(engine().snapshot)
        answer |= {
            "snapshot_id": loaded.snapshot_id,
            "families": loaded.families(),
            "loaded_families": loaded.loaded_families(),
            "tables": sum(r["status"] == "active" for r in loaded.datasets.values()),
        }
    return answer


@app.get("/api/catalog", summary="Find tables by title, publisher, source or column name (paged)")
async def find_tables(q: str = "", offset: int = 0, limit: int = 20, snapshot_id: int | None = None) -> dict[str, Any]:
    """Every word of ``q`` must occur (case-insensitive); ``offset`` and ``limit`` page through the matches."""
    loaded = await run_in_threadpool(engine().snapshot, snapshot_id)
    return lake_catalog.find_tables(loaded, q, offset, limit)


@app.get("/api/methods", summary="Each method's parameters (type, default, bounds, help) and the join's options")
async def methods() -> dict[str, Any]:
    """The search page builds its forms from this answer."""
    pexeso_loaded = "pexeso" in warmup.status()["loaded"]
    model = (await run_in_threadpool(engine().snapshot)).searcher("pexeso")[0].model if pexeso_loaded else None
    return method_params.forms(model)


@app.get("/api/datasets", summary="Datasets and columns of a snapshot")
async def datasets(snapshot_id: int | None = None) -> dict[str, Any]:
    """The active datasets of the snapshot (default: the latest published) with their columns."""
    return await run_in_threadpool(engine().datasets, snapshot_id)


@app.get("/api/snapshots", summary="Every snapshot with its status and table versions")
async def snapshots() -> list[dict[str, Any]]:
    """``lakejoin snapshots --json``."""
    return await run_in_threadpool(engine().snapshots)


@app.get(
    "/api/datasets/{dataset_id:path}/columns", summary="A table's catalog entry and its columns with their profile"
)
async def dataset_columns(dataset_id: str, snapshot_id: int | None = None) -> dict[str, Any]:
    """Ids may hold slashes: the path converter takes everything up to ``/columns``."""
    loaded = await run_in_threadpool(engine().snapshot, snapshot_id)
    return lake_catalog.table_profile(loaded, dataset_id)


@app.get(
    "/api/datasets/{dataset_id:path}/quality",
    summary="A dataset's latest Great Expectations validation and its Data Docs pages",
)
async def dataset_quality(request: Request, dataset_id: str, snapshot_id: int | None = None) -> dict[str, Any]:
    """Ids may hold slashes: the path converter takes everything up to ``/quality``."""
    answer = await run_in_threadpool(quality_docs.dataset_quality, engine().config, dataset_id, snapshot_id)
    pages = [_docs_url(request, page) for page in answer.pop("pages")]
    return {**answer, "docs": {"index": _docs_url(request, "index.html"), "pages": pages}}


@app.get(
    "/api/datasets/{dataset_id:path}/related",
    summary="The tables that join with a dataset, from the snapshot's join graph",
)
async def dataset_related(dataset_id: str, snapshot_id: int | None = None, rank: str = "quality") -> dict[str, Any]:
    """``lakejoin related --dataset ID [--rank quality|overlap] --json``: each neighbour table once,
    best join first (``rank=overlap``: every edge by raw overlap); ``graph.current`` false: the
    graph is an earlier snapshot's."""
    loaded = await run_in_threadpool(engine().snapshot, snapshot_id)
    return await run_in_threadpool(join_graph.related, loaded, dataset_id, rank)


@app.get("/quality/{dataset_id:path}", include_in_schema=False)
async def quality_page(request: Request, dataset_id: str) -> RedirectResponse:
    """The dataset's latest validation for people: its first Data Docs page, else the JSON."""
    answer = await run_in_threadpool(quality_docs.dataset_quality, engine().config, dataset_id)
    pages = answer["pages"]
    root = request.scope.get("root_path", "")
    return RedirectResponse(
        _docs_url(request, pages[0]) if pages else f"{root}/api/datasets/{quote(dataset_id)}/quality", status_code=307
    )


@app.get("/quality-docs/{path:path}", include_in_schema=False)
async def quality_docs_file(path: str) -> FileResponse:
    """The Data Docs site; its pages link each other relatively, so they work from here."""
    root = quality_docs.site_dir(engine().config).resolve()
    target = (root / (path or "index.html")).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, f"no Data Docs page {path!r}: the site is built after each run's publish")
    return FileResponse(target)


def _docs_url(request: Request, page: str) -> str:
    return f"{request.scope.get('root_path', '')}/quality-docs/{quote(page)}"


@app.get("/search", response_class=HTMLResponse, summary="The search page", include_in_schema=False)
async def search_page() -> FileResponse:
    """The search page (static HTML; it calls the API)."""
    return FileResponse(STATIC / "search.html", media_type="text/html")


@app.get(
    "/dataset",
    response_class=HTMLResponse,
    summary="A dataset's page: profile, related tables, neighbourhood",
    include_in_schema=False,
)
async def dataset_page() -> FileResponse:
    """The dataset page (static HTML; it calls the API)."""
    return FileResponse(STATIC / "dataset.html", media_type="text/html")


@app.get("/static/{name}", include_in_schema=False)
async def static(name: str) -> FileResponse:
    """A static asset of the pages; 404 outside the static folder."""
    path = STATIC / name
    if path.parent != STATIC or not path.is_file():
        raise HTTPException(404, f"no asset {name!r}")
    return FileResponse(path)


# --- request parsing -----------------------------------------------------------------------


def _search_arguments(body: SearchBody, table: QueryTable | None) -> dict[str, Any]:
    if table is not None and body.dataset_id is not None:
        raise HTTPException(400, "give either an uploaded file or a dataset_id, not both")
    return {
        "method": body.method,
        "columns": body.columns,
        "table": table,
        "dataset_id": body.dataset_id,
        "k": body.k,
        "params": body.params,
        "snapshot_id": body.snapshot_id,
    }


_Body = TypeVar("_Body", bound=SearchBody)


async def _read_request(request: Request, model: type[_Body]) -> tuple[_Body, QueryTable | None]:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        fields, table = await _read_form(request)
        data: dict[str, Any] = dict(fields)
        for name in ("columns", "params"):
            if name in data:
                data[name] = _json_or_list(name, data[name])
    elif content_type.startswith("application/json"):
        try:
            data = json.loads(await _bounded_body(request))
        except json.JSONDecodeError as error:
            raise HTTPException(400, f"the body is not valid JSON: {error}") from None
        table = None
    else:
        raise HTTPException(415, "send application/json or multipart/form-data")
    try:
        return model.model_validate(data), table
    except ValidationError as error:
        raise HTTPException(422, json.loads(error.json(include_url=False, include_context=False))) from None


async def _bounded_body(request: Request) -> bytes:
    """The body, refused with 413 as soon as it passes the upload limit (declared or streamed)."""
    limit = max_upload_bytes()
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"request body of {int(declared)} bytes exceeds the limit of {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"request body exceeds the limit of {limit} bytes")
    return bytes(body)


async def _read_form(request: Request) -> tuple[dict[str, str], QueryTable | None]:
    body = await _bounded_body(request)

    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form(max_files=1, max_fields=32)
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        return fields, None
    name = Path(upload.filename or "upload.csv").name
    with tempfile.TemporaryDirectory(prefix="lakejoin-upload-") as folder:
        path = Path(folder) / name
        path.write_bytes(await upload.read())
        table = await run_in_threadpool(read_table_file, path, max_upload_bytes(), name)
    return fields, table


def _json_or_list(name: str, text: str) -> Any:
    text = text.strip()
    if text.startswith(("[", "{")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise HTTPException(400, f"field {name!r} is not valid JSON: {error}") from None
    if name == "params":
        raise HTTPException(400, "field 'params' must be a JSON object")
    return [part.strip() for part in text.split(",") if part.strip()]
