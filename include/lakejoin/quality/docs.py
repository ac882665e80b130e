"""Great Expectations Data Docs of every dataset's latest validation (GE 1.x's own site builder).

``build_docs`` takes the latest ``quality/validations`` row of each dataset in a published
snapshot and hands its GE results to a file-backed GE project (``<home>/quality/gx``: the
validation results and expectation suites stores), whose ``SiteBuilder`` renders the site into
``<home>/quality/docs``: ``index.html``, one page per GE result and one per expectation suite.
A row holds one GE result (a drift validation) or, for a rejected file, the gate's two (``table``
and ``structure``); a file that did not parse at all has none, so no page.

Rebuilds are incremental: ``pages.json`` beside the site records which row each dataset's pages
show; only datasets whose latest row changed are rendered again (GE's ``resource_identifiers``),
their superseded results leave the store, and GE's index builder drops the pages they had.

GE's index lists results in a table its CDN-loaded scripts draw (jQuery, bootstrap-table): with
no internet (air-gapped lakes, the tests) the index would be empty. ``StaticIndexPageView`` also
renders the rows as plain HTML, shown when those scripts did not load.

GE's index builder reads back and parses every stored result to list it (its success and batch),
so a rebuild after a two-dataset change cost time in proportion to the lake (12 s for 2,298
results). ``pages.json`` records what the index shows of each result when the result is stored,
and ``LakeSiteIndexBuilder`` (GE's builder otherwise) takes it from there, reading only results
it has no record of.

One index page of every result still cost time in proportion to the lake (10 MB of HTML and
2 s at 2,298 datasets), so the index is paged (``SiteIndex``): ``index.html`` lists the newest
validations, and ``index-NNN.html`` the datasets that a stable hash of their id puts on page
NNN (about :data:`DATASETS_PER_PAGE` each, the page count chosen when the site is first built and
re-cut when pages average twice that). A change renders the front page and the pages of the
datasets it touched. Neither builder walks GE's stores: pages.json names every stored result
and page (``LakeSiteSectionBuilder`` renders the identifiers it is given).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from lakejoin.config import LakeConfig
from lakejoin.index.shards import shard_of
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import DATASETS, VALIDATIONS

SITE_NAME = "lakejoin"
SITE_DIR = "quality/docs"
GX_PROJECT_DIR = "quality"  # GE puts its project in <this>/gx
PAGES_FILE = "pages.json"
DATASETS_PER_PAGE = 100  # datasets listed on one index page, about
FRONT_PAGE_RESULTS = 100  # the newest results on index.html
# A first build renders its pages in several processes, each with at least this many (starting
# one and importing GE costs about as much as rendering 200 pages), on at most this many.
PAGES_PER_PROCESS = 300
MAX_PROCESSES = 8
# The index pages to render, for LakeSiteIndexBuilder: GE builds it from the site config, so the
# writer hands them over here.
_INDEX: ContextVar[IndexBuild] = ContextVar("lakejoin_docs_index")
DRIFT_RESULT = "drift"  # the name of a drift row's single GE result (gate rows: table, structure)

# The rows as plain HTML before GE's own table; a script removes whichever is not needed.
_STATIC_TABLE = """
<div class="lakejoin-static-table">
<table class="table table-sm">
<thead><tr>{% for column in content_block["table_columns"] %}<th>{{ column["title"] }}</th>{% endfor %}</tr></thead>
<tbody>
{% for row in content_block["table_data"] | render_bootstrap_table_data %}
<tr class="lakejoin-row" data-href="{{ row["_table_row_link_path"] }}">
{% for column in content_block["table_columns"] %}
<td>{% if loop.first and row["_table_row_link_path"] %}<a href="{{ row["_table_row_link_path"] }}">{{ row[column["field"]] | safe }} {{ row["_validation_success_text"] }}</a>{% else %}{{ row[column["field"]] | safe }}{% endif %}</td>
{% endfor %}
</tr>
{% endfor %}
</tbody>
</table>
</div>
{% include "gx/bootstrap_table.j2" %}
<script>
  (function () {
    var scripted = window.jQuery && window.jQuery.fn && window.jQuery.fn.bootstrapTable;
    var own = document.currentScript.previousElementSibling;
    while (own && !own.classList.contains("lakejoin-static-table")) own = own.previousElementSibling;
    if (scripted && own) own.remove();
    if (!scripted) {
      document.getElementById("{{ content_block_id ~ '-body-table' }}").hidden = true;
      document.getElementById("{{ content_block_id ~ '-body-table-toolbar' }}").hidden = true;
    }
  })();
