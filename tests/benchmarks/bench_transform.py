"""Transformation-join benchmark: CST vs Auto-Join on the Auto-Join web tables (31 pairs), the
FlashFill/BlinkFill spreadsheet pairs (108) and reformatting cases generated from real values in
installed packages (``reformat_cases.py``: names and codes, numbers, dates), end to end (row
matching, learning, join), F1 per dataset and category.

    .venv/bin/python tests/benchmarks/bench_transform.py [--quick] [--methods cst,cst+,cst++,autojoin]
        [--datasets web,spreadsheet,generated] [--baseline /tmp/wt-transform-base]

``--baseline DIR`` runs the same cases with the library of another checkout (a git worktree of
an older commit: ``DIR/include`` first on the path, its methods only) and prints its F1 beside.

Metrics as the CST paper computes them (notes/cst.md §4.4-4.5):
- top cov.: share of the golden pairs the single best transformation covers;
- cover cov.: share covered by any returned transformation (no single-row literal fallbacks,
  so unlike the paper's Table 2 it is not 1.00 by construction);
- "cst" is the paper's setting for the dataset (p = 3 and 3 blocks on web tables, p = 4 on
  spreadsheets), "cst+" the improved preset (cst.IMPROVED, cst.IMPROVED_SPREADSHEET);
- s/table is wall-clock seconds of learn_and_join (both directions), mean and median, cpu s its
  process CPU time (on a busy machine the wall clock includes waiting for a core);
- P / R / F1 of the joined pairs against the ground truth, undirected and case-insensitive,
  pairs whose two values are both outside the ground truth dropped; F1 is the mean of the
  per-table F1 (not the F1 of mean P and R); an empty join has precision 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from report import run_with_docs

from lakejoin.normalize import normalize_value
from lakejoin.transform import METHODS, cst, learn_and_join, parse_program
from lakejoin.transform.units import apply_program

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DATASETS = {
    "web": SHARED / "benchmarks" / "autojoin-web",
    "spreadsheet": SHARED / "benchmarks" / "flashfill",
    "generated": None,
}  # reformat_cases.py, built at run time
# the paper's setting differs per dataset (p = 4 on spreadsheets, §6.2); so does the improved one
SETTINGS = {("spreadsheet", "cst"): cst.FAITHFUL_SPREADSHEET, ("spreadsheet", "cst+"): cst.IMPROVED_SPREADSHEET}
PAPER = {  # CST paper Tables 2-3 (n-gram matching): top cov., F1 of CST and of Auto-Join, s/table
    "web": {"cst": (0.58, 0.713, 22.0), "autojoin": (0.39, 0.466, 269_174.0)},
    "spreadsheet": {"cst": (0.73, 0.812, 11.0), "autojoin": (0.66, 0.796, 77_390.0)},
}


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def load_case(folder: Path) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Source column, target column and golden pairs of one benchmark folder."""
    source_col, target_col = (folder / "rows.txt").read_text().splitlines()[0].split(":")
    source, target = _read(folder / "source.csv"), _read(folder / "target.csv")
    truth = _read(folder / "ground truth.csv")
    # ground truth = source columns then target columns, positionally (names may repeat)
    left = truth.iloc[:, list(source.columns).index(source_col)]
    right = truth.iloc[:, len(source.columns) + list(target.columns).index(target_col)]
    return source[source_col].tolist(), target[target_col].tolist(), list(zip(left, right))


def join_scores(pairs: list[dict], golden: list[tuple[str, str]]) -> tuple[float, float, float]:
    gold = {tuple(sorted((s.lower(), t.lower()))) for s, t in golden}
    gold_values = {v for pair in gold for v in pair}
    joined = {tuple(sorted((p["source"].lower(), p["target"].lower()))) for p in pairs}
    joined = {pair for pair in joined if pair[0] in gold_values or pair[1] in gold_values}
    hits = len(joined & gold)
    precision = hits / len(joined) if joined else 1.0
    recall = hits / len(gold) if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def coverage_scores(result: dict, golden: list[tuple[str, str]]) -> tuple[float, float]:
    pairs = [(normalize_value(s), normalize_value(t)) for s, t in golden]
    pairs = [(s, t) if result["direction"] == "forward" else (t, s) for s, t in pairs if s and t]
    programs = [parse_program(entry["program"]) for entry in result["transformations"]]
    if not pairs or not programs:
        return 0.0, 0.0
    covered = [[apply_program(program, s) == t for s, t in pairs] for program in programs]
    top = sum(covered[0]) / len(pairs)
    union = sum(any(column) for column in zip(*covered)) / len(pairs)
    return top, union


