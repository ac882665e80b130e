"""The join-quality benchmark's truth and metrics: SQLite's declared keys read back, and the
metrics on a hand-made ranking equal to the hand-computed numbers."""

from __future__ import annotations

import csv
import math
import sqlite3
from pathlib import Path

import pytest
from bench_join_quality import Truth, implied_keys, ndcg_at, precision_at, recall_at, reciprocal_rank, truth_of

from lakejoin.sources.sqlite import ForeignKey, export_tables, foreign_keys, table_names


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            """
            CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE product (sku TEXT, size TEXT, PRIMARY KEY (sku, size));
            CREATE TABLE "order" (id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customer,
                sku TEXT, size TEXT, note TEXT, FOREIGN KEY (sku, size) REFERENCES product (sku, size));
            CREATE TABLE review (customer_id INTEGER REFERENCES customer (id), stars INTEGER);
            INSERT INTO customer VALUES (1, 'Ada'), (2, 'Bo');
            INSERT INTO product VALUES ('p1', 'S');
            INSERT INTO "order" VALUES (10, 1, 'p1', 'S', NULL);
            """
        )
    connection.close()
    return path


def test_the_loader_reads_tables_and_declared_keys(shop: Path, tmp_path: Path) -> None:
    assert table_names(shop) == ["customer", "order", "product", "review"]
    assert sorted(foreign_keys(shop), key=lambda k: (k.table, k.referenced_table)) == [
        ForeignKey("order", ("customer",), "customer", ("id",)),  # `REFERENCES customer`: its primary key
        ForeignKey("order", ("sku", "size"), "product", ("sku", "size")),
        ForeignKey("review", ("customer_id",), "customer", ("id",)),
    ]
    files = export_tables(shop, tmp_path / "lake")
    assert files["order"] == tmp_path / "lake" / "shop" / "order.csv"
    with files["order"].open() as handle:
        assert list(csv.reader(handle)) == [["id", "customer", "sku", "size", "note"], ["10", "1", "p1", "S", ""]]


def test_the_loader_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database, just words " * 40)
    with pytest.raises(ValueError, match="not a SQLite database"):
        foreign_keys(text)
    with pytest.raises(ValueError, match="not found"):
        table_names(tmp_path / "missing.sqlite")


def test_truth_has_partners_both_ways_and_same_key_siblings(shop: Path) -> None:
    truth = truth_of("shop", foreign_keys(shop))
    assert truth[("shop", "customer")].direct == {("shop", "order"), ("shop", "review")}
    assert truth[("shop", "order")].direct == {("shop", "customer"), ("shop", "product")}
    assert truth[("shop", "order")].siblings == {("shop", "review")}  # both reference customer.id
    assert truth[("shop", "product")].siblings == set()


def test_keys_the_declared_ones_imply_are_partners_and_siblings_too() -> None:
    """ratings(series, episode) -> episodes and episodes(series) -> series imply ratings(series) ->
    series; results(series, baker) -> bakers and a declared key bakers(baker) imply results(baker)
    -> bakers, a reference to the same key as awards'. A chain's every link is followed, and a
    key onto columns the referenced tuples do not hold implies nothing."""
    keys = [
        ForeignKey("episodes", ("series",), "series", ("id",)),
        ForeignKey("ratings", ("season", "number"), "episodes", ("series", "episode")),
        ForeignKey("clips", ("show", "part"), "ratings", ("season", "number")),
        ForeignKey("results", ("series", "name"), "bakers", ("series", "baker")),
        ForeignKey("awards", ("winner",), "bakers", ("baker",)),
        ForeignKey("bakers", ("hometown",), "towns", ("town",)),
    ]
    assert implied_keys(keys) == {
        ForeignKey("ratings", ("season",), "series", ("id",)),
        ForeignKey("clips", ("show", "part"), "episodes", ("series", "episode")),
        ForeignKey("clips", ("show",), "series", ("id",)),
        ForeignKey("results", ("name",), "bakers", ("baker",)),
    }
    truth = truth_of("tv", keys)
    assert truth[("tv", "series")].direct == {("tv", "episodes")}
    assert truth[("tv", "series")].implied == {("tv", "ratings"), ("tv", "clips")}
    assert truth[("tv", "clips")].implied == {("tv", "episodes"), ("tv", "series")}
    assert truth[("tv", "results")].implied == set()  # bakers is a declared partner already
    assert truth[("tv", "results")].siblings == {("tv", "awards")}
    assert truth[("tv", "clips")].gain(("tv", "series")) == 1 and truth[("tv", "clips")].gain(("tv", "towns")) == 0


def test_metrics_on_a_hand_made_ranking() -> None:
    truth = Truth(direct={("d", "a"), ("d", "b")}, siblings={("d", "s")})
    ranking = [("x", "1"), ("d", "s"), ("d", "a"), ("x", "2"), ("x", "3"), ("d", "b")]
    assert precision_at(ranking, truth) == 2 / 5
    assert precision_at(ranking, truth, listed=3) == 2 / 3  # three listed as related, the rest weak
    assert precision_at(ranking, truth, listed=0) == 0.0
    assert recall_at(ranking, truth) == 1 / 2
    assert reciprocal_rank(ranking, truth) == 1 / 2
    found = 1 / math.log2(3) + 2 / math.log2(4) + 2 / math.log2(7)
    ideal = 2 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranking, truth) == pytest.approx(found / ideal)
    assert reciprocal_rank([("x", "1")], truth) == 0.0
    assert ndcg_at(sorted(truth.direct) + [("d", "s")], truth) == pytest.approx(1.0)