</script>
"""  # noqa: E501 (an HTML template: a line break would change the rendered page)


# The index pages' sidebar: GE's logo and, in place of the table of contents other pages have,
# links to the index pages.
_INDEX_SIDEBAR = """
<div class="col-lg-2 col-md-2 col-sm-12 d-sm-block px-0">
  {% include 'ge_info.j2' %}
  {% if lakejoin_pages %}
  <nav class="lakejoin-pages card mt-3">
    <div class="card-body">
      <a href="index.html" class="d-block mb-2{% if lakejoin_pages.current == 'index.html' %} font-weight-bold{% endif %}">Newest validations</a>
      <div>Datasets by page:</div>
      {% for page in lakejoin_pages.pages %}
      <a href="{{ page }}" class="d-inline-block mr-2{% if page == lakejoin_pages.current %} font-weight-bold{% endif %}">{{ loop.index }}</a>
      {% endfor %}
    </div>
  </nav>
  {% endif %}
</div>
"""  # noqa: E501 (an HTML template: a line break would change the rendered page)


@dataclass
class DocsBuild:
    """What ``build_docs`` did: the site's index, each dataset's pages (relative to the site)."""

    index: Path | None
    pages: dict[str, list[str]] = field(default_factory=dict)
    rendered: int = 0  # GE results rendered by this build
    seconds: float = 0.0
    snapshot_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The build's summary as a JSON-ready dict (the datasets counted, not listed)."""
        return {
            "index": str(self.index) if self.index else None,
            "datasets": len(self.pages),
            "rendered": self.rendered,
            "seconds": round(self.seconds, 2),
            "snapshot_id": self.snapshot_id,
        }


def site_dir(config: LakeConfig) -> Path:
    """Where the lake's Data Docs site is written."""
    return config.home / SITE_DIR


def ge_results(result_json: str | None) -> dict[str, dict[str, Any]]:
    """The GE ``ExpectationSuiteValidationResult`` dicts of a ``quality/validations`` row, by name:
    ``{"drift": ...}``, the gate's ``{"table": ..., "structure": ...}``, or ``{}`` (unparsed file)."""
    if not result_json:
        return {}
    document = json.loads(result_json)
    if "results" in document:
        return {DRIFT_RESULT: document}
    return dict(document.get("validations") or {})


def result_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """A GE result in brief: suite, success, statistics and the expectations that failed."""
    failed = [
        {"expectation": r["expectation_config"]["type"], "column": r["expectation_config"]["kwargs"].get("column")}
        for r in result.get("results", [])
        if not r.get("success")
    ]
    return {
        "suite": result.get("suite_name"),
        "success": result.get("success"),
        "statistics": result.get("statistics", {}),
        "failed": failed,
    }


