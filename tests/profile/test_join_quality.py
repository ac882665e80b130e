"""Join quality (``lakejoin.profile.join_quality``) on its own: the parts, their order, the reasons.

The lake-level checks (a planted lake through the real pipeline and graph) are in
``test_related_ranking.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from lakejoin.profile.join_quality import (
    MIN_QUALITY,
    Side,
    composite_quality,
    content_scores,
    key_order,
    name_similarity,
    names_agree,
    quality,
    row_numbers,
    semantic_quality,
    words,
)

PARENT = Side("patient_id", "identifier", 500, 500, "patients.csv")
CHILD = Side("patient_id", "identifier", 4000, 480, "visits.csv")


def test_a_foreign_key_into_a_key_is_the_best_join_and_says_why() -> None:
    judged = quality(CHILD, PARENT, 480, 0.9)
    assert judged.cardinality == "n:1" and judged.keyness == pytest.approx(1.0)
    assert judged.containment == pytest.approx(1.0) and judged.score > 0.7
    assert judged.reason == "all your values are keys of theirs"
    assert quality(PARENT, CHILD, 480, 0.9).reason == "all their values are keys of yours"
    evidence = judged.evidence()
    assert {"score", "keyness", "containment", "coverage", "informativeness", "shape", "name", "growth"} <= set(
        evidence
    )


def test_shared_small_numbers_score_below_shared_rare_identifiers() -> None:
    """300 small integers shared with a key column of another table, against 200 rare ids."""
    codes = Side("county", "integer", 3000, 300, "visits.csv")
    numbers = Side("id", "integer", 400, 400, "sizes.csv")
    small = quality(codes, numbers, 300, informativeness=0.15)
    rare = quality(Side("patient_id", "identifier", 2000, 200), PARENT, 200, informativeness=0.9)
    assert rare.score > small.score
    assert small.reason == "shares only common small numbers"


def test_many_to_many_joins_rank_low_and_show_their_row_growth() -> None:
    a = Side("year", "integer", 5000, 20, "a.csv")
    b = Side("year", "integer", 8000, 20, "b.csv")
    judged = quality(a, b, 20, 0.6)
    assert judged.cardinality == "m:n" and judged.growth == pytest.approx(250.0)  # b references a: 5000 rows / 20 years
    assert judged.score < MIN_QUALITY and judged.reason.startswith("many-to-many")


def test_flags_and_decimals_are_demoted() -> None:
    flag = quality(Side("ok", "string", 100, 2), Side("valid", "string", 2, 2), 2, 0.1)  # Y/N: in most columns
    assert flag.score < MIN_QUALITY and "flag" in flag.reason
    measures = quality(Side("x", "decimal", 100, 100), Side("y", "decimal", 100, 100), 100, 0.9)
    assert measures.score < quality(Side("x", "string", 100, 100), Side("y", "string", 100, 100), 100, 0.9).score


def test_names_break_ties_but_never_decide_alone() -> None:
    artist = Side("ArtistId", "integer", 275, 275, "Artist.csv")
    album = Side("ArtistId", "integer", 347, 204, "Album.csv")
    track = Side("TrackId", "integer", 3503, 3503, "Track.csv")
    assert name_similarity(album, artist) == 1.0
    assert quality(album, artist, 204, 0.2).score > quality(album, track, 204, 0.2).score
    unrelated = Side("ArtistId", "integer", 300, 300, "Artist.csv")
    assert quality(Side("ArtistId", "integer", 300, 300, "x.csv"), unrelated, 0, 0.2).score == 0.0
    # a foreign key named after the table it references
    assert name_similarity(Side("artist_id", None, 1, 1), Side("id", None, 1, 1, "artists.csv")) == 1.0
    assert words("ArtistId") == words("artist_id") == {"artist", "id"}


def test_content_scores_in_arrays_equal_the_single_pair_without_names() -> None:
    pair = quality(CHILD, PARENT, 480, 0.9)
    arrays = content_scores(
        np.array([480.0]),
        np.array([480.0]),
        np.array([500.0]),
        np.array([0.12]),
        np.array([1.0]),
        np.ones(1),
        np.array([0.9]),
    )
    assert pair.name == 1.0 and arrays[0] == pytest.approx(pair.score)  # equal names: the name part is 1


def test_composite_and_semantic_joins_share_the_scale() -> None:
    key = [Side("series", "integer", 100, 10), Side("episode", "integer", 100, 10)]
    good = composite_quality(share=1.0, coverage_of_theirs=1.0, key_columns=key, this_is_key=True, mapped_columns=key)
    assert good.score > 0.9 and good.cardinality == "1:n"
    assert good.reason == "all their (series, episode) tuples are keys of yours"
    measured = [Side("series", "integer", 100, 10), Side("rating", "decimal", 100, 100)]
    assert composite_quality(1.0, 1.0, measured, True, measured).score < good.score
    semantic = semantic_quality(CHILD, PARENT, 0.96)
    assert semantic.reason.startswith("semantic: ") and semantic.score < quality(CHILD, PARENT, 480, 0.5).score


def test_the_smallest_recognisable_key_comes_first() -> None:
    """Lahman's batting table: (playerID, yearID, stint) before a statistic completing a key."""
    player, year = Side("playerID", "identifier", 100_000, 19_000), Side("yearID", "integer", 100_000, 150)
    stint, team = Side("stint", "integer", 100_000, 5), Side("teamID", "identifier", 100_000, 149)
    triples = Side("3B", "integer", 100_000, 30)
    real = key_order([player, year, stint], [0, 1, 2])
    accidental = key_order([player, year, team, triples], [0, 1, 3, 11])
    assert real < accidental
    runs = Side("R", "integer", 100_000, 180)  # a count with many values
    assert key_order([player, year, stint], [0, 1, 2]) < key_order([player, year, runs], [0, 1, 9])


