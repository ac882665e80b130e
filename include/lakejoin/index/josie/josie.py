"""JOSIE's searcher (Zhu et al., SIGMOD 2019; thesis Ch. 3): exact top-k joinable columns by overlap.

Given a query set Q and the lake's sets, return at most k sets X with |Q ∩ X| > 0 such that the
k-th overlap is ≥ that of every set left out (Definition 3.1.1); ranking by overlap equals
ranking by containment |Q ∩ X| / |Q| for a fixed query. :class:`JosieSearcher` holds one loaded
index (its arrays, ``arrays.py``), prepares a query against the shared token dictionary
(``dictionary.py``), fits the read costs of Eq. 3.15 and each plan's whole-query time on load
(``cost.py``, ``plans.py``) and runs, under one lock (a searcher's scratch arrays serve one query
at a time), the plan priced cheapest for the query: Algorithm 2 (``kernels.py``) or the thesis's
baselines MergeList-D and ProbeSet-D (``baselines.py``), which also run on their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from numba import typeof

from lakejoin.index.josie.arrays import ARRAYS, IndexArrays, arrays_from_tables, check_arrays
from lakejoin.index.josie.baselines import mergelist, probeset, timed_merge_reads
from lakejoin.index.josie.cost import ReadCost, fit_read_cost
from lakejoin.index.josie.dictionary import PreparedQuery, TokenDictionary, prepare, token_dictionary
from lakejoin.index.josie.kernels import fit_decision_cost, floor_heap, josie, matched_samples, timed_list_reads
from lakejoin.index.josie.plans import FIT_QUERIES, JOSIE, MERGELIST, NO_PLANS, PLAN_NAMES, fit_plans, size_class
from lakejoin.index.josie.reads import Scratch, TopK

MATCHED_SAMPLE = 5  # matched values shown per result


class JosieSearcher:
    """Exact top-k joinable-column search over one loaded JOSIE index.

    ``search`` runs JOSIE; ``search_mergelist`` and ``search_probeset`` run the thesis's
    baselines on the same arrays (for benchmarks and cross-checks). All three return the
    same result shape. One searcher serves one query at a time (a lock guards the shared
    scratch arrays); ``last_stats`` describes the latest query's reads.
    """

    def __init__(
        self,
        tables: Mapping[str, pa.Table],
        *,
        batch_size: int | None = None,
        read_cost: ReadCost | None = None,
        fit_samples: int = 1000,
        shared: TokenDictionary | None = None,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        missing = {"sets", "postings", *(() if shared is not None else ("tokens",))} - set(tables)
        if missing:
            raise ValueError(f"JOSIE index is missing tables: {sorted(missing)}")
        shared = shared if shared is not None else token_dictionary(tables["tokens"])
        self._hold(arrays_from_tables(tables["sets"], tables["postings"], shared.n_tokens))
        self._ready(shared, batch_size, read_cost, fit_samples)

    @classmethod
    def from_arrays(
        cls,
        arrays: Mapping[str, np.ndarray],
        *,
        shared: TokenDictionary,
        batch_size: int | None = None,
        read_cost: ReadCost | None = None,
        fit_samples: int = 1000,
    ) -> JosieSearcher:
        """The searcher whose :meth:`arrays` are ``arrays`` (e.g. memory-mapped from a shard's
        cache, ``lakejoin.query.shard_arrays``): nothing is sorted or grouped again. Raises
        ``ValueError`` when they do not have the shape of one searcher's arrays (a missing one, a
        wrong dtype, lengths or end offsets that disagree, a token past the dictionary)."""
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        check_arrays(arrays, shared.n_tokens)
        searcher = cls.__new__(cls)
        searcher._hold(arrays)
        searcher._ready(shared, batch_size, read_cost, fit_samples)
        return searcher

    def arrays(self) -> dict[str, np.ndarray]:
        """What this searcher holds besides its scratch space (:data:`ARRAYS`): writing them and
        :meth:`from_arrays` give the same searcher back."""
        return self._index._asdict()

    def _hold(self, arrays: Mapping[str, np.ndarray]) -> None:
        self._index = IndexArrays(**{name: arrays[name] for name in ARRAYS})

    def _ready(
        self, shared: TokenDictionary, batch_size: int | None, read_cost: ReadCost | None, fit_samples: int
    ) -> None:
        """The scratch arrays, the lock and the read costs, once the index arrays are set."""
        self.batch_size = batch_size
        self._dictionary = shared
        self._scratch = Scratch.allocate(len(self._index.set_ids), len(self._index.group))
        self._lock = threading.Lock()
        self._entries: dict[Any, Callable[..., int]] = {}  # compiled entry points by kernel (_call)
        self._last_held: tuple[PreparedQuery | None, np.ndarray] = (
            None,
            np.empty(0, np.int32),
        )  # _prepare's latest answer
        read_cost = read_cost or shared.read_cost
        if read_cost is None:
            read_cost = fit_read_cost(
                self._time_list_reads,
                self._time_merge_reads,
                np.diff(self._index.list_indptr),
                self._index.set_indptr,
                self._index.set_tokens,
                samples=fit_samples,
            )
            read_cost = read_cost._replace(d=fit_decision_cost(self._index, read_cost, samples=fit_samples))
            read_cost = read_cost._replace(plans=self._fit_plans(read_cost))
            shared.read_cost = read_cost  # the other shards' searchers of this index reuse it
        self.read_cost = read_cost
        self.last_stats: dict[str, object] = {}

    def _time_list_reads(self, tokens: np.ndarray, repeats: int) -> None:
        timed_list_reads(tokens, repeats, self._index, self._scratch)

    def _time_merge_reads(self, tokens: np.ndarray, repeats: int) -> None:
        timed_merge_reads(tokens, repeats, self._index, self._scratch)

    def _fit_plans(self, read_cost: ReadCost) -> tuple[int, ...]:
        """The plan of each size of query (``plans.fit_plans``), timed on sets of this index as
        queries: ``FIT_QUERIES`` of them, sizes spread log-uniformly over the index's (up to
        10,000 values, a long query's size)."""
        index, scratch = self._index, self._scratch
        sizes = np.diff(index.set_indptr)
        if not len(sizes) or sizes.max() < 1:  # no set to search as a query: JOSIE answers every query
            return NO_PLANS
        by_size = np.argsort(sizes, kind="stable")
        targets = np.geomspace(max(sizes.min(), 1), min(sizes.max(), 10_000), FIT_QUERIES)
        picked = np.unique(by_size[np.minimum(np.searchsorted(sizes[by_size], targets), len(sizes) - 1)])
        queries = [index.set_tokens[index.set_indptr[s] : index.set_indptr[s + 1]] for s in picked.tolist()]
        plans = (
            lambda q, top: josie(q, top.sets.shape[0], self.batch_size or 0, 0, read_cost, index, scratch, top),
            lambda q, top: mergelist(q, top.sets.shape[0], index, scratch, top),
            lambda q, top: probeset(q, top.sets.shape[0], index, scratch, top),
        )
        marked = [self._marked(plan) for plan in plans]
        return fit_plans((marked[0], marked[1], marked[2]), queries)

    def _marked(self, plan: Callable[[np.ndarray, TopK], int]) -> Callable[[np.ndarray, TopK], int]:
        """``plan`` with the query's tokens marked in the scratch while it runs."""
        mark = self._scratch.mark

        def run(q: np.ndarray, top: TopK) -> int:
            mark[q] = 1
            try:
                return plan(q, top)
            finally:
                mark[q] = 0

        return run

    @property
    def set_ids(self) -> np.ndarray:
        """Each set's ``set_id`` (the lake's column id), ascending: a result's set index points here."""
        return self._index.set_ids

    @property
    def num_sets(self) -> int:
        """How many sets (columns) the searcher holds."""
        return len(self.set_ids)

    def search(self, query: Iterable[str] | PreparedQuery, k: int = 10, *, floor: int = 0) -> list[dict]:
        """Top-k columns by overlap with ``query``'s distinct normalized values, by the plan
        timed fastest for its size on load (JOSIE, MergeList's or ProbeSet's, ``plans.py``; JOSIE may
        still finish MergeList's way): ``last_stats["plan"]`` says which;
        ``query`` may be :meth:`prepare`'s. With a ``floor`` (the k-th overlap other shards already
        found), only columns whose overlap reaches it are returned, and the search prunes by it
        from the start (:func:`josie`)."""
        return self._run("josie", query, k, floor)

    def held(self, query: Iterable[str] | PreparedQuery) -> int:
        """How many of the query's tokens this searcher holds lists for: no column here overlaps
        the query in more (an upper bound for a shard, known before searching it)."""
        return len(self._prepare(query)[1])

    def scratch_bytes(self) -> int:
        """The memory this searcher allocated for its queries; its index arrays (:meth:`arrays`)
        are the rest, and may be memory-mapped from the shard cache."""
        return sum(a.nbytes for a in self._scratch)

    def search_mergelist(self, query: Iterable[str], k: int = 10) -> list[dict]:
        """Same answer as :meth:`search`, computed by MergeList-D (Eq. 3.1)."""
        return self._run("mergelist", query, k)

    def search_probeset(self, query: Iterable[str], k: int = 10) -> list[dict]:
        """Same answer as :meth:`search`, computed by ProbeSet-D (Eq. 3.3)."""
        return self._run("probeset", query, k)

    def prepare(self, query: Iterable[str] | PreparedQuery) -> PreparedQuery:
        """``query`` normalized and looked up in the token dictionary, for :meth:`search` on this
        searcher and on every other one that shares its dictionary (the other shards of its
        index, ``shared``): a query searched shard by shard is prepared once. A query prepared
        with another dictionary is looked up again (its values are kept)."""
        return prepare(query, self._dictionary)

    def _prepare(self, query: Iterable[str] | PreparedQuery) -> tuple[PreparedQuery, np.ndarray]:
        """The prepared query and its tokens this searcher holds lists for, as local ids
        (ascending): tokens without a loaded list (in no loaded shard) match nothing, so a query
        holds exactly the tokens a build of these shards has."""
        prepared = self.prepare(query)
        last, held_ids = self._last_held
        if last is prepared:  # shard by shard, held() and then search() ask for the same query
            return prepared, held_ids
        global_ids = prepared.global_ids  # ascending, as token_of: the local ids come out ascending
        token_of = self._index.token_of
        local = np.minimum(np.searchsorted(token_of, global_ids), max(len(token_of) - 1, 0))
        held = (token_of[local] == global_ids) if len(token_of) else np.zeros(len(global_ids), bool)
        self._last_held = found = (prepared, local[held].astype(np.int32))
        return found

    def _run(self, algorithm: str, query: Iterable[str] | PreparedQuery, k: int, floor: int = 0) -> list[dict]:
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        prepared, q = self._prepare(query)
        top = TopK(np.zeros(k, np.int64), np.full(k, -1, np.int64), np.zeros(5, np.int64))
        out_sets, out_overlaps, stats = top.sets, top.overlaps, top.stats
        mark = self._scratch.mark
        with self._lock:
            started, started_cpu = time.perf_counter(), time.thread_time()
            mark[q] = 1
            n = self._dispatch(algorithm, q, k, top, floor) if len(q) >= max(floor, 1) else 0
            elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
            found = out_sets[:n] >= 0  # a floor's placeholders left in the top-k are no sets
            sets, overlaps = out_sets[:n][found], out_overlaps[:n][found]
            # most shards asked under a floor find nothing: no compiled call for them
            samples = self._matched_samples(sets, prepared)
            results = [
                {
                    "column_id": column_id,
                    "overlap": overlap,
                    "containment": overlap / len(prepared.values),
                    "matched_sample": sample,
                }
                for column_id, overlap, sample in zip(self.set_ids[sets].tolist(), overlaps.tolist(), samples)
            ]
            mark[q] = 0
        self.last_stats = {
            "algorithm": algorithm,
            "plan": PLAN_NAMES[stats[4]],
            "query_size": len(prepared.values),
            "matched_tokens": len(q),
            "lists_read": int(stats[0]),
            "sets_read": int(stats[1]),
            "postings_read": int(stats[2]),
            "set_tokens_read": int(stats[3]),
            "seconds": elapsed,
            "cpu_seconds": elapsed_cpu,  # this thread's CPU time: robust to other processes
        }
        return sorted(results, key=lambda r: (-r["overlap"], r["column_id"]))

    def _dispatch(self, algorithm: str, q: np.ndarray, k: int, top: TopK, floor: int) -> int:
        """Run ``algorithm``; JOSIE's search runs the plan ``read_cost.plans`` names for the query's
        size (``plans.py``), a baseline's by the same call as the baseline's own, a floor's
        placeholders in the top-k first (``kernels.floor_heap``)."""
        index, scratch, k = self._index, self._scratch, int(k)
        plan = self.read_cost.plans[size_class(len(q))] if algorithm == "josie" else PLAN_NAMES.index(algorithm)
        if plan == JOSIE:
            return self._call(josie, q, k, self.batch_size or 0, int(floor), self.read_cost, index, scratch, top)
        top.stats[4] = plan
        start = floor_heap(top.overlaps, top.sets, k, floor) if floor > 1 else 0
        return self._call(mergelist if plan == MERGELIST else probeset, q, k, index, scratch, top, start)

    def _call(self, kernel: Any, *args: Any) -> int:
        """``kernel(*args)`` through its compiled entry point, looked up on the first call: numba's
        dispatcher works out the type of every argument on each call, the bundles' every field
        included, which costs several microseconds, a small query's whole search, and a
        searcher's arguments keep their types (its arrays, its read costs, int32 token ids, int
        scalars, int64 top-k arrays). Every algorithm is called this way, so their times compare."""
        entry = self._entries.get(kernel)
        if entry is not None:
            return entry(*args)
        result = kernel(*args)  # compiles, or loads from the cache, the version for these types
        compiled = kernel.overloads.get(tuple(typeof(arg) for arg in args))
        self._entries[kernel] = compiled.entry_point if compiled is not None else kernel
        return result

    def _matched_samples(self, sets: np.ndarray, prepared: PreparedQuery) -> list[list[str]]:
        """Up to ``MATCHED_SAMPLE`` query values each of ``sets`` holds, looked up all at once
        (most shards asked under a floor find nothing: no compiled call for them)."""
        if not len(sets):
            return []
        tokens = matched_samples(sets, self._index, self._scratch.mark, MATCHED_SAMPLE)
        held = tokens >= 0
        positions = np.searchsorted(prepared.global_ids, self._index.token_of[tokens[held]]).tolist()
        values = iter([prepared.value_of(p) for p in positions])
        return [[next(values) for _ in range(count)] for count in held.sum(axis=1).tolist()]


def to_arrays(searcher: JosieSearcher) -> dict[str, np.ndarray]:
    """The searcher's :data:`ARRAYS` (family shape, ``lakejoin.index``)."""
    return searcher.arrays()


def from_arrays(arrays: Mapping[str, np.ndarray], *, shared: TokenDictionary, **params: Any) -> JosieSearcher:
    """The searcher :func:`to_arrays` was given (family shape, ``lakejoin.index``); ``params`` as
    for :func:`load`."""
    return JosieSearcher.from_arrays(arrays, shared=shared, **params)


def load(tables: Mapping[str, pa.Table], **params: Any) -> JosieSearcher:
    """Build the in-memory searcher from the ``tokens``/``sets``/``postings`` tables.

    ``params``: ``batch_size`` (a fixed λ for every query; default: chosen per query, about
    ``DECISIONS_PER_QUERY`` decision points each), ``read_cost`` (a :class:`ReadCost` to skip
    fitting), ``fit_samples`` (sets and lists timed by the cost fit, default 1,000), ``shared``
    (the index's :class:`TokenDictionary`, from :func:`shared`: then ``tokens`` is not read, and
    the read costs it holds are reused).
    """
    return JosieSearcher(tables, **params)
