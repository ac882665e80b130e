"""Quick browsing and Block, [ICDE] Algorithm 1 (notes/pexeso.md §2.6).

Block is a hierarchical block nested-loop join of the query grid ``HG_Q`` with the repository
grid ``HG_RV``, descending both in lock-step. Here it runs level by level over arrays of cell
pairs instead of recursively, which visits the same pairs:

- non-leaf pairs: Lemma 6 turns a pair into matches (every query vector under ``c_Q`` with
  every leaf under ``c_R``); otherwise Lemma 4 prunes it or it descends to the children pairs;
- leaf pairs: per query vector, Lemma 5 gives matching pairs, Lemma 3 candidate pairs.

Output is ⟨query vector, leaf cell⟩ pairs, so columns that share a leaf share the work.
Same-key leaf pairs are left out: quick browsing (Algorithm 3) takes them first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lakejoin.index.pexeso.grid import HierarchicalGrid, cross_ranges
from lakejoin.index.pexeso.lemmas import lemma3_survives, lemma4_survives, lemma5_matches, lemma6_matches


@dataclass(frozen=True)
class Pairs:
    """⟨query vector, leaf cell⟩ pairs (indices into the sorted query vectors and the leaves)."""

    query: np.ndarray
    leaf: np.ndarray

    @classmethod
    def concat(cls, parts: list[tuple[np.ndarray, np.ndarray]]) -> Pairs:
        """The pairs of ``parts`` (each a query and a leaf index array) as one, in order; no parts: none."""
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))
        return cls(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def csr(self, n_query: int) -> tuple[np.ndarray, np.ndarray]:
        """Leaves grouped by query vector: ``leaf[ptr[q]:ptr[q+1]]`` belong to ``q``."""
        order = np.argsort(self.query, kind="stable")
        ptr = np.searchsorted(self.query[order], np.arange(n_query + 1), side="left").astype(np.int64)
        return ptr, self.leaf[order].astype(np.int64)


@dataclass(frozen=True)
class BlockResult:
    """The (query vector, leaf) pairs blocking sorted into matching, browsed and candidate pairs."""

    matching: Pairs  # mPair: Lemmas 5 and 6, every vector of the leaf matches
    browsing: Pairs  # quick browsing: the leaf with the query vector's own key
    candidate: Pairs  # cPair: survivors of Lemmas 3 and 4, verified one vector at a time
    examined: int  # cell pairs and (vector, leaf) pairs the lemmas tested: blocking's work


def quick_browse(query_grid: HierarchicalGrid, repo_grid: HierarchicalGrid) -> Pairs:
    """Query vectors whose leaf key exists in ``HG_RV``, paired with that leaf (Algorithm 3)."""
    q_leaves, r_leaves = query_grid.leaves, repo_grid.leaves
    at = np.searchsorted(r_leaves.keys, q_leaves.keys)
    found = at < len(r_leaves.keys)
    found[found] = r_leaves.keys[at[found]] == q_leaves.keys[found]
    hit = np.flatnonzero(found)
    query, leaf = cross_ranges(q_leaves.start[hit], q_leaves.end[hit], at[hit], at[hit] + 1)
    return Pairs(query, leaf)


def block(
    query_grid: HierarchicalGrid,
    query_mapped: np.ndarray,
    repo_grid: HierarchicalGrid,
    tau: float,
    eps: float,
    use_matching: bool = True,
) -> BlockResult:
    """Algorithm 1 from the roots of both grids; ``use_matching=False`` drops Lemmas 5 and 6."""
    top_q, top_r = query_grid.levels[0], repo_grid.levels[0]
    a = np.repeat(np.arange(len(top_q.keys)), len(top_r.keys))
    b = np.tile(np.arange(len(top_r.keys)), len(top_q.keys))
    matching: list[tuple[np.ndarray, np.ndarray]] = []
    examined = 0
    for level in range(1, query_grid.m + 1):
        cq, cr = query_grid.levels[level - 1], repo_grid.levels[level - 1]
        examined += len(a)
        keep = lemma4_survives(cq.lo[a], cq.hi[a], cr.lo[b], cr.hi[b], tau, eps)
        a, b = a[keep], b[keep]
        if level == query_grid.m:
            break
        if use_matching:
            whole = lemma6_matches(cr.hi[b], cq.hi[a], tau, eps)
            leaf_lo, leaf_hi = repo_grid.leaf_range(level, b[whole])
            matching.append(cross_ranges(cq.start[a[whole]], cq.end[a[whole]], leaf_lo, leaf_hi))
            a, b = a[~whole], b[~whole]
        a, b = cross_ranges(cq.child_start[a], cq.child_end[a], cr.child_start[b], cr.child_end[b])
    leaves_q, leaves_r = query_grid.leaves, repo_grid.leaves
    different = leaves_q.keys[a] != leaves_r.keys[b]
    a, b = a[different], b[different]
    query, leaf = cross_ranges(leaves_q.start[a], leaves_q.end[a], b, b + 1)
    q_mapped = query_mapped[query]
    candidate = np.ones(len(query), dtype=bool)
    if use_matching:
        whole = lemma5_matches(leaves_r.hi[leaf], q_mapped, tau, eps)
        matching.append((query[whole], leaf[whole]))
        candidate = ~whole
    candidate &= lemma3_survives(leaves_r.lo[leaf], leaves_r.hi[leaf], q_mapped, tau, eps)
    return BlockResult(
        matching=Pairs.concat(matching),
        browsing=quick_browse(query_grid, repo_grid),
        candidate=Pairs(query[candidate], leaf[candidate]),
        examined=examined + len(query),
    )
