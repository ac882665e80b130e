"""Choosing ``|P|`` and ``m`` with the paper's cost model ([ICDE] §III-F; notes §2.7).

The paper counts distance computations, the dominant search cost:

    E = Σ_{q ∈ C} N(SQR(q', τ))                                                   (1)

with ``C`` one query vector per candidate pair that blocking (no verification) produces and
``N`` estimated per pivot dimension from the coordinate histograms (Eq. 2). Read literally,
Eq. (1) charges every pair the whole query region, so each extra cell the region spans adds
a full region's worth of cost and the coarsest grid always wins (on our lakes it picked
``|P| = 1, m = 2``). We keep the model's structure (blocking on a sampled workload, no
verification) but charge each candidate pair ⟨q, c⟩ what Verify actually spends on it:

    E = Σ_{⟨q,c⟩ ∈ C} ( |c ∩ SQR(q', τ)| + |c|·|P|/min(d, 16) + 1 ) + |Q|·|P| + B

- ``|c ∩ SQR|``: vectors of leaf ``c`` that pass Lemma 1, each an exact distance;
- ``|c|·|P|/min(d, 16)``: the Lemma 1 test of every vector of ``c``, against what a far pair's
  distance costs (its head, ``FAR_PAIR_DIMENSIONS``);
- ``1``: the posting lookup of the pair; ``|Q|·|P|``: pivot mapping of the query;
- ``B``: the cell pairs (every level) and vector–leaf pairs Block tests, one unit each. The
  paper leaves blocking out as negligible; it is not once ``|P|·m`` is large, when a level
  has up to ``2^|P|`` children per cell (and many pivots pay off in high dimensions).

Counts are exact on the sample (a miniature of the repository). Workload as the paper
suggests: sampled vectors as queries, ``τ`` spread over 0–10 % of the maximum distance
(``T`` does not affect blocking). The paper minimises over a continuous ``m`` by gradient
descent and rounds up; over the few integer ``m`` (and ``|P|``, which the paper tuned by
hand) the objective is evaluated exactly instead.
"""

from collections.abc import Sequence

import numpy as np

from lakejoin.index.pexeso.block import block
from lakejoin.index.pexeso.grid import MAX_KEY_BITS, HierarchicalGrid, cross_ranges, leaf_keys
from lakejoin.index.pexeso.lemmas import tolerance
from lakejoin.index.pexeso.pivots import map_to_pivot_space
from lakejoin.index.pexeso.projection import HEAD_DIMENSIONS

TAU_FRACTIONS = (0.03, 0.06, 0.09)
LEVEL_CHOICES = tuple(range(2, 9))
# |P| tried: the paper's 1–9 and more. In 384-d text embeddings distances to a pivot crowd
# into a narrow band, so each pivot filters little and Lemma 1 needs many of them.
PIVOT_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24)
WORKLOAD_SIZE = 128
# A far pair's distance is settled by its 16-value principal-axis head (``projection.py``), so a
# Lemma 1 test costs |P|/16 of a distance computation, not |P|/d, in high dimensions.
FAR_PAIR_DIMENSIONS = HEAD_DIMENSIONS


def sorted_grid(mapped: np.ndarray, lo: np.ndarray, hi: np.ndarray, levels: int) -> tuple[HierarchicalGrid, np.ndarray]:
    """A grid over ``mapped`` (sorted by leaf key) and the sort order."""
    keys = leaf_keys(mapped, lo, hi, levels)
    order = np.argsort(keys, kind="stable")
    return HierarchicalGrid(keys[order], mapped[order], mapped.shape[1], levels), order


def estimated_cost(
    sample_mapped: np.ndarray, dim: int, levels: int, max_distance: float, workload: np.ndarray
) -> float:
    """The cost E above, summed over the workload's τ values."""
    n_pivots = sample_mapped.shape[1]
    lo, hi = sample_mapped.min(axis=0), sample_mapped.max(axis=0)
    eps = tolerance(float(hi.max()))
    repo, order = sorted_grid(sample_mapped, lo, hi, levels)
    repo_mapped = sample_mapped[order]
    queries, q_order = sorted_grid(sample_mapped[workload], lo, hi, levels)
    query_mapped = sample_mapped[workload][q_order]
    total = float(len(TAU_FRACTIONS) * len(workload) * n_pivots)
    leaves = repo.leaves
    for fraction in TAU_FRACTIONS:
        tau = fraction * max_distance
        pairs = block(queries, query_mapped, repo, tau, eps)
        q = np.concatenate([pairs.candidate.query, pairs.browsing.query])
        leaf = np.concatenate([pairs.candidate.leaf, pairs.browsing.leaf])
        pair, x = cross_ranges(np.arange(len(q)), np.arange(len(q)) + 1, leaves.start[leaf], leaves.end[leaf])
        in_region = (np.abs(repo_mapped[x] - query_mapped[q[pair]]) <= tau + eps).all(axis=1)
        total += float(in_region.sum()) + len(x) * n_pivots / min(dim, FAR_PAIR_DIMENSIONS) + len(q) + pairs.examined
    return total


def choose_shape(
    sample: np.ndarray,
    pivots: np.ndarray,
    max_distance: float,
    pivot_counts: Sequence[int] | None = None,
    level_counts: Sequence[int] = LEVEL_CHOICES,
    seed: int = 0,
) -> tuple[int, int]:
    """The ``(|P|, m)`` of least estimated cost; ``pivots`` are ranked, so prefixes are tried."""
    rng = np.random.default_rng(seed)
    workload = rng.choice(len(sample), size=min(WORKLOAD_SIZE, len(sample)), replace=False)
    mapped = map_to_pivot_space(sample, pivots)
    shapes = [
        (n_pivots, levels)
        for n_pivots in (pivot_counts or [p for p in PIVOT_CHOICES if p <= len(pivots)])
        for levels in level_counts
        if n_pivots * levels <= MAX_KEY_BITS
    ]
    if not shapes:
        raise ValueError("no grid shape fits: |P|·m must stay within 62 key bits")
    costs = [estimated_cost(mapped[:, :p], sample.shape[1], m, max_distance, workload) for p, m in shapes]
    return shapes[int(np.argmin(costs))]
