"""What each search method and the join take, described once: name, type, default, bounds and a
one-line explanation. The search page builds its forms from :func:`forms` (via ``GET
/lakejoin/api/methods``) and the REST docs quote :func:`params_doc`, so both say what the engine
checks (``engine.PARAMS`` holds the types; a test keeps the two in step).
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any

from lakejoin.query.engine import AUTO_LSH_MIN_DISTINCT, DEFAULT_K, METHODS, PARAMS, Limits
from lakejoin.query.family import DEFAULT_T, DEFAULT_TAU, DEFAULT_THRESHOLD
from lakejoin.query.join import HOWS, POLICIES
from lakejoin.transform.discover import DEFAULT_BUDGET, DEFAULT_CANDIDATES, DEFAULT_SAMPLE
from lakejoin.transform.join import DEFAULT_METHOD
from lakejoin.transform.join import METHODS as TRANSFORM_METHODS


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as a form field: ``type`` is ``float``, ``int``, ``bool``, ``str`` or ``choice``."""

    name: str
    type: str
    help: str
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class MethodSpec:
    """A search method: its name, title, help and parameters."""

    name: str
    title: str
    help: str
    params: tuple[ParamSpec, ...]


THRESHOLD = ParamSpec(
    "threshold",
    "float",
    "LSH Ensemble: the least containment of your values in a column to report it, in (0, 1]",
    DEFAULT_THRESHOLD,
    0.0,
    1.0,
)
VERIFY = ParamSpec(
    "verify", "bool", "LSH Ensemble: count the exact containment of each candidate (slower, exact)", False
)
TAU = ParamSpec(
    "tau",
    "float",
    "PEXESO τ: how close two values' embeddings must be to match, a share of the largest distance",
    DEFAULT_TAU,
    0.0,
    1.0,
)
T = ParamSpec(
    "T",
    "float",
    "PEXESO T: the share of your values that must match for a column to count as joinable, in (0, 1]",
    DEFAULT_T,
    0.0,
    1.0,
)
MODE = ParamSpec(
    "mode",
    "choice",
    "PEXESO: every column with joinability ≥ T (threshold) or the k columns with most matches (topk)",
    "threshold",
    choices=("threshold", "topk"),
)
MODEL = ParamSpec(
    "model", "str", "PEXESO: the embedding model; must be the one the index was built with (empty: the index's)"
)
EXACT = ParamSpec("exact", "bool", "PEXESO: list every matched value pair as evidence (slower)", False)
LOWER_BOUND = ParamSpec(
    "lower_bound",
    "bool",
    "PEXESO threshold mode: stop counting a column once it reaches T (faster; scores become lower bounds, shown ≥)",
    False,
)
INITIAL_COLUMN = ParamSpec(
    "initial_column",
    "str",
    "MATE: the query column whose posting lists are read first (empty: the one with the fewest posting-list entries "
    "in the lake)",
)
CANDIDATES = ParamSpec(
    "candidates",
    "int",
    "transform: lake columns sharing the most value parts (q-grams, words, numbers) with yours to learn a "
    "transformation for",
    DEFAULT_CANDIDATES,
    1,
    200,
)
SAMPLE = ParamSpec(
    "sample",
    "int",
    "transform: your values each transformation is learned from (with the found column's values sharing their parts)",
    DEFAULT_SAMPLE,
    2,
    1000,
)
BUDGET = ParamSpec(
    "budget",
    "float",
    "transform: seconds for the whole search; no further candidate is learned after them",
    DEFAULT_BUDGET,
    1.0,
    600.0,
)
LEARNER = ParamSpec(
    "learner",
    "choice",
    "transform: the method that learns each transformation",
    DEFAULT_METHOD,
    choices=tuple(TRANSFORM_METHODS),
)
SEMANTIC = ParamSpec(
    "semantic",
    "bool",
    "auto: match values by meaning (PEXESO) — misspellings, synonyms, formats — instead of exactly",
    False,
)

