"""The threshold broadcast of distributed top-k search: one query asked of shards one by one.

A sharded index answers a top-k query exactly by asking every shard and merging the parts. Most
shards need not be asked: each has an upper bound on the score of anything it holds, and once k
results are merged, anything new must reach the k-th score so far (the *floor*). So the shards
are asked one at a time, each given the floor so that it returns only what can still enter, and
a shard whose bound is below the floor is skipped. Asking the shards of highest bound first
raises the floor early, so that more are skipped.

It is exact: nothing in a skipped shard scores above its bound, so nothing there reaches the
floor; and the floor only rises, so what a shard leaves out under it could not enter later. A
shard's result that ties the floor is still returned: which of the tied results makes the top k
is for the merge to decide, by the ranking's tie-break.

``lakejoin.query.sharded`` serves a family this way, and ``lakejoin.graph.build`` searches the
join graph's keys over MATE's shards this way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

S = TypeVar("S")


def threshold_broadcast(
    shards: Iterable[S],
    bound: Callable[[S], int | None],
    floor: Callable[[], int | None],
    ask: Callable[[S, int | None], bool],
) -> int:
    """Ask ``shards`` in their order, skipping each whose ``bound`` is below the ``floor``, and
    return how many were skipped.

    ``bound(shard)``: the best score the shard can give (``None``: unknown, so it is asked); it is
    called once the shard is reached, so a shard may be read only then to learn it. ``floor()``:
    the score a result must reach now, that is the k-th merged so far (``None``: none yet).
    ``ask(shard, floor)``: the shard's results of at least ``floor``, merged by the caller, which
    returns whether to go on (``False`` ends the broadcast: a refused query)."""
    skipped = 0
    for shard in shards:
        at_least = floor()
        most = bound(shard)
        if most is not None and at_least is not None and most < at_least:
            skipped += 1
        elif not ask(shard, at_least):
            break
    return skipped
