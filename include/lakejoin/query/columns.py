"""A snapshot's column catalog, kept as the Arrow table it was read as.

A lake of 100,000 tables has a million columns: as ``ColumnInfo`` objects they took about 10 s
to build (``to_pylist`` alone 6 s) in every process that loaded the snapshot — the API server,
the batch discovery driver and each of its executors — although a query looks up a handful
of them. Here a column's ``ColumnInfo`` is built when it is asked for: by id (binary search
over the sorted ids) or by dataset (``of_dataset``: positions grouped by dataset on first use).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.lake.schemas import COLUMNS_SCHEMA
from lakejoin.profile.join_quality import row_numbers


@dataclass
class ColumnInfo:
    """A column of the snapshot: its dataset, position, name, profile and the families indexing it."""

    column_id: int
    dataset_id: str
    ordinal: int
    name: str
    type: str | None
    distinct: int | None
    indexed_by: list[str]
    # the profile shown beside a column (search page, dataset pages); None in lakes without it
    nulls: int | None = None
    null_fraction: float | None = None
    key_candidate: bool | None = None
    semantic_type: str | None = None
    count: int | None = None  # non-null cells
    numeric_min: float | None = None  # numeric columns' range (join quality: row numberings)
    numeric_max: float | None = None

    @property
    def row_numbers(self) -> bool:
        """Its values are exactly its table's row numbers 1..n (or 0..n-1)."""
        return row_numbers(
            self.type, self.count or 0, self.distinct or 0, self.nulls or 0, self.numeric_min, self.numeric_max
        )


class ColumnCatalog(Mapping[int, ColumnInfo]):
    """column_id -> :class:`ColumnInfo` over the ``catalog/columns`` table of one snapshot."""

    def __init__(self, table: pa.Table) -> None:
        fields = [
            f.name for f in dataclass_fields(ColumnInfo) if f.name in table.column_names
        ]  # profile fields may postdate the lake
        table = table.select(fields)
        order = pc.sort_indices(table["column_id"]).to_numpy()
        self._table = table.take(order)
        self._ids = self._table["column_id"].to_numpy()
        if len(self._ids) > 1 and (np.diff(self._ids) == 0).any():
            raise ValueError("the columns table holds a column_id twice")

    @classmethod
    def of(cls, infos: Iterable[ColumnInfo]) -> ColumnCatalog:
        """A catalog of ``infos`` (tests, and lakes built in memory)."""
        names = {f.name for f in dataclass_fields(ColumnInfo)}
        schema = pa.schema([f for f in COLUMNS_SCHEMA if f.name in names])
        return cls(pa.Table.from_pylist([asdict(info) for info in infos], schema))

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __contains__(self, column_id: object) -> bool:
        return isinstance(column_id, int | np.integer) and self._position(int(column_id)) is not None

    def __getitem__(self, column_id: int) -> ColumnInfo:
        position = self._position(column_id) if isinstance(column_id, int | np.integer) else None
        if position is None:
            raise KeyError(column_id)
        return self._infos(np.array([position]))[0]

    def values(self) -> list[ColumnInfo]:  # type: ignore[override]
        """Every column (one conversion of the whole table)."""
        return self._infos(np.arange(len(self._ids)))

    def of_dataset(self, dataset_id: str) -> list[ColumnInfo]:
        """The dataset's columns in ordinal order ([] for a dataset the catalog does not hold)."""
        order, spans = self._by_dataset
        start, end = spans.get(dataset_id, (0, 0))
        return self._infos(order[start:end])

    def ids_of(self, dataset_id: str) -> np.ndarray:
        """The dataset's column ids in ordinal order, without building a ColumnInfo."""
        order, spans = self._by_dataset
        start, end = spans.get(dataset_id, (0, 0))
        return self._ids[order[start:end]]

    def field_of(self, column_ids: np.ndarray, name: str) -> np.ndarray:
        """One catalog field of ``column_ids``, aligned with them (None where the catalog lacks
        the column or the field), without building a ColumnInfo."""
        out = np.full(len(column_ids), None, dtype=object)
        if not len(self._ids) or name not in self._table.column_names:
            return out
        positions = np.minimum(np.searchsorted(self._ids, column_ids), len(self._ids) - 1)
        found = self._ids[positions] == column_ids
        if found.any():
            out[found] = np.array(self._table[name].take(positions[found]).to_pylist(), dtype=object)
        return out

    def _position(self, column_id: int) -> int | None:
        position = int(np.searchsorted(self._ids, column_id))
        return position if position < len(self._ids) and self._ids[position] == column_id else None

    @cached_property
    def _by_dataset(self) -> tuple[np.ndarray, dict[str, tuple[int, int]]]:
        """Positions ordered by (dataset, ordinal), and each dataset's span of them (on first use)."""
        order = pc.sort_indices(self._table, [("dataset_id", "ascending"), ("ordinal", "ascending")])
        runs = pc.run_end_encode(self._table["dataset_id"].take(order).combine_chunks())
        ends = runs.run_ends.to_numpy()
        starts = np.r_[0, ends[:-1]]
        return order.to_numpy(), dict(zip(runs.values.to_pylist(), zip(starts.tolist(), ends.tolist())))

    def _infos(self, positions: np.ndarray) -> list[ColumnInfo]:
        rows = self._table.take(pa.array(positions, pa.int64())).to_pylist()
        return [ColumnInfo(**{**row, "indexed_by": list(row["indexed_by"] or [])}) for row in rows]