def test_a_row_numbering_key_counts_only_when_the_names_agree() -> None:
    """Every table numbers its rows 1..n: a join into a numbering is an accident unless the
    names say it is an id (Chinook's ArtistId is 1..275 and is the key albums reference)."""
    assert row_numbers("integer", 275, 275, 0, 1.0, 275.0) and not row_numbers("integer", 275, 275, 0, 1.0, 300.0)
    assert row_numbers("integer", 200, 200, 0, 1000.0, 1199.0)  # ids counted from 1000 number rows too
    assert not row_numbers("integer", 200, 199, 0, 1000.0, 1199.0) and not row_numbers(
        "integer", 200, 200, 1, 1000.0, 1199.0
    )
    numbering = Side("rownames", "integer", 500, 500, "survey.csv", row_numbers=True)
    record = Side("record_id", "integer", 400, 400, "surveys.csv")
    accident = quality(record, numbering, 400, 0.6)
    assert accident.reason.startswith("their key is a row numbering") and accident.score < MIN_QUALITY
    artist = Side("ArtistId", "integer", 275, 275, "Artist.csv", row_numbers=True)
    album = Side("ArtistId", "integer", 347, 204, "Album.csv")
    assert quality(album, artist, 204, 0.6).reason == "all your values are keys of theirs"


def test_a_few_rare_codes_are_not_a_flag() -> None:
    """Three airport codes of a key table are rare in the lake; Y/N is everywhere."""
    origin, faa = Side("origin", "identifier", 26_000, 3), Side("faa", "identifier", 1458, 1458)
    rare, common = quality(origin, faa, 3, 0.8), quality(origin, faa, 3, 0.05)
    assert rare.score > 2 * common.score and "flag" in common.reason


def test_a_count_completing_a_composite_key_by_accident_is_weak() -> None:
    """A key of small numbers (series x episode) holds most small tuples: a baker's count of
    episodes appeared, mapped onto ``episode``, meets it by accident; equal names do not."""
    key = [Side("series", "integer", 94, 10, "ratings.csv"), Side("episode", "integer", 94, 10, "ratings.csv")]
    bakers = [Side("series", "integer", 120, 10), Side("total_episodes_appeared", "integer", 120, 10)]
    accident = composite_quality(0.97, 0.91, key, True, bakers)
    assert accident.score < MIN_QUALITY and accident.shape < 1.0
    assert accident.reason == (
        "pairs your episode with their total_episodes_appeared: numbers named unlike, meeting by accident"
    )
    seen_from_bakers = composite_quality(0.97, 0.91, key, False, bakers)
    assert seen_from_bakers.reason.startswith("pairs your total_episodes_appeared with their episode")
    episodes = [Side("series", "integer", 1136, 10), Side("episode", "integer", 1136, 10)]
    assert composite_quality(0.97, 0.91, key, True, episodes).score > 0.8
    # codes named differently are not numbers meeting by accident: their values speak
    airports = [Side("faa", "identifier", 1458, 1458), Side("year", "integer", 1458, 1)]
    origins = [Side("origin", "identifier", 26_000, 3), Side("year", "integer", 26_000, 1)]
    assert composite_quality(1.0, 1.0, airports, True, origins).score > 0.9


def test_a_count_inside_an_integer_key_range_is_no_reference() -> None:
    """Departure times (hhmm) all fall inside a numbering with gaps (1..37810): every value is a
    key, by accident. A foreign key of the same name, equally count-like, is a reference."""
    departures = Side("dep_time", "integer", 20_000, 1186, "flights.csv")
    numbers = Side("rownames", "integer", 4739, 4739, "CollegeDistance.csv")
    accident = quality(departures, numbers, 1186, 0.51)
    assert accident.score < MIN_QUALITY
    assert accident.reason == "your dep_time is a count, not a reference: it falls in their key's range"
    assert quality(numbers, departures, 1186, 0.51).reason.startswith("their dep_time is a count")
    visits = Side("patient_id", "integer", 2000, 120, "visits.csv")
    patients = Side("patient_id", "integer", 400, 400, "patients.csv")
    assert quality(visits, patients, 120, 0.51).score > 0.4


def test_names_agree_when_they_share_more_than_half_their_words() -> None:
    assert names_agree(name_similarity(Side("ArtistId", None, 1, 1), Side("Id", None, 1, 1, "Artist.csv")))
    assert not names_agree(name_similarity(Side("episode_count", None, 1, 1), Side("episode", None, 1, 1)))
    numbering = Side("episode_count", "integer", 94, 94, "ratings.csv", row_numbers=True)
    episodes = Side("episode", "integer", 2320, 16, "rpdr_contep.csv")
    assert quality(episodes, numbering, 16, 0.24).reason.startswith("their key is a row numbering")


def test_a_row_numbering_on_either_side_of_a_one_to_one_join_is_an_accident() -> None:
    """An episode counter 1..94 meets every integer key holding 1..94 (a numbering with gaps)."""
    counter = Side("episode_count", "integer", 94, 94, "ratings.csv", row_numbers=True)
    sparse_key = Side("rownames", "integer", 534, 534, "CPS1985.csv")
    accident = quality(counter, sparse_key, 94, 0.32)
    assert accident.cardinality == "1:1" and accident.score < MIN_QUALITY
    assert accident.reason == "your key is a row numbering: every table has one"
