"""LSH Ensemble: lakejoin vs ``datasketch.MinHashLSHEnsemble``, side by side on one lake.

Both indexes get the same MinHash permutations (identical signatures: checked), the same size
partitions (ours, handed to datasketch in place of its own DP) and the same containment
threshold. Accuracy is measured before verification against an exact oracle (an inverted index
over integer-encoded sets), the query column itself left out; query times are end to end from
the query's values (lakejoin also normalizes them). Also timed: an incremental insert of 1% new
columns against a full build.

    .venv/bin/python tests/benchmarks/bench_lshensemble.py            # 100,000 sets
    .venv/bin/python tests/benchmarks/bench_lshensemble.py --quick    # 10,000 sets
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

import datasketch
import datasketch.lshensemble
import numpy as np
import pandas as pd

from lakejoin.index.lshensemble import build_in_memory, load
from lakejoin.index.lshensemble.lsh import MAX_DEPTH
from lakejoin.index.lshensemble.search import DEFAULT_WEIGHTS
from lakejoin.index.lshensemble.tables import signature_matrix
from lakejoin.testing.oracles import containment_search
from lakejoin.testing.synthetic import plant_joinable, set_lake


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
    recalls = [len(a & t) / len(t) for a, t in zip(answers, truths) if t]
    precisions = [len(a & t) / len(a) for a, t in zip(answers, truths) if a]
    return float(np.mean(recalls)), float(np.mean(precisions)) if precisions else 1.0


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 sets, 100 queries")
    parser.add_argument("--sets", type=int, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--thresholds", default="0.5,0.8")
    parser.add_argument("--num-perm", type=int, default=256)
    parser.add_argument("--num-part", type=int, default=32)
    parser.add_argument("--shape", default="opendata", choices=["opendata", "webtable"])
    args = parser.parse_args()
    n_sets = args.sets or (10_000 if args.quick else 100_000)
    n_queries = args.queries or (100 if args.quick else 300)
    thresholds = [float(t) for t in args.thresholds.split(",")]

    lake = set_lake(args.shape, n_sets, seed=1, max_size=5000)
    planted = plant_joinable(lake, n_queries, containments=(0.3, 0.5, 0.7, 0.85, 1.0), seed=1, min_query_size=10)
    queries = [p.query_index for p in planted]
    sets = dict(enumerate(lake))
    sizes = np.array([len(s) for s in lake])
    print(
        f"lake: {n_sets:,} sets ({args.shape} shape), {sizes.sum():,} tokens, set size p50/p99/max "
        f"{np.percentile(sizes, 50):.0f}/{np.percentile(sizes, 99):.0f}/{sizes.max()}; {n_queries} queries; "
        f"num_perm={args.num_perm}, num_part={args.num_part}, max r={MAX_DEPTH}"
    )

    # --- builds ---
    tables, ours_sign_s = timed(lambda: build_in_memory(sets, args.num_perm, args.num_part))
    searcher, ours_load_s = timed(lambda: load(tables))
    bounds = list(zip(tables["partitions"]["lower"].to_pylist(), tables["partitions"]["upper"].to_pylist()))
    signatures = signature_matrix(tables["signatures"]["minhash"])  # row i = column_id i
    ds_minhashes, ds_sign_s = timed(
        lambda: [
            datasketch.MinHash(args.num_perm, seed=1, hashvalues=h, scheme="affine32")
            for h in (_ds_hashvalues(s, args.num_perm) for s in lake)
        ]
    )
    same = all(np.array_equal(ds_minhashes[i].hashvalues, signatures[i]) for i in range(0, n_sets, max(1, n_sets // 500)))
    print(f"datasketch signatures equal ours on sampled sets: {same}")

    oracle = ExactOracle(lake)
    check = containment_search(lake[queries[0]], {i: set(s) for i, s in enumerate(lake)}, thresholds[0])
    assert set(check) == oracle.answer(lake[queries[0]], thresholds[0]), "oracle mismatch"

    # datasketch computes its partitions with its own DP; hand it ours so both index the same partitions.
    datasketch.lshensemble.optimal_partitions = lambda _sizes, _counts, _n: bounds
    rows = []
    for threshold in thresholds:
        truths = [oracle.answer(lake[q], threshold) - {q} for q in queries]
        gc.collect()
        ensemble = datasketch.MinHashLSHEnsemble(threshold=threshold, num_perm=args.num_perm, num_part=len(bounds), m=MAX_DEPTH)
        _, ds_index_s = timed(lambda: ensemble.index([(i, ds_minhashes[i], int(sizes[i])) for i in range(n_sets)]))
        ds_answers, ds_times = [], []
        for q in queries:
            start = time.perf_counter()
            mh = datasketch.MinHash(args.num_perm, seed=1)
            mh.update_batch([v.encode("utf-8") for v in set(lake[q])])
            found = set(ensemble.query(mh, len(set(lake[q]))))
            ds_times.append(time.perf_counter() - start)
            ds_answers.append(found - {q})
        del ensemble
        gc.collect()
        row = {"threshold": threshold, "ds": (*accuracy(ds_answers, truths), *np.percentile(ds_times, [50, 95]) * 1e3, ds_sign_s + ds_index_s)}
        for label, weights in [("ours", DEFAULT_WEIGHTS), ("ours_eq", (0.5, 0.5))]:
            s = load(tables, weights=weights) if label == "ours_eq" else searcher
            for q in queries[:5]:  # warm the (b, r) cache cells and numba
                s.search(lake[q], threshold)
            answers, times = [], []
            for q in queries:
                start = time.perf_counter()
                found = {r["column_id"] for r in s.search(lake[q], threshold)}
                times.append(time.perf_counter() - start)
                answers.append(found - {q})
            row[label] = (*accuracy(answers, truths), *np.percentile(times, [50, 95]) * 1e3, ours_sign_s + ours_load_s)
        rows.append(row)

    print(f"\nbuild: ours signatures+partitions {ours_sign_s:.1f} s + load (forest) {ours_load_s:.1f} s; "
          f"datasketch MinHash {ds_sign_s:.1f} s + index (per threshold, in the table); peak RSS {rss_gib():.1f} GiB\n")
    header = f"{'t*':>4} | {'method':<28} | {'recall':>6} | {'prec.':>6} | {'p50 ms':>7} | {'p95 ms':>7} | {'build s':>7}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ds = row["ds"]
        for label, name in [("ds", "datasketch (w 0.5/0.5)"), ("ours", f"lakejoin (w {DEFAULT_WEIGHTS[0]}/{DEFAULT_WEIGHTS[1]})"), ("ours_eq", "lakejoin (w 0.5/0.5)")]:
            r = row[label]
            print(f"{row['threshold']:>4} | {name:<28} | {r[0]:6.3f} | {r[1]:6.3f} | {r[2]:7.2f} | {r[3]:7.2f} | {r[4]:7.1f}")
        for label in ("ours", "ours_eq"):
            r = row[label]
            print(f"{'':>4} | {'ratio ' + label + '/datasketch':<28} | {r[0] / ds[0]:6.2f} | {r[1] / ds[1]:6.2f} | "
                  f"{r[2] / ds[2]:7.2f} | {r[3] / ds[3]:7.2f} | {r[4] / ds[4]:7.2f}")

    # --- incremental insert of 1% new columns vs full build ---
    new_ids = set(range(0, n_sets, 100))
    old = {c: v for c, v in sets.items() if c not in new_ids}
    previous = build_in_memory(old, args.num_perm, args.num_part)
    _, full_s = timed(lambda: build_in_memory(sets, args.num_perm, args.num_part))
    incremental, inc_s = timed(
        lambda: build_in_memory({c: sets[c] for c in new_ids}, args.num_perm, args.num_part, previous=previous)
    )
    assert incremental["signatures"].equals(tables["signatures"])
    print(f"\nincremental insert of {len(new_ids):,} columns (1%): {inc_s:.2f} s vs full build {full_s:.2f} s "
          f"= {inc_s / full_s:.1%} (both then load the snapshot: {ours_load_s:.1f} s)")


def _ds_hashvalues(values: list[str], num_perm: int) -> np.ndarray:
    m = datasketch.MinHash(num_perm, seed=1)
    m.update_batch([v.encode("utf-8") for v in values])
    return m.hashvalues


if __name__ == "__main__":
    main()
