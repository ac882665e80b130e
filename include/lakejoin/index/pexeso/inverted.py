"""The inverted index ``I``: leaf cell of ``HG_RV`` → columns ([ICDE] §III-E; notes §2.4).

A posting says "column S has vectors in leaf c" and gives access to those vectors (the
paper's ``S1.b14``). Vectors are stored sorted by (leaf key, column, vector id), so a leaf's
postings are consecutive runs of one column, already sorted by column as the paper's DaaT
traversal wants, and a posting's vectors are one contiguous range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InvertedIndex:
    """Postings in CSR form.

    Leaf ``l`` owns postings ``leaf_start[l]:leaf_start[l+1]``; posting ``p`` is column
    ``column[p]`` (a column index, not its id) with vectors ``vector_start[p]:vector_end[p]``,
    whose mapped vectors lie in the box ``[lo[p], hi[p]]``: Verify applies Lemma 3 to that
    box (a subset of the leaf, so the lemma holds) before testing the posting's vectors.
    """

    leaf_start: np.ndarray
    column: np.ndarray
    vector_start: np.ndarray
    vector_end: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def build(
        cls, sorted_leaf_keys: np.ndarray, sorted_columns: np.ndarray, sorted_mapped: np.ndarray, leaf_keys: np.ndarray
    ) -> InvertedIndex:
        """From per-vector leaf keys, column indices and mapped vectors, sorted by (leaf, column)."""
        n = len(sorted_leaf_keys)
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            box = np.zeros((0, sorted_mapped.shape[1]))
            return cls(np.zeros(1, dtype=np.int64), empty, empty, empty, box, box)
        change = np.r_[
            True, (sorted_leaf_keys[1:] != sorted_leaf_keys[:-1]) | (sorted_columns[1:] != sorted_columns[:-1])
        ]
        start = np.flatnonzero(change).astype(np.int64)
        end = np.r_[start[1:], n].astype(np.int64)
        leaf_of_posting = sorted_leaf_keys[start]
        leaf_start = np.searchsorted(leaf_of_posting, leaf_keys, side="left").astype(np.int64)
        return cls(
            np.r_[leaf_start, len(start)].astype(np.int64),
            sorted_columns[start].astype(np.int64),
            start,
            end,
            np.minimum.reduceat(sorted_mapped, start, axis=0),
            np.maximum.reduceat(sorted_mapped, start, axis=0),
        )

    @property
    def size(self) -> int:
        """``D``: the number of (column, leaf cell) postings."""
        return len(self.column)
