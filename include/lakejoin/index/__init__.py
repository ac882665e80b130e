"""Index families: JOSIE, LSH Ensemble, MATE, PEXESO and the q-gram family, one package each, sharded
(``shards``) and merged exactly (``merge``). What a family provides is the typed contract of ``contract``
(:class:`lakejoin.index.contract.IndexFamily`); ``registry`` holds one instance of each, and every layer finds a
family there. The Spark builds are registered in ``lakejoin.spark.builders``.

This module only names the families, so that importing the names (DAG files, profiling) loads no family's code.
"""

from __future__ import annotations

FAMILIES = ("josie", "lshensemble", "mate", "pexeso", "qgram")  # ``registry.REGISTRY``'s names, in its order
# the families a query searches by their own score; qgram only proposes candidates to `search transform`
SEARCH_FAMILIES = ("josie", "lshensemble", "mate", "pexeso")