METHOD_SPECS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            "auto",
            "Auto",
            "Picks for you: JOSIE for one column (a learned transformation when no column shares a value), MATE for "
            "several, PEXESO when semantic; it says what it picked and why.",
            (SEMANTIC,),
        ),
        MethodSpec(
            "josie", "JOSIE — exact overlap", "The k columns sharing the most distinct values with yours (exact).", ()
        ),
        MethodSpec(
            "lshensemble",
            "LSH Ensemble — containment",
            "Columns containing at least a threshold share of your values (estimated, or exact with verify).",
            (THRESHOLD, VERIFY),
        ),
        MethodSpec(
            "mate",
            "MATE — composite key",
            "Tables joinable on several columns at once (a composite key), ranked by the keys they share.",
            (INITIAL_COLUMN,),
        ),
        MethodSpec(
            "pexeso",
            "PEXESO — semantic",
            "Columns whose values match yours by embedding similarity: misspellings, synonyms, formats.",
            (TAU, T, MODE, MODEL, EXACT, LOWER_BOUND),
        ),
        MethodSpec(
            "transform",
            "Transformation — reformatted values",
            "Columns that join with yours after a learned transformation (names reordered or abbreviated, codes "
            "padded or prefixed, dates and numbers reformatted), ranked by the rows that join, each with its "
            "program.",
            (CANDIDATES, SAMPLE, BUDGET, LEARNER),
        ),
    )
}


def flag_help(name: str) -> str:
    """A method parameter's one-line help with its default, for the CLI's flags."""
    spec = next(p for method in METHOD_SPECS.values() for p in method.params if p.name == name)
    return f"{spec.help} (default {spec.default})" if spec.default not in (None, False) else spec.help


def method_spec(method: str) -> MethodSpec:
    """The method's form; a method without a written one gets plain fields from ``engine.PARAMS``."""
    if method in METHOD_SPECS:
        return METHOD_SPECS[method]
    fields = tuple(ParamSpec(name, kind.__name__, name) for name, kind in PARAMS[method].items())
    return MethodSpec(method, method, f"the {method} method", fields)


def transform_default() -> str | None:
    """The transformation method the library learns with when none is named."""
    from lakejoin.transform import learn_and_join

    return inspect.signature(learn_and_join).parameters["method"].default


def join_specs() -> tuple[ParamSpec, ...]:
    """The join's options (kind, one-to-many policy, transformation, prefix) as parameters."""
    from lakejoin.transform import METHODS as TRANSFORMS

    default = transform_default()
    return (
        ParamSpec(
            "how",
            "choice",
            "left keeps your rows without a match (empty added columns); inner drops them",
            "left",
            choices=HOWS,
        ),
        ParamSpec(
            "policy",
            "choice",
            "a row matching several: the first match, all values aggregated with ' | ', or one row per match",
            "first",
            choices=POLICIES,
        ),
        ParamSpec(
            "transform",
            "str",
            f"join through a learned transformation ({', '.join(TRANSFORMS)}; {default} when learning is asked for) "
            "or a program text; empty: exact match",
            None,
            choices=tuple(TRANSFORMS),
        ),
    )


def forms(pexeso_model: str | None = None) -> dict[str, Any]:
    """Every method's form and the join's, as JSON (``pexeso_model``: the loaded index's model)."""
    limits = Limits()
    methods = []
    for spec in map(method_spec, sorted(METHODS, key=lambda m: m != "auto")):  # auto, the default, first
        params = [asdict(p) | ({"default": pexeso_model} if p is MODEL and pexeso_model else {}) for p in spec.params]
        methods.append({"name": spec.name, "title": spec.title, "help": spec.help, "params": params})
    k = ParamSpec("k", "int", "how many results to show", DEFAULT_K, 1, limits.max_k)
    return {
        "methods": methods,
        "k": asdict(k),
        "join": [asdict(p) for p in join_specs()],
        "auto_lsh_min_distinct": AUTO_LSH_MIN_DISTINCT,
        "max_columns": limits.max_columns,
    }


def params_doc() -> str:
    """The ``params`` of each method in one paragraph (for the REST API's OpenAPI description)."""
    lines = []
    for spec in map(method_spec, METHODS):
        described = (
            "; ".join(f"`{p.name}` ({p.type}{_bounds(p)}, default {p.default!r}): {p.help}" for p in spec.params)
            or "none"
        )
        lines.append(f"- **{spec.name}**: {described}")
    return "Method parameters, a JSON object:\n\n" + "\n".join(lines)


def _bounds(spec: ParamSpec) -> str:
    if spec.choices:
        return " of " + "|".join(spec.choices)
    if spec.minimum is not None and spec.maximum is not None:
        return f" in [{spec.minimum:g}, {spec.maximum:g}]"
    return ""
