"""The snapshot's column catalog kept in Arrow (lakejoin.query.columns) answers as a dict of
ColumnInfo objects would."""

from __future__ import annotations

import random

import pytest

from lakejoin.query.columns import ColumnCatalog, ColumnInfo


def infos(n_datasets: int = 40, seed: int = 7) -> list[ColumnInfo]:
    rng = random.Random(seed)
    ids = list({rng.getrandbits(63) - 2**62 for _ in range(n_datasets * 6)})  # the Spark build's ids are 64-bit hashes
    out = []
    for d in range(n_datasets):
        ordinals = list(range(rng.randint(0, 6)))
        rng.shuffle(ordinals)  # the table's row order is not the column order
        for ordinal in ordinals:
            out.append(
                ColumnInfo(
                    ids.pop(),
                    f"ds-{d:03d}",
                    ordinal,
                    f"c{ordinal}",
                    "string",
                    rng.randint(0, 99),
                    rng.choice([[], ["josie"], ["josie", "mate"]]),
                    nulls=None,
                    key_candidate=rng.random() < 0.5,
                )
            )
    rng.shuffle(out)
    return out


def test_the_catalog_answers_as_a_dict_of_its_columns() -> None:
    columns = infos()
    expected = {c.column_id: c for c in columns}
    catalog = ColumnCatalog.of(columns)
    assert len(catalog) == len(expected)
    assert list(catalog) == sorted(expected)
    assert all(catalog[i] == info for i, info in expected.items())
    assert sorted(catalog.values(), key=lambda c: c.column_id) == sorted(expected.values(), key=lambda c: c.column_id)
    assert all(i in catalog for i in expected)
    absent = max(expected) + 1
    assert absent not in catalog and "x" not in catalog and catalog.get(absent) is None
    with pytest.raises(KeyError):
        catalog[absent]


def test_a_datasets_columns_come_in_ordinal_order() -> None:
    columns = infos()
    catalog = ColumnCatalog.of(columns)
    for dataset_id in {c.dataset_id for c in columns} | {"not-in-the-lake"}:
        expected = sorted((c for c in columns if c.dataset_id == dataset_id), key=lambda c: c.ordinal)
        assert catalog.of_dataset(dataset_id) == expected
        assert catalog.ids_of(dataset_id).tolist() == [c.column_id for c in expected]


def test_an_empty_catalog_and_a_repeated_id() -> None:
    empty = ColumnCatalog.of([])
    assert len(empty) == 0 and empty.of_dataset("d") == [] and empty.values() == [] and len(empty.ids_of("d")) == 0
    twice = infos(3)
    with pytest.raises(ValueError, match="twice"):
        ColumnCatalog.of([*twice, twice[0]])