def method_params(dataset: str, method: str) -> dict:
    """learn_and_join overrides that turn the method's preset into the dataset's setting."""
    setting = SETTINGS.get((dataset, method))
    if setting is None:
        return {}
    return {
        name: value for name, value in dataclasses.asdict(setting).items() if getattr(METHODS[method], name) != value
    }


def load_cases(dataset: str, limit: int | None) -> list[tuple[str, list[str], list[str], list[tuple[str, str]]]]:
    """(category, source, target, golden) of each case of one dataset, at most ``limit``."""
    if dataset == "generated":
        sys.path.insert(0, str(Path(__file__).parent))
        import reformat_cases

        built = reformat_cases.cases()
        if limit is not None:  # a few of each category
            built = [
                case
                for category in ("string", "number", "date")
                for case in [c for c in built if c.category == category][:limit]
            ]
        return [(case.category, case.source, case.target, case.golden) for case in built]
    folders = sorted(path for path in DATASETS[dataset].iterdir() if path.is_dir())[:limit]
    return [("string", *load_case(folder)) for folder in folders]


def run(datasets: list[str], methods: list[str], limit: int | None) -> list[dict]:
    rows = []
    for dataset in datasets:
        cases = load_cases(dataset, limit)
        for method in methods:
            per_case: dict[str, list[tuple]] = {}
            for category, source, target, golden in cases:
                cpu = time.process_time()
                result = learn_and_join(source, target, method=method, **method_params(dataset, method))
                cpu = time.process_time() - cpu
                per_case.setdefault(category, []).append(
                    (*coverage_scores(result, golden), *join_scores(result["pairs"], golden), result["seconds"], cpu)
                )
            for category, scores in per_case.items():
                means = [statistics.fmean(column) for column in zip(*scores)]
                rows.append(
                    dict(
                        zip(
                            ["dataset", "category", "method", "cases", "top", "cover", "P", "R", "F1", "seconds"],
                            [dataset, category, method, len(scores), *means],
                        )
                    )
                    | {"cpu": means[-1], "median_s": statistics.median(score[-2] for score in scores)}
                )
            print(f"  done {dataset} {method}", file=sys.stderr, flush=True)
    return rows


def baseline_rows(checkout: Path, datasets: list[str], limit: int | None) -> list[dict]:
    """The same benchmark run with ``checkout``'s library (its methods among cst, cst+, autojoin)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "include")}
    probe = "from lakejoin.transform import METHODS; print(','.join(m for m in METHODS if m != 'cst++'))"
    methods = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    argv = [sys.executable, __file__, "--json", "--methods", methods, "--datasets", ",".join(datasets)]
    if limit is not None:
        argv.append("--quick")
    return json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)


def print_table(rows: list[dict], old: list[dict]) -> None:
    print(f"machine: {platform.machine()} {platform.system()}, python {platform.python_version()}")
    old_f1 = {(row["dataset"], row["category"], row["method"]): row["F1"] for row in old}
    header = (
        f"{'dataset':<12} {'category':<8} {'method':<9} {'cases':>5} {'top cov':>8} {'cover cov':>9} {'P':>6} "
        f"{'R':>6} {'F1':>6} {'old F1':>6} {'s/table':>8} {'median s':>8} {'cpu s':>6}  paper (top, F1, s)"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        paper = PAPER.get(row["dataset"], {}).get(row["method"], ("", "", ""))
        before = old_f1.get((row["dataset"], row["category"], row["method"]))
        print(
            f"{row['dataset']:<12} {row['category']:<8} {row['method']:<9} {row['cases']:>5} {row['top']:>8.3f} "
            f"{row['cover']:>9.3f} {row['P']:>6.3f} {row['R']:>6.3f} {row['F1']:>6.3f} "
            f"{'' if before is None else f'{before:.3f}':>6} {row['seconds']:>8.3f} {row['median_s']:>8.3f} "
            f"{row['cpu']:>6.3f}  {paper}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="first 5 cases of each dataset (of each category)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}")
    parser.add_argument("--datasets", default="web,spreadsheet,generated")
    parser.add_argument("--baseline", type=Path, help="a checkout (git worktree) whose library gives the old F1")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (used by --baseline)")
    args = parser.parse_args(argv)
    datasets = args.datasets.split(",")
    unknown = [name for name in datasets if name not in DATASETS]
    missing = [
        str(DATASETS[name])
        for name in datasets
        if name not in unknown and DATASETS[name] is not None and not DATASETS[name].is_dir()
    ]
    if unknown or missing:
        raise SystemExit(f"unknown datasets {unknown} or benchmark folders not found: {missing}")
    limit = 5 if args.quick else None
    rows = run(datasets, args.methods.split(","), limit)
    if args.json:
        print(json.dumps(rows))
        return
    print_table(rows, baseline_rows(args.baseline, datasets, limit) if args.baseline else [])


if __name__ == "__main__":
    run_with_docs(main)
