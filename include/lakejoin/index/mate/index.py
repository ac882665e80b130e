"""MATE's index loaded for search (paper §5.3, §6.1): the ``postings`` and ``superkeys`` tables as arrays.

Algorithm 1 reads a value's posting list (PL) with each item's row super key, and calculateJ
reads a candidate row's cells; :class:`MateIndex` holds both as CSR arrays (``layout.py`` orders
them by counting sorts), so a search gathers by offset and never joins tables. The same arrays
are what the shard cache stores (``index_arrays`` / ``index_from_arrays``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.mate.layout import column_datasets, int_dtype, offsets, postings_layout
from lakejoin.index.mate.xash import words_per_key
from lakejoin.index.values import ValueDictionary, dictionary_codes, string_buffers, strings_of_buffers


class Cells(NamedTuple):
    """Row g's cells are ``cell_values[row_offsets[g]:row_offsets[g+1]]`` (value ids, ascending) with
    ``cell_columns`` (column numbers), and dataset d's columns are ``table_columns[table_start[d]:
    table_start[d+1]]`` (column numbers, ascending): calculateJ's reads, bundled for the compiled scan."""

    row_offsets: np.ndarray
    cell_values: np.ndarray
    cell_columns: np.ndarray
    table_start: np.ndarray
    table_columns: np.ndarray


