"""LSH Ensemble: approximate threshold containment search (Zhu 2019 thesis Ch. 2, PVLDB 9(12)).

Modules follow the thesis: :mod:`.minhash` (§2.3.1, datasketch-compatible signatures),
:mod:`.partition` (§2.4.3–2.4.6, optimal and equi-depth size partitioning), :mod:`.tuning`
(§2.4.7, Eqs. 2.22–2.26: (b, r) per query and partition), :mod:`.lsh` (the dynamic LSH forest),
:mod:`.search` (Alg. 1 over all partitions, estimates, verification, top-k) and :mod:`.tables`
(the index tables: signatures and sets sharded by dataset, the size histogram and the
partitioning global; ``lakejoin.spark.lshensemble`` builds the same ones with Spark).

Unlike ``datasketch.MinHashLSHEnsemble`` the threshold is a query parameter, results carry a
containment estimate (and the exact containment when verified), a top-k mode exists, and new
or changed columns enter the next snapshot without re-hashing the others.
"""

from lakejoin.index.lshensemble.minhash import minhash_signatures
from lakejoin.index.lshensemble.search import ARRAYS_FORMAT, LshEnsembleSearcher, from_arrays, load, to_arrays
from lakejoin.index.lshensemble.tables import build_in_memory, update_tables

__all__ = [
    "ARRAYS_FORMAT",
    "LshEnsembleSearcher",
    "build_in_memory",
    "from_arrays",
    "load",
    "minhash_signatures",
    "to_arrays",
    "update_tables",
]
