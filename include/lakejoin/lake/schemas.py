"""Arrow schemas of the lake's core Delta tables (DESIGN "The lake on disk").

Every index family builds from ``lake/cells`` joined with ``catalog/columns``; these
schemas are the contract between ingestion, the index builds and the query side.
"""

from __future__ import annotations

import pyarrow as pa

from lakejoin.lake.delta import FileLayout

CELLS = "lake/cells"
DATASETS = "catalog/datasets"
COLUMNS = "catalog/columns"
KEYS = "catalog/keys"  # composite key candidates per dataset (lakejoin.profile.composite)
GRAPH_TABLES = ("graph/edges", "graph/tables", "graph/meta")  # the join graph (lakejoin.graph.store)
SNAPSHOTS = "catalog/snapshots"
VALIDATIONS = "quality/validations"
EMBEDDINGS = "embed/values"

# The long form every index is built from: one row per non-null cell.
# ``value`` is lakejoin.normalize.normalize_value(raw); ``raw`` is kept only where it differs.
CELLS_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("column_id", pa.int64()),
        ("row_id", pa.int64()),
        ("value", pa.string()),
        ("raw", pa.string()),
    ]
)

DATASETS_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("source", pa.string()),
        ("url", pa.string()),
        ("title", pa.string()),
        ("publisher", pa.string()),
        ("license", pa.string()),
        ("format", pa.string()),
        ("fetched_at", pa.timestamp("us", tz="UTC")),
        ("etag", pa.string()),
        ("last_modified", pa.string()),  # HTTP Last-Modified of the last fetch
        ("metadata_modified", pa.string()),  # the portal's change token (CKAN metadata_modified, Socrata updatedAt)
        ("content_sha256", pa.string()),
        ("version", pa.int64()),
        ("status", pa.string()),  # active | removed | quarantined
        ("reason", pa.string()),
        ("rows", pa.int64()),
        ("columns", pa.int64()),
        ("staged_path", pa.string()),  # raw/<sha256>.parquet, all columns as strings
    ]
)

# Where a column's name came from (``catalog/columns.name_source``; ``lakejoin.sources.headers``).
GIVEN, GENERATED, DEDUPLICATED, ROW_NAMES, NO_HEADER = "header", "generated", "deduplicated", "row_names", "no_header"
NAME_SOURCES = (GIVEN, GENERATED, DEDUPLICATED, ROW_NAMES, NO_HEADER)

COLUMNS_SCHEMA = pa.schema(
    [
        ("column_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("ordinal", pa.int32()),
        ("name", pa.string()),
        ("header", pa.string()),  # the header cell as written (None: no header row; lakes before it)
        ("name_source", pa.string()),  # header, generated, deduplicated, row_names, no_header (sources.headers)
        ("type", pa.string()),
        ("count", pa.int64()),  # non-null cells
        ("distinct", pa.int64()),  # distinct normalized values
        ("nulls", pa.int64()),
        ("null_fraction", pa.float64()),
        ("uniqueness", pa.float64()),  # distinct / count
        ("key_candidate", pa.bool_()),
        ("semantic_type", pa.string()),
        ("indexed_by", pa.list_(pa.string())),
    ]
)

SNAPSHOTS_SCHEMA = pa.schema(
    [
        ("snapshot_id", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("status", pa.string()),  # published | expired
        ("table_versions", pa.string()),  # JSON {table name: delta version}
        ("stats", pa.string()),  # JSON build statistics
    ]
)

# (model, value hash) -> vector: each distinct value is embedded once per model.
EMBEDDINGS_SCHEMA = pa.schema([("model", pa.string()), ("value_hash", pa.string()), ("vector", pa.list_(pa.float32()))])
# An incremental build looks a few hundred value hashes up in embed/values (543k vectors, 680 MB
# at the whole bundled lake): each file sorted by value_hash in 64-row groups (~100 KB) lets the
# lookup read only the groups whose statistics can hold a wanted hash (lakejoin.lake.delta.read_matching).
EMBEDDINGS_LAYOUT = FileLayout(sort_by="value_hash", row_group_rows=64)
