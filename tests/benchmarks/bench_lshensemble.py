"""LSH Ensemble: lakejoin vs ``datasketch.MinHashLSHEnsemble``, side by side on one lake.

Both indexes get the same MinHash permutations (identical signatures: checked), the same size
partitions (ours, handed to datasketch in place of its own DP), the same containment threshold
and the same FP/FN weights of Eq. 2.26, in two settings: datasketch's default 0.5/0.5 and ours
0.1/0.9. The weights are the same numbers, not the same trade-off: datasketch weighs the raw
integrals of Eqs. 2.23-2.24, lakejoin the error rates (each integral over its range's length,
see ``lakejoin.index.lshensemble.tuning``), which at high t* leans much further toward recall.
Accuracy is measured before verification against an exact oracle (an inverted index over
integer-encoded sets), the query column itself left out.

Queries run interleaved, one query through every method before the next (the order rotating),
so machine load hits all methods alike. Times are end to end from the query's distinct values:
datasketch hashes them into a ``MinHash`` (permutations drawn once, reused) and its ``query``
generator is drained into a list;
lakejoin normalizes and hashes them, and either ``candidates`` returns the same keys (an
array, turned into a list) or ``search`` returns ranked dicts with containment estimates
(the bench reads their keys after the timed call: a consumer's work, not the search's). Every
method runs on one thread, so CPU time (``time.thread_time``) is reported beside wall time and
is what the speed verdict uses. Also timed: an incremental insert of 1% new columns against a
full build.

    .venv/bin/python tests/benchmarks/bench_lshensemble.py            # 100,000 sets, num_perm 64
    .venv/bin/python tests/benchmarks/bench_lshensemble.py --quick    # 10,000 sets, num_perm 256

Memory decides the default num_perm: datasketch keeps a Python bytes key and a Python set per
(set, band) for every r = 1..4 in each partition, about 1.45 GiB per 10,000 sets at 256
permutations (measured), so 100,000 sets need ~15 GiB at 256, ~7 GiB at 128 and ~3.6 GiB at
64. The 100,000-set default (64) keeps datasketch under 5 GiB; ``--num-perm`` overrides it.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
from collections.abc import Callable
from functools import lru_cache

import datasketch
import datasketch.lshensemble
import numpy as np
import pandas as pd
from report import run_with_docs

from lakejoin.index.lshensemble import build_in_memory, load
from lakejoin.index.lshensemble.lsh import MAX_DEPTH
from lakejoin.index.lshensemble.search import DEFAULT_WEIGHTS
from lakejoin.index.lshensemble.tables import signature_matrix
from lakejoin.testing.oracles import containment_search
from lakejoin.testing.synthetic import plant_joinable, set_lake

EQUAL_WEIGHTS = (0.5, 0.5)  # datasketch's default weights
GOAL_SPEEDUP = 3.0


class ExactOracle:
    """Exact containment of a query in every set, via postings of integer token ids."""

    def __init__(self, sets: list[list[str]]) -> None:
        flat = [t for s in sets for t in s]
        codes, self.vocab = pd.factorize(pd.Index(flat))
        set_of = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
        order = np.argsort(codes, kind="stable")
        self.postings = set_of[order]
        self.starts = np.searchsorted(codes[order], np.arange(len(self.vocab) + 1))
        self.num_sets = len(sets)

    def answer(self, query: list[str], threshold: float) -> set[int]:
        ids = self.vocab.get_indexer(query)
        ids = ids[ids >= 0]
        hits = np.concatenate([self.postings[self.starts[i] : self.starts[i + 1]] for i in ids])
        overlap = np.bincount(hits, minlength=self.num_sets)
        return set(np.flatnonzero(overlap / len(query) >= threshold).tolist())


def accuracy(answers: list[set[int]], truths: list[set[int]]) -> tuple[float, float]:
    """Mean recall over queries with a non-empty truth, mean precision over non-empty answers."""
    recalls = [len(a & t) / len(t) for a, t in zip(answers, truths) if t]
    precisions = [len(a & t) / len(a) for a, t in zip(answers, truths) if a]
    return float(np.mean(recalls)), float(np.mean(precisions)) if precisions else 1.0


def timed(fn: Callable):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def rss_gib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**30


def datasketch_minhash(values: list[str], num_perm: int) -> datasketch.MinHash:
    """``MinHash(num_perm, seed=1)`` of the values; the permutations are drawn once and reused
    (drawing them costs ~1 ms per MinHash, more than a whole lakejoin query)."""
    m = datasketch.MinHash(num_perm, seed=1, permutations=_permutations(num_perm), scheme="affine32")
    m.update_batch([v.encode("utf-8") for v in values])
    return m


@lru_cache(maxsize=4)
def _permutations(num_perm: int) -> np.ndarray:
    return datasketch.MinHash(num_perm, seed=1).permutations


def interleaved(
    methods: dict[str, Callable], queries: list[list[str]], keys_of: dict[str, Callable] | None = None
) -> dict[str, dict]:
    """Answers (the returned keys), wall and thread-CPU seconds of every method on every query,
    round-robin.

    Only the call is timed. Reading the keys out of a result (``keys_of``, default: the result
    itself) and freeing the result come after: freed on the next call's assignment, one
    method's garbage would be timed as the next method's.
    """
    keys_of = keys_of or {}
    out = {name: {"answers": [], "wall": [], "cpu": []} for name in methods}
    names = list(methods)
    for i, values in enumerate(queries):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            wall, cpu = time.perf_counter(), time.thread_time()
            found = methods[name](values)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            out[name]["answers"].append(keys_of.get(name, lambda result: result)(found))
            del found
            out[name]["wall"].append(wall)
            out[name]["cpu"].append(cpu)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 sets, 100 queries, num_perm 256")
    parser.add_argument("--sets", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--thresholds", default="0.5,0.8")
    parser.add_argument(
        "--num-perm", type=int, default=None, help="default: 256 with --quick, else 64 (memory, see above)"
    )
    parser.add_argument("--num-part", type=int, default=32)
    parser.add_argument("--shape", default="opendata", choices=["opendata", "webtable"])
    args = parser.parse_args()
    n_sets = args.sets or (10_000 if args.quick else 100_000)
    n_queries = args.queries or (100 if args.quick else 300)
    num_perm = args.num_perm or (256 if args.quick else 64)
    thresholds = [float(t) for t in args.thresholds.split(",")]

    lake = set_lake(args.shape, n_sets, seed=1, max_size=5000)
    planted = plant_joinable(lake, n_queries, containments=(0.3, 0.5, 0.7, 0.85, 1.0), seed=1, min_query_size=10)
    query_ids = [p.query_index for p in planted]
    queries = [lake[q] for q in query_ids]
    sets = dict(enumerate(lake))
    sizes = np.array([len(s) for s in lake])
    print(
        f"lake: {n_sets:,} sets ({args.shape} shape), {sizes.sum():,} tokens, set size p50/p99/max "
        f"{np.percentile(sizes, 50):.0f}/{np.percentile(sizes, 99):.0f}/{sizes.max()}; {n_queries} queries "
        f"(sizes p50/max {np.percentile([len(q) for q in queries], 50):.0f}/{max(len(q) for q in queries)}); "
        f"num_perm={num_perm}, num_part={args.num_part}, max r={MAX_DEPTH}"
    )

    # --- builds (both: hash every set, then index) ---
    tables, ours_build_s = timed(lambda: build_in_memory(sets, num_perm, args.num_part))
    searchers, ours_load_s = timed(lambda: {w: load(tables, weights=w) for w in (EQUAL_WEIGHTS, DEFAULT_WEIGHTS)})  # noqa: F821 (runs before the `del` below)
    ours_load_s /= 2
    bounds = list(zip(tables["partitions"]["lower"].to_pylist(), tables["partitions"]["upper"].to_pylist()))
    signatures = signature_matrix(tables["signatures"]["minhash"])
    row_of = {cid: i for i, cid in enumerate(tables["signatures"]["column_id"].to_pylist())}
    ds_minhashes, ds_hash_s = timed(lambda: [datasketch_minhash(s, num_perm) for s in lake])
    same = all(
        np.array_equal(ds_minhashes[i].hashvalues, signatures[row_of[i]])
        for i in range(0, n_sets, max(1, n_sets // 500))
    )
    print(f"datasketch signatures equal ours on sampled sets: {same}")
    del signatures

    oracle = ExactOracle(lake)
    check = containment_search(queries[0], {i: set(s) for i, s in enumerate(lake)}, thresholds[0])
    assert set(check) == oracle.answer(queries[0], thresholds[0]), "oracle mismatch"

    # datasketch computes its partitions with its own DP; hand it ours so both index the same partitions.
    datasketch.lshensemble.optimal_partitions = lambda _sizes, _counts, _n: bounds
    rows, ds_index = [], {}
    for threshold in thresholds:
        truths = [oracle.answer(values, threshold) - {q} for values, q in zip(queries, query_ids)]
        for weights, ours in searchers.items():
            gc.collect()
            before = rss_gib()
            ensemble = datasketch.MinHashLSHEnsemble(
                threshold=threshold, num_perm=num_perm, num_part=len(bounds), m=MAX_DEPTH, weights=weights
            )
            _, ds_index_s = timed(lambda: ensemble.index([(i, ds_minhashes[i], int(sizes[i])) for i in range(n_sets)]))  # noqa: B023, F821 (called at once, in this iteration, before the `del`)
            ds_index[threshold, weights] = (ds_index_s, rss_gib() - before)
            methods = {
                "ds": lambda v: list(ensemble.query(datasketch_minhash(v, num_perm), len(v))),  # noqa: B023, F821 (the lambdas are used within this iteration only)
                "ours_keys": lambda v: ours.candidates(v, threshold).tolist(),  # noqa: B023
                "ours_search": lambda v: ours.search(v, threshold),  # noqa: B023
            }
            keys_of = {"ours_search": lambda results: [r["column_id"] for r in results]}
            interleaved(methods, queries[:5], keys_of)  # warm numba and the caches of both
            runs = interleaved(methods, queries, keys_of)
            del ensemble
            assert all(set(a) == set(b) for a, b in zip(runs["ours_keys"]["answers"], runs["ours_search"]["answers"]))
            row = {"threshold": threshold, "weights": weights}
            for name, run in runs.items():
                answers = [set(a) - {q} for a, q in zip(run["answers"], query_ids)]
                row[name] = (
                    *accuracy(answers, truths),
                    *np.percentile(run["wall"], [50, 95]) * 1e3,
                    *np.percentile(run["cpu"], [50, 95]) * 1e3,
                    ds_hash_s + ds_index_s if name == "ds" else ours_build_s + ours_load_s,
                )
            rows.append(row)
    print_table(rows, ours_build_s, ours_load_s, ds_hash_s, ds_index)
    del ds_minhashes, searchers, tables
    gc.collect()
    incremental_insert(sets, num_perm, args.num_part)


def print_table(rows: list[dict], ours_build_s: float, ours_load_s: float, ds_hash_s: float, ds_index: dict) -> None:
    labels = {
        "ds": "datasketch query -> list",
        "ours_keys": "lakejoin candidates -> list",
        "ours_search": "lakejoin search (estimates)",
    }
    index_notes = ", ".join(
        f"t*={t} w={w[0]}/{w[1]}: {s:.1f} s, +{g:.2f} GiB RSS" for (t, w), (s, g) in ds_index.items()
    )
    print(
        f"\nbuild: lakejoin signatures+partitions+sets {ours_build_s:.1f} s + load (forest) {ours_load_s:.1f} s; "
        f"datasketch MinHash {ds_hash_s:.1f} s + index per threshold and weights ({index_notes}); "
        f"peak RSS {peak_rss_gib():.1f} GiB"
    )
    print(
        "w = (w_fp, w_fn) of Eq. 2.26, the same for both in a block (datasketch's default 0.5/0.5, ours 0.1/0.9; "
        "datasketch weighs FP/FN integrals, lakejoin FP/FN rates); "
        "wall = perf_counter, cpu = thread_time (all methods single-threaded); ms per query; build = hash + index\n"
    )
    header = (
        f"{'t*':>4} | {'w':>7} | {'method':<28} | {'recall':>6} | {'prec.':>6} | {'p50 wall':>8} | {'p95 wall':>8} | "
        f"{'p50 cpu':>8} | {'p95 cpu':>8} | {'build s':>7}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for row in rows:
        ds, w = row["ds"], f"{row['weights'][0]}/{row['weights'][1]}"
        for name, label in labels.items():
            r = row[name]
            print(
                f"{row['threshold']:>4} | {w:>7} | {label:<28} | {r[0]:6.3f} | {r[1]:6.3f} | {r[2]:8.2f} | "
                f"{r[3]:8.2f} | {r[4]:8.2f} | {r[5]:8.2f} | {r[6]:7.1f}"
            )
        for name in ("ours_keys", "ours_search"):
            r = row[name]
            print(
                f"{'':>4} | {'':>7} | {'ratio ' + name + '/ds':<28} | {r[0] / ds[0]:6.2f} | {r[1] / ds[1]:6.2f} | "
                f"{r[2] / ds[2]:8.2f} | {r[3] / ds[3]:8.2f} | {r[4] / ds[4]:8.2f} | {r[5] / ds[5]:8.2f} | "
                f"{r[6] / ds[6]:7.2f}"
            )
            met = r[0] >= ds[0] and r[4] * GOAL_SPEEDUP <= ds[4]
            verdicts.append(
                f"t*={row['threshold']} w={w} {name}: recall {r[0]:.4f} vs {ds[0]:.4f}, p50 cpu {r[4] / ds[4]:.2f}x, "
                f"p50 wall {r[2] / ds[2]:.2f}x -> {'met' if met else 'NOT met'}"
            )
    print(
        "\ngoal (recall >= datasketch's and p50 CPU time <= 1/3 of datasketch's), same weights:\n  "
        + "\n  ".join(verdicts)
    )
    defaults = []
    for threshold in dict.fromkeys(row["threshold"] for row in rows):
        by_weights = {row["weights"]: row for row in rows if row["threshold"] == threshold}
        if {EQUAL_WEIGHTS, DEFAULT_WEIGHTS} <= by_weights.keys():
            ds, ours = by_weights[EQUAL_WEIGHTS]["ds"], by_weights[DEFAULT_WEIGHTS]
            for name in ("ours_keys", "ours_search"):
                r = ours[name]
                met = r[0] >= ds[0] and r[4] * GOAL_SPEEDUP <= ds[4]
                defaults.append(
                    f"t*={threshold} {name}: recall {r[0]:.4f} vs {ds[0]:.4f}, precision {r[1]:.4f} vs {ds[1]:.4f}, "
                    f"p50 cpu {r[4] / ds[4]:.2f}x -> {'met' if met else 'NOT met'}"
                )
    if defaults:
        print("each with its default weights (lakejoin 0.1/0.9, datasketch 0.5/0.5):\n  " + "\n  ".join(defaults))


def incremental_insert(sets: dict[int, list[str]], num_perm: int, num_part: int) -> None:
    """An insert of 1% new columns into the previous snapshot's tables vs a full build."""
    new_ids = set(range(0, len(sets), 100))
    old = {c: v for c, v in sets.items() if c not in new_ids}
    previous = build_in_memory(old, num_perm, num_part)
    full, full_s = timed(lambda: build_in_memory(sets, num_perm, num_part))
    incremental, inc_s = timed(
        lambda: build_in_memory({c: sets[c] for c in new_ids}, num_perm, num_part, previous=previous)
    )
    assert incremental["signatures"].sort_by("column_id").equals(full["signatures"])
    assert incremental["partitions"].equals(full["partitions"])
    _, load_s = timed(lambda: load(incremental))
    print(
        f"\nincremental insert of {len(new_ids):,} columns (1%): {inc_s:.2f} s vs full build {full_s:.2f} s = "
        f"{inc_s / full_s:.1%} (either snapshot then loads in {load_s:.1f} s)"
    )


if __name__ == "__main__":
    run_with_docs(main)
