"""The sub-value tokens of a column: what the q-gram family indexes instead of whole values.

A column joinable with a query only after a transformation ("Rafiei, Davood" ~ "D Rafiei",
"JFK" ~ "KJFK", "2013-01-05" ~ "Jan 5, 2013", "00042" ~ "42") shares few or no whole values with
it, but shares parts of them. A value's tokens (:func:`value_tokens`, on values already
normalized by ``lakejoin.normalize``, so lower case):

- the value itself when at most :data:`WHOLE_VALUE_CHARS` characters (the equi-join evidence);
- its *runs* (of at most :data:`WHOLE_VALUE_CHARS` characters): maximal runs of letters and of
  digits, digit runs without leading zeros ("00042" and "42" meet; "a320" gives "a" and "320");
- the character 3-grams of each run of 4 to :data:`GRAM_MAX_RUN` characters ("kjfk" gives "kjf"
  and "jfk", which meets "jfk"; long runs are left out: their grams are common to every text
  column and only slow the search);
- with two or more numbers in the value, their *bag*: "~" and the numbers sorted, month names
  read as their number and years 1900-2099 as their last two digits ("2013-01-05",
  "01/05/2013", "1/5/13" and "jan 5, 2013" all give "~1 13 5");
- a value that is one number, with thousands separators, a sign, a currency or percent sign or
  a unit word of up to four letters around it, gives its canonical number and the number at 2
  and at 3 significant digits ("$1,234.50" gives "1234.5", "#1.2e+03" and "#1.23e+03", which
  "1234.5", "1,234.5 usd" and a rounded "1235" give too).

Every token is its own normalization (``normalize_value(t) == t``), so JOSIE's searcher, which
normalizes a query, looks them up unchanged.

Per column, at most :data:`MAX_VALUES` distinct values are tokenized and at most
:data:`MAX_TOKENS` distinct tokens kept: in both cases those with the smallest 60-bit SHA-256
hash (then text), a bottom-k sample that Spark computes with ``sha2`` exactly as
:func:`hash60` does here, so the Spark build and the in-process one keep the same tokens. The
caps bound what a long or wide column costs to index; a sampled column's overlap with a query
then estimates the share of its tokens the query has, times the cap.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.normalize import NULL_LIKE, canonical_number, normalize_value

MAX_VALUES = 1_000  # distinct values tokenized per column (bottom-k by hash)
MAX_TOKENS = 512  # distinct tokens kept per column (bottom-k by hash)
MAX_QUERY_VALUES = 5_000  # distinct query values tokenized (bottom-k by hash)
MAX_VALUE_CHARS = 200  # a longer value is tokenized from its first 200 characters
WHOLE_VALUE_CHARS = 40
GRAM = 3
GRAM_MAX_RUN = 12

_RUN = re.compile(r"[^\W\d_]+|[0-9]+")
_ONE_NUMBER = re.compile(r"^[$€£¥]?\s*([+-]?[0-9][0-9,]*(?:\.[0-9]+)?)\s*(?:%|[a-z]{1,4})?$")
_MONTHS = {
    name: str(number)
    for number, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ],
        1,
    )
    for name in names
}

TOKEN_SCHEMA = pa.schema([("dataset_id", pa.string()), ("column_id", pa.int64()), ("value", pa.string())])


def hash60(text: str) -> int:
    """The first 60 bits of ``text``'s SHA-256 (UTF-8), as Spark's ``conv(substring(sha2(t, 256), 1, 15), 16, 10)``."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:15], 16)