@dataclass
class MateIndex:
    """The index tables laid out as arrays; rows of the lake are numbered g = 0..n_rows-1.

    Rows are numbered by (dataset, row id), so each dataset's rows are one range of g and no
    per-posting dataset array is needed (``datasets_of``). Columns are numbered by column_id
    (``column_ids``; the Spark build's ids are 64-bit hashes), in id order, so comparing and
    ordering numbers is comparing and ordering ids. Ids and positions are int32 while they
    fit (int64 beyond): about 16 bytes per posting plus the super keys.
    """

    bits: int
    dataset_ids: np.ndarray  # dataset index -> dataset_id
    values: ValueDictionary  # value id <-> normalized value
    pl_offsets: np.ndarray  # PL(v) is items pl_offsets[v]:pl_offsets[v+1]
    column_ids: np.ndarray  # column number -> column_id (int64, ascending)
    pl_column: np.ndarray  # column number
    pl_row: np.ndarray  # g
    superkeys: np.ndarray  # (n_rows, bits/64) uint64, word 0 most significant
    dataset_rows: np.ndarray  # dataset d's rows are g in dataset_rows[d]:dataset_rows[d+1]
    row_offsets: np.ndarray  # row g's cells are cell_*[row_offsets[g]:row_offsets[g+1]]
    cell_values: np.ndarray  # value id of each cell, ascending within a row
    cell_columns: np.ndarray  # column number of each cell, ascending within (row, value)

    def datasets_of(self, rows: np.ndarray) -> np.ndarray:
        """Dataset index of each row g."""
        return np.searchsorted(self.dataset_rows, rows, side="right") - 1

    @property
    def cells(self) -> Cells:
        """The rows' cells, one argument to the compiled scan (``kernels.scan_tables``)."""
        return Cells(self.row_offsets, self.cell_values, self.cell_columns, *self.table_columns)

    @functools.cached_property
    def table_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Each dataset's column numbers, ascending: (starts, columns), dataset d's are
        ``columns[starts[d]:starts[d+1]]``. Derived from the cells once per loaded index."""
        owner = column_datasets(self.dataset_rows, self.row_offsets, self.cell_columns, len(self.column_ids))
        columns = np.argsort(owner, kind="stable")  # by dataset, column numbers ascending within one
        columns = columns[owner[columns] >= 0]
        return offsets(np.bincount(owner[columns], minlength=len(self.dataset_ids))).astype(np.int64), columns

    def pl_lengths(self, value_ids: np.ndarray) -> np.ndarray:
        """|PL(v)| of each value id (int64)."""
        return self.pl_offsets[value_ids + 1].astype(np.int64) - self.pl_offsets[value_ids]


ROW_BATCH = 1 << 21  # postings given row numbers at a time: bounds the int64 keys in flight


def load_index(tables: dict[str, pa.Table]) -> MateIndex:
    """Arrays for search from the ``postings`` and ``superkeys`` tables.

    The string columns are never turned into Python objects (dataset ids and values are
    numbered by their distinct strings, ``dictionary_codes``: read through Parquet's
    dictionaries when the tables come dictionary-encoded, and values stay in Arrow's buffers;
    super keys are read from the binary column's data buffer), so the load's peak is the index
    tables plus a few int32 arrays per posting.

    The sharded tables may hold any subset of shards (a table lives in one shard, so each
    loaded table is whole); the hash size comes from the global ``params`` table when present,
    so a subset without keys still hashes queries as the index does. The ``widths`` table and
    the ``shards`` manifest are not read.
    """
    for name in ("postings", "superkeys"):
        if name not in tables:
            raise ValueError(f"MATE index needs a {name!r} table, got {sorted(tables)}")
    postings, superkeys = tables["postings"], tables["superkeys"]
    bit_sizes = pc.unique(superkeys["bits"]).to_pylist()
    if "params" in tables:
        bit_sizes = sorted({*bit_sizes, tables["params"]["bits"][0].as_py()})
    if len(bit_sizes) > 1:
        raise ValueError(f"super keys mix hash sizes {bit_sizes}; rebuild the index with one size")
    bits = bit_sizes[0] if bit_sizes else 128

    sk_codes, sk_datasets = dictionary_codes(superkeys["dataset_id"])
    pl_codes, pl_datasets = dictionary_codes(postings["dataset_id"])
    dataset_ids = np.sort(
        pc.unique(pa.concat_arrays([sk_datasets.cast(pa.string()), pl_datasets.cast(pa.string())]))
        .to_numpy(zero_copy_only=False)
        .astype(object)
    )
    dataset_values = pa.array(dataset_ids, pa.string())
    row_span = int(max(pc.max(superkeys["row_id"]).as_py() or 0, pc.max(postings["row_id"]).as_py() or 0)) + 1

    sk_keys = _row_keys(_dataset_index(sk_codes, sk_datasets, dataset_values), superkeys["row_id"], row_span)
    sk_order = np.argsort(sk_keys, kind="stable")
    sk_keys = sk_keys[sk_order]
    if len(sk_keys) and (np.diff(sk_keys) == 0).any():
        raise ValueError("superkeys has more than one key for a row")
    keys = _superkey_words(superkeys["superkey"], bits, sk_order)
    rows_per_dataset = np.bincount(sk_keys // row_span, minlength=len(dataset_ids))

    value_codes, values = dictionary_codes(postings["value"])
    column_ids = pc.unique(postings["column_id"]).to_numpy().astype(np.int64)
    column_ids.sort()
    layout = postings_layout(
        value_codes,
        _posting_rows(_dataset_index(pl_codes, pl_datasets, dataset_values), postings["row_id"], row_span, sk_keys),
        pc.index_in(postings["column_id"], value_set=pa.array(column_ids)).to_numpy(),  # int32
        len(values),
        len(sk_keys),
    )
    return MateIndex(
        bits=bits,
        dataset_ids=dataset_ids,
        column_ids=column_ids,
        values=ValueDictionary(values),
        superkeys=keys,
        dataset_rows=offsets(rows_per_dataset),
        **layout,
    )


def _dataset_index(codes: np.ndarray, datasets: pa.Array, dataset_values: pa.Array) -> np.ndarray:
    """Each row's dataset index (position in the sorted ``dataset_values``, int32), from its
    code among the column's distinct ``datasets``: only the distinct ids are matched."""
    return pc.index_in(datasets.cast(pa.string()), value_set=dataset_values).to_numpy().astype(np.int32)[codes]


def _row_keys(dataset: np.ndarray, row_id: pa.ChunkedArray, row_span: int) -> np.ndarray:
    """``dataset index * row_span + row_id`` (int64) of each row: one key per lake row."""
    return dataset.astype(np.int64) * row_span + row_id.to_numpy()


def _posting_rows(dataset: np.ndarray, row_id: pa.ChunkedArray, row_span: int, sk_keys: np.ndarray) -> np.ndarray:
    """Row number g (position in the sorted ``sk_keys``) of every posting, ``ROW_BATCH`` postings
    at a time so that their int64 keys never exist all at once."""
    rows: np.ndarray = np.empty(len(dataset), int_dtype(len(sk_keys)))
    for start in range(0, len(dataset), ROW_BATCH):
        key = _row_keys(dataset[start : start + ROW_BATCH], row_id.slice(start, ROW_BATCH), row_span)
        g = np.searchsorted(sk_keys, key)
        if (g >= len(sk_keys)).any() or (sk_keys[np.minimum(g, len(sk_keys) - 1)] != key).any():
            raise ValueError("postings reference rows that have no super key")
        rows[start : start + len(key)] = g
    return rows


def _superkey_words(column: pa.ChunkedArray, bits: int, order: np.ndarray) -> np.ndarray:
    """The ``superkey`` column as (n, bits/64) uint64 words, row ``order[i]`` of the column in
    row i. Read chunk by chunk from Arrow's data buffers straight into the result (no Python
    bytes object per row, no whole-column intermediate copies)."""
    width = bits // 8
    words = np.empty((len(column), words_per_key(bits)), np.uint64)
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    start = 0
    for chunk in column.chunks:
        fixed = chunk.cast(pa.binary(width))  # raises on a key of another length
        if fixed.null_count:
            raise ValueError("superkeys has a row without a key")
        if len(fixed):
            data = np.frombuffer(fixed.buffers()[1], np.uint8)[
                fixed.offset * width : (fixed.offset + len(fixed)) * width
            ]
            words[position[start : start + len(fixed)]] = data.view(">u8").reshape(len(fixed), -1)
        start += len(fixed)
    return words


# Bump when what MATE's cached arrays mean changes: a shard's folder written under another
# version is rebuilt (``lakejoin.query.shard_arrays``).
ARRAYS_FORMAT = 1
# The global tables a shard's arrays depend on (``lakejoin.query.shard_arrays``): none, since the
# hash size travels in the arrays and a new one rewrites every shard's super keys.
ARRAYS_GLOBALS: frozenset[str] = frozenset()
INDEX_ARRAYS = (  # the MateIndex fields held as they are; the rest are strings
    "pl_offsets",
    "column_ids",
    "pl_column",
    "pl_row",
    "superkeys",
    "dataset_rows",
    "row_offsets",
    "cell_values",
    "cell_columns",
)


def index_arrays(index: MateIndex) -> dict[str, np.ndarray]:
    """``index`` as arrays for the shard cache: :func:`index_from_arrays` gives it back."""
    ids_data, ids_offsets = string_buffers(pa.array(index.dataset_ids, pa.string()))
    return {
        "bits": np.array([index.bits], np.int64),
        "dataset_id_data": ids_data,
        "dataset_id_offsets": ids_offsets,
        **{f"value_{name}": array for name, array in index.values.arrays().items()},
        **{name: getattr(index, name) for name in INDEX_ARRAYS},
    }


def index_from_arrays(arrays: Mapping[str, np.ndarray]) -> MateIndex:
    """The index :func:`index_arrays` was given: its arrays are views of ``arrays``, only the
    dataset ids become Python strings. Raises ``ValueError`` when they are not one index's."""
    try:
        names = strings_of_buffers(arrays["dataset_id_data"], arrays["dataset_id_offsets"])
        index = MateIndex(
            bits=int(arrays["bits"][0]),
            dataset_ids=np.array(names.to_pylist(), dtype=object),
            values=ValueDictionary.from_arrays(arrays["value_data"], arrays["value_offsets"], arrays["value_keys"]),
            **{name: arrays[name] for name in INDEX_ARRAYS},
        )
    except (KeyError, IndexError, TypeError, pa.ArrowException) as error:
        raise ValueError(f"these arrays are not one MATE index's: {error}") from error
    if (
        len(index.pl_offsets) != len(index.values) + 1
        or len(index.row_offsets) != len(index.superkeys) + 1
        or len(index.dataset_rows) != len(index.dataset_ids) + 1
    ):
        raise ValueError("these arrays are not one MATE index's: their lengths disagree")
    return index