def latest_validations(
    config: LakeConfig, version: int, dataset_ids: set[str] | None = None, columns: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The latest ``quality/validations`` row (highest version, then newest) of every dataset, or
    of ``dataset_ids``, in the table's ``version`` (only ``columns`` when given)."""
    wanted = None if dataset_ids is None else pc.field("dataset_id").isin(sorted(dataset_ids))
    latest: dict[str, dict[str, Any]] = {}
    for row in delta.read_arrow(config.table_path(VALIDATIONS), version, columns=columns, filter=wanted).to_pylist():
        current = latest.get(row["dataset_id"])
        if current is None or (row["version"], row["validated_at"]) > (current["version"], current["validated_at"]):
            latest[row["dataset_id"]] = row
    return latest


def _mark(row: Mapping[str, Any]) -> list[Any]:
    """Which validation row a dataset's pages show, as ``pages.json`` records it."""
    return [row["version"], row["validated_at"].isoformat()]


def read_pages(config: LakeConfig) -> dict[str, dict[str, Any]]:
    """``pages.json``: per dataset, the row its pages show (version, validated_at) and the pages."""
    return _read_site(config)["datasets"]


def _read_site(config: LakeConfig) -> dict[str, Any]:
    path = site_dir(config) / PAGES_FILE
    return json.loads(path.read_text()) if path.exists() else {"datasets": {}}


@dataclass
class SiteIndex:
    """The site's index pages: ``index.html`` lists the :data:`FRONT_PAGE_RESULTS` newest results;
    page ``p`` (``index-NNN.html``) every dataset ``shard_of(dataset_id, n_pages)`` puts there.
    A stable hash keeps a dataset on its page as others come and go, so a change re-renders the
    pages it touched and no other."""

    datasets: dict[str, dict[str, Any]]  # pages.json entries
    n_pages: int

    @classmethod
    def cut(cls, datasets: dict[str, dict[str, Any]], n_pages: int | None) -> SiteIndex:
        """Keep ``n_pages`` while the pages average at most twice :data:`DATASETS_PER_PAGE`
        datasets; otherwise (or on a new site) cut again to about that many."""
        if n_pages and len(datasets) <= 2 * DATASETS_PER_PAGE * n_pages:
            return cls(datasets, n_pages)
        return cls(datasets, max(1, -(-len(datasets) // DATASETS_PER_PAGE)))

    def page_name(self, page: int) -> str:
        """The file name of index page ``page`` (0-based; the names count from 1: ``index-001.html``)."""
        return f"index-{page + 1:03d}.html"

    def page_of(self, dataset_id: str) -> str:
        """The file name of the index page that lists ``dataset_id``."""
        return self.page_name(shard_of(dataset_id, self.n_pages))

    def names(self) -> list[str]:
        """The file names of every numbered index page, in order."""
        return [self.page_name(p) for p in range(self.n_pages)]

    def listings(self, names: set[str]) -> dict[str, list[dict[str, Any]]]:
        """The entries each page of ``names`` lists (``index.html``: the newest results')."""
        pages: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for dataset_id, entry in self.datasets.items():
            if (name := self.page_of(dataset_id)) in pages:
                pages[name].append(entry)
        if "index.html" in names:
            listed, newest_first = 0, sorted(self.datasets.values(), key=lambda e: e["row"][1], reverse=True)
            for entry in newest_first:
                if listed >= FRONT_PAGE_RESULTS:
                    break
                pages["index.html"].append(entry)
                listed += len(entry["keys"])
        return pages


@dataclass
class IndexBuild:
    """What the index builder renders: ``pages`` of ``site``, into ``directory``."""

    site: SiteIndex
    pages: set[str]
    directory: Path


def build_docs(config: LakeConfig, snapshot_id: int | None = None) -> DocsBuild:
    """Render the latest validation of every dataset of the snapshot (default: the latest
    published) into ``<home>/quality/docs``; only rows not rendered before are rendered."""
    started = time.perf_counter()
    snapshot = snapshots.resolve(config, snapshot_id)
    version = snapshot.version_of(VALIDATIONS)
    if version is None:
        return DocsBuild(None, snapshot_id=snapshot.snapshot_id)
    site = site_dir(config)
    recorded = _read_site(config) if (site / "index.html").exists() else {"datasets": {}}
    newest = latest_validations(config, version, columns=["dataset_id", "version", "validated_at"])
    changed = {d for d, row in newest.items() if (recorded["datasets"].get(d) or {}).get("row") != _mark(row)}
    dropped = set(recorded["datasets"]) - set(newest)
    pages = {d: entry for d, entry in recorded["datasets"].items() if d in newest}
    rendered = 0
    if changed or dropped:
        rows = latest_validations(config, version, changed)
        writer = _SiteWriter(config)
        for dataset_id in sorted(changed | dropped):
            writer.forget(recorded["datasets"].get(dataset_id, {}))
        for dataset_id in sorted(changed):
            pages[dataset_id] = writer.add(rows[dataset_id])
        index = SiteIndex.cut(pages, recorded.get("index_pages"))
        same_pages = recorded.get("index_pages") == index.n_pages
        touched = {"index.html"} | ({index.page_of(d) for d in changed | dropped} if same_pages else set(index.names()))
        rendered = writer.build(IndexBuild(index, touched, site))
        _write_pages(site, snapshot.snapshot_id, index)
    return DocsBuild(
        site / "index.html",
        {d: e["pages"] for d, e in pages.items()},
        rendered,
        time.perf_counter() - started,
        snapshot.snapshot_id,
    )


def _write_pages(site: Path, snapshot_id: int, index: SiteIndex) -> None:
    _write_whole(
        site / PAGES_FILE,
        json.dumps(
            {"snapshot_id": snapshot_id, "index_pages": index.n_pages, "datasets": index.datasets}, sort_keys=True
        ),
    )


class _SiteWriter:
    """The GE project of the lake: stores results and suites, then builds the site from them."""

    def __init__(self, config: LakeConfig) -> None:
        import great_expectations as gx

        self.context = gx.get_context(mode="file", project_root_dir=str(config.home / GX_PROJECT_DIR))
        sites = self.context.variables.data_docs_sites or {}
        for name in [n for n in sites if n != SITE_NAME]:  # the project template's local_site
            self.context.delete_data_docs_site(name)
        configure = self.context.update_data_docs_site if SITE_NAME in sites else self.context.add_data_docs_site
        configure(SITE_NAME, _site_config(site_dir(config)))  # type: ignore[arg-type]  # GE's DataDocsSiteConfigTypedDict lists only some of a site config's keys
        self.config = config
        self.new_keys: list[Any] = []
        self.results = 0

    def forget(self, entry: Mapping[str, Any]) -> None:
        """Drop a dataset's superseded results (its ``pages.json`` entry) and their pages."""
        from great_expectations.data_context.types.resource_identifiers import ValidationResultIdentifier

        store = self.context.validation_results_store
        for key in (ValidationResultIdentifier.from_tuple(tuple(k)) for k in entry.get("keys", [])):
            if store.has_key(key):
                store.remove_key(key)
        for page in entry.get("pages", []):
            (site_dir(self.config) / page).unlink(missing_ok=True)

    def add(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Store the row's GE results and their suites; its ``pages.json`` entry.

        The stores get the JSON as GE wrote it (the lake keeps ``to_json_dict()`` output), which
        their schemas read back when rendering: serializing it again through GE's objects cost
        more than rendering the pages."""
        from great_expectations.core.run_identifier import RunIdentifier
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        dataset_id, validated_at = row["dataset_id"], row["validated_at"]
        run_id = RunIdentifier(run_name=f"{dataset_id}-v{row['version']}", run_time=validated_at)
        keys, pages, listed = [], [], {}
        for name, result in ge_results(row["result_json"]).items():
            suite_name = result["suite_name"]
            meta = result.get("meta") or {}
            # the page names the dataset version and run (the lake's row keeps GE's own meta)
            meta = {
                **meta,
                "run_id": run_id.to_json_dict(),
                "batch_spec": {**meta.get("batch_spec", {}), "data_asset_name": dataset_id},
            }
            key = ValidationResultIdentifier(ExpectationSuiteIdentifier(suite_name), run_id, name)
            document = {**result, "meta": meta, "results": [_renderable(r) for r in result["results"]]}
            self.context.validation_results_store.store_backend.set(key.to_tuple(), json.dumps(document))
            suite = {
                "name": suite_name,
                "expectations": [r["expectation_config"] for r in result["results"]],
                "meta": {"great_expectations_version": meta.get("great_expectations_version")},
            }
            self.context.expectations_store.store_backend.set(
                ExpectationSuiteIdentifier(suite_name).to_tuple(), json.dumps(suite)
            )
            self.new_keys += [key, ExpectationSuiteIdentifier(suite_name)]
            self.results += 1
            keys.append(list(key.to_tuple()))
            pages.append("/".join(["validations", *suite_name.split("."), *run_id.to_tuple(), name]) + ".html")
            listed[_key_text(key.to_tuple())] = {
                "success": result.get("success"),
                "batch_kwargs": meta.get("batch_kwargs", {}),
                "batch_spec": meta["batch_spec"],
                "asset_name": dataset_id,
            }
        return {"row": _mark(row), "success": row["success"], "keys": keys, "pages": pages, "listed": listed}

    def build(self, index: IndexBuild | None = None) -> int:
        """Render the results and suites added, then the index pages (default: every page of the
        site ``pages.json`` records); how many results were rendered."""
        if index is None:
            site = _read_site(self.config)
            cut = SiteIndex.cut(site["datasets"], site.get("index_pages"))
            index = IndexBuild(cut, {"index.html", *cut.names()}, site_dir(self.config))
        keys = self.new_keys
        if (
            len(keys) >= 2 * PAGES_PER_PROCESS
            and (processes := min(MAX_PROCESSES, os.cpu_count() or 1, len(keys) // PAGES_PER_PROCESS)) > 1
        ):
            _render_in_processes(self.config, keys, processes)
            keys = []  # their pages are written: the index alone is left
        reset = _INDEX.set(index)
        try:
            # GE reads no identifiers as "render everything": when only unparsed files changed (no
            # result to add), one that matches no key leaves GE rebuilding the index alone
            self.context.build_data_docs(site_names=[SITE_NAME], resource_identifiers=keys or [_NoResource()])
        finally:
            _INDEX.reset(reset)
        return self.results


def _render_in_processes(config: LakeConfig, keys: list[Any], processes: int) -> None:
    """Render the pages of ``keys`` (stored results and suites) in ``processes`` processes: GE
    renders in Python, ~15 ms a page, so a first build of a lake's site holds one core for
    minutes. Spawned, not forked: the caller may hold a JVM and threads."""
    chunks = [[(type(key).__name__, key.to_tuple()) for key in keys[i::processes]] for i in range(processes)]
    with ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_render_pages, [config] * processes, chunks))  # raises a process's error here


def _render_pages(config: LakeConfig, keys: list[tuple[str, tuple[str, ...]]]) -> int:
    """One process's share of :func:`_render_in_processes`: GE's section builders over ``keys``
    (the site's config was written by the parent), no index."""
    import great_expectations as gx
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    kinds: dict[str, Any] = {
        "ValidationResultIdentifier": ValidationResultIdentifier,
        "ExpectationSuiteIdentifier": ExpectationSuiteIdentifier,
    }
    context = gx.get_context(mode="file", project_root_dir=str(config.home / GX_PROJECT_DIR))
    context.build_data_docs(
        site_names=[SITE_NAME],
        resource_identifiers=[kinds[kind].from_tuple(key) for kind, key in keys],
        build_index=False,
    )
    return len(keys)


def _renderable(outcome: dict[str, Any]) -> dict[str, Any]:
    """An expectation's result as GE's renderer can show it: its page fails on an exception whose
    traceback was not recorded (None), e.g. a drift check of a column the new version lacks."""
    info = outcome.get("exception_info")
    if not info:
        return outcome
    if "raised_exception" in info:
        return {**outcome, "exception_info": _with_traceback(info)}
    return {**outcome, "exception_info": {metric: _with_traceback(e) for metric, e in info.items()}}  # one per metric


def _with_traceback(info: Any) -> Any:
    return {**info, "exception_traceback": info.get("exception_traceback") or ""} if isinstance(info, dict) else info


class _NoResource:
    """A resource identifier matching no stored key: the section builders render nothing."""


def _key_text(key: tuple[str, ...] | list[str]) -> str:
    return "/".join(key)


def _site_config(base_directory: Path) -> dict[str, Any]:
    view = {"module_name": __name__, "class_name": "StaticIndexPageView"}
    section = {"module_name": __name__, "class_name": "LakeSiteSectionBuilder"}
    # GE's default validations filter hides run names containing "profiling"; a dataset may be so named
    every_run = {"matches_regex": "."}
    return {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(base_directory)},
        "site_index_builder": {"module_name": __name__, "class_name": "LakeSiteIndexBuilder", "view": view},
        "site_section_builders": {
            "expectations": {"source_store_name": "expectations_store", **section},
            "validations": {"source_store_name": "validation_results_store", "run_name_filter": every_run, **section},
            "profiling": "None",
        },
    }


@cache
def _static_index_view() -> type:
    from great_expectations.render.view import DefaultJinjaIndexPageView
    from jinja2 import ChoiceLoader, DictLoader, PackageLoader, PrefixLoader

    class StaticIndexPageView(DefaultJinjaIndexPageView):
        """GE's index page, its result tables also rendered server-side (see the module doc)."""

        def __init__(
            self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
        ) -> None:
            super().__init__(custom_styles_directory, custom_views_directory)
            original = PrefixLoader({"gx": PackageLoader("great_expectations", "render/view/templates")})
            assert self.env.loader is not None  # GE's page view always sets its template loader
            self.env.loader = ChoiceLoader(
                [
                    DictLoader({"bootstrap_table.j2": _STATIC_TABLE, "sidebar.j2": _INDEX_SIDEBAR}),
                    original,
                    self.env.loader,
                ]
            )

    return StaticIndexPageView


@cache
def _lake_site_index_builder() -> type:
    from great_expectations.data_context.types.resource_identifiers import ValidationResultIdentifier
    from great_expectations.render.renderer.site_builder import (
        DefaultSiteIndexBuilder,
        resource_key_passes_run_name_filter,
    )

    class LakeSiteIndexBuilder(DefaultSiteIndexBuilder):
        """GE's index builder, rendering the pages of an ``IndexBuild`` (see the module doc) with
        GE's renderer and view. Each page lists its entries' results and suites from
        ``pages.json`` instead of walking GE's stores and reading every result back; a result
        with no listing recorded (a site built before pages.json recorded it) is read as GE does."""

        def build(self, skip_and_clean_missing: bool = True, build_index: bool = True) -> tuple[Any, Any]:
            index = _INDEX.get(None)
            if index is None or not build_index:  # not a lakejoin build: GE's own
                return super().build(skip_and_clean_missing, build_index)
            names = index.site.names()
            for name, entries in index.site.listings(index.pages).items():
                content = self.renderer_class.render(self._links(entries))
                html = self.view_class.render(
                    content,
                    data_context_id=self.data_context_id,
                    show_how_to_buttons=self.show_how_to_buttons,
                    lakejoin_pages={"current": name, "pages": names},
                )
                _write_whole(index.directory / name, html)
            return str(index.directory / "index.html"), None

        def _links(self, entries: list[dict[str, Any]]) -> OrderedDict[str, Any]:
            links: OrderedDict[str, Any] = OrderedDict(site_name=SITE_NAME)
            keys = [ValidationResultIdentifier.from_tuple(tuple(key)) for entry in entries for key in entry["keys"]]
            for suite in sorted({key.expectation_suite_identifier.name for key in keys}):
                self.add_resource_info_to_index_links_dict(
                    index_links_dict=links, expectation_suite_name=suite, section_name="expectations"
                )
            listed = {text: info for entry in entries for text, info in (entry.get("listed") or {}).items()}
            run_filter = self.site_section_builders_config["validations"]["run_name_filter"]
            shown = [k for k in keys if resource_key_passes_run_name_filter(k, run_filter)]
            for key in sorted(shown, key=lambda k: k.run_id.run_time, reverse=True):
                info = listed.get(_key_text(key.to_tuple()))
                if info is None:
                    super()._add_validations_to_index_links(links, [key])
                    continue
                self.add_resource_info_to_index_links_dict(
                    index_links_dict=links,
                    expectation_suite_name=key.expectation_suite_identifier.name,
                    section_name="validations",
                    batch_identifier=key.batch_identifier,
                    run_id=key.run_id,
                    validation_success=info["success"],
                    run_time=key.run_id.run_time,
                    run_name=key.run_id.run_name,
                    asset_name=info["asset_name"],
                    batch_kwargs=info["batch_kwargs"],
                    batch_spec=info["batch_spec"],
                )
            return links

    return LakeSiteIndexBuilder


@cache
def _lake_site_section_builder() -> type:
    from great_expectations.render.renderer.site_builder import DefaultSiteSectionBuilder

    class LakeSiteSectionBuilder(DefaultSiteSectionBuilder):
        """GE's section builder, rendering the identifiers it is given without first listing its
        whole source store to pick them out (a walk of every stored result or suite)."""

        def build(self, resource_identifiers: list[Any] | None = None) -> None:
            if not resource_identifiers:
                return super().build(resource_identifiers)
            store = self.source_store
            given = [key for key in resource_identifiers if isinstance(key, store.key_class) and store.has_key(key)]
            self.source_store = _StoreListing(store, given)
            try:
                return super().build(resource_identifiers)
            finally:
                self.source_store = store

    return LakeSiteSectionBuilder


class _StoreListing:
    """A GE store whose ``list_keys`` answers ``keys``; everything else is the store's."""

    def __init__(self, store: Any, keys: list[Any]) -> None:
        self._store, self._keys = store, keys

    def list_keys(self) -> list[Any]:
        return self._keys

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _write_whole(path: Path, text: str) -> None:
    """Write a file whole: a reader sees the old file or the new one."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def __getattr__(name: str) -> type:
    # GE instantiates the view and the index builder from the site config by module and class
    # name; defined lazily because importing GE takes seconds and most users of this module only
    # read pages.json
    if name == "StaticIndexPageView":
        return _static_index_view()
    if name == "LakeSiteIndexBuilder":
        return _lake_site_index_builder()
    if name == "LakeSiteSectionBuilder":
        return _lake_site_section_builder()
    raise AttributeError(name)


def dataset_quality(config: LakeConfig, dataset_id: str, snapshot_id: int | None = None) -> dict[str, Any]:
    """A dataset's latest validation in a snapshot (default: the latest published), with the GE
    results in brief and its Data Docs pages (relative to the site; empty when not built)."""
    snapshot = snapshots.resolve(config, snapshot_id)
    datasets_version = snapshot.version_of(DATASETS)
    catalog = (
        delta.read_arrow(
            config.table_path(DATASETS), datasets_version, filter=pc.field("dataset_id") == dataset_id
        ).to_pylist()
        if datasets_version is not None
        else []
    )
    if not catalog:
        raise LookupError(f"dataset {dataset_id!r} is not in snapshot {snapshot.snapshot_id}")
    version = snapshot.version_of(VALIDATIONS)
    row = latest_validations(config, version, {dataset_id}).get(dataset_id) if version is not None else None
    dataset = {
        "dataset_id": dataset_id,
        "title": catalog[0].get("title"),
        "status": catalog[0].get("status"),
        "reason": catalog[0].get("reason"),
    }
    if row is None:
        return {"snapshot_id": snapshot.snapshot_id, **dataset, "validation": None, "pages": []}
    entry = read_pages(config).get(dataset_id) or {}
    current = entry.get("row") == _mark(row)
    document = json.loads(row["result_json"]) if row["result_json"] else {}
    validation = {
        "version": row["version"],
        "success": row["success"],
        "drift": row["drift"],
        "validated_at": row["validated_at"].isoformat(),
        "results": {name: result_summary(result) for name, result in ge_results(row["result_json"]).items()},
        **({"reason": document["reason"]} if "reason" in document else {}),
    }
    return {
        "snapshot_id": snapshot.snapshot_id,
        **dataset,
        "validation": validation,
        "pages": entry.get("pages", []) if current else [],
    }