def value_tokens(value: str) -> set[str]:
    """The tokens of one normalized value (module docstring)."""
    text = value[:MAX_VALUE_CHARS]
    tokens = {text} if len(text) <= WHOLE_VALUE_CHARS else set()
    numbers = []
    for run in _RUN.findall(text):
        if "0" <= run[0] <= "9":
            run = run.lstrip("0") or "0"
            numbers.append(str(int(run) % 100) if len(run) == 4 and run[:2] in ("19", "20") else run)
        elif run in _MONTHS:
            numbers.append(_MONTHS[run])
        if len(run) <= WHOLE_VALUE_CHARS:
            tokens.add(run)
        if GRAM < len(run) <= GRAM_MAX_RUN:
            tokens.update(run[i : i + GRAM] for i in range(len(run) - GRAM + 1))
    if len(numbers) >= 2:
        tokens.add("~" + " ".join(sorted(numbers)))
    one = _ONE_NUMBER.match(text)
    if one:
        tokens.update(_number_tokens(one.group(1).replace(",", "")))
    return {t for t in tokens if _own_normalization(t)}


def _number_tokens(number: str) -> set[str]:
    """A number's canonical text and its 2- and 3-significant-digit roundings ("#"-prefixed)."""
    canonical = canonical_number(number.lstrip("0") if number[:1] == "0" and number[1:2].isdigit() else number)
    if canonical is None:
        return set()
    value = float(canonical)
    return {canonical, f"#{value:.2g}", f"#{value:.3g}"}


def _own_normalization(token: str) -> bool:
    """``normalize_value(token) == token``, without normalizing the common tokens: ASCII letter
    runs and digit runs short enough to be read back exactly are their own normalization unless
    null-like (half the tokenizer's time went to normalizing them)."""
    if token.isascii() and (token.isalpha() or (token.isdigit() and len(token) <= 15)):
        return token not in NULL_LIKE
    return normalize_value(token) == token


def bottom_k(items: Iterable[str], k: int) -> list[str]:
    """The ``k`` distinct items with the smallest :func:`hash60` (then text), in that order."""
    return sorted(set(items), key=lambda t: (hash60(t), t))[:k]


def query_tokens(values: Iterable[object]) -> set[str]:
    """The tokens of a query column: of its first :data:`MAX_QUERY_VALUES` distinct normalized
    values by hash."""
    distinct = {v for v in map(normalize_value, values) if v is not None}
    return {t for v in bottom_k(distinct, MAX_QUERY_VALUES) for t in value_tokens(v)}


def tokenize_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(dataset_id, column_id, value) rows -> (dataset_id, column_id, value=token) rows, one per
    distinct token of each row's value (Spark's ``mapInArrow`` runs it on the executors)."""
    for batch in batches:
        datasets, columns, tokens = [], [], []
        for dataset_id, column_id, value in zip(
            *(batch.column(n).to_pylist() for n in ("dataset_id", "column_id", "value"))
        ):
            if value is None:
                continue
            for token in value_tokens(value):
                datasets.append(dataset_id)
                columns.append(column_id)
                tokens.append(token)
        yield pa.RecordBatch.from_arrays(
            [pa.array(datasets, pa.string()), pa.array(columns, pa.int64()), pa.array(tokens, pa.string())],
            schema=TOKEN_SCHEMA,
        )


def column_tokens(cells: pa.Table) -> pa.Table:
    """``lake/cells`` rows -> each column's kept tokens as cells-shaped rows (``TOKEN_SCHEMA``):
    what ``lakejoin.spark.qgram`` computes with Spark, in this process."""
    present = cells.filter(pc.is_valid(cells["value"]))
    grouped = present.group_by(["column_id", "dataset_id"]).aggregate([("value", "distinct")]).sort_by("column_id")
    datasets, columns, tokens = [], [], []
    for column_id, dataset_id, values in zip(
        grouped["column_id"].to_pylist(), grouped["dataset_id"].to_pylist(), grouped["value_distinct"].to_pylist()
    ):
        kept = bottom_k((t for v in bottom_k(values, MAX_VALUES) for t in value_tokens(v)), MAX_TOKENS)
        datasets.extend([dataset_id] * len(kept))
        columns.extend([column_id] * len(kept))
        tokens.extend(kept)
    return pa.table(
        {
            "dataset_id": pa.array(datasets, pa.string()),
            "column_id": pa.array(columns, pa.int64()),
            "value": pa.array(tokens, pa.string()),
        },
        schema=TOKEN_SCHEMA,
    )
