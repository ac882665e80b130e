"""Serve a folder of tables as a local CKAN + Socrata portal (for demos and crawler tests).

lakejoin portal fill --root /tmp/portal --count 50     # real tables from installed packages
lakejoin portal serve --root /tmp/portal --port 8800
lakejoin run --source ckan:http://127.0.0.1:8800 --allow-private-hosts
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lakejoin.portal import Faults, serve
from lakejoin.portal.realdata import write_real_tables

NAME = "portal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the action (serve or fill), the folder, the address and the fault injection flags."""
    # one flat parser (not nested sub-commands) so the common --json/--quiet work after the action
    parser.add_argument(
        "action",
        choices=("serve", "fill"),
        help="serve: serve --root until interrupted; fill: write real tables into --root",
    )
    parser.add_argument("--root", required=True, help="folder of tables (<organization>/<name>.csv|.parquet|...)")
    parser.add_argument("--host", default="127.0.0.1", help="serve: address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="serve: port (default: any free port)")
    parser.add_argument(
        "--duration", type=float, default=None, help="serve: stop after this many seconds (default: until Ctrl-C)"
    )
    parser.add_argument("--count", type=int, default=50, help="fill: number of tables (default 50)")
    parser.add_argument(
        "--parquet-every", type=int, default=0, help="fill: write every N-th table as Parquet (default: all CSV)"
    )
    faults = parser.add_argument_group("fault injection (serve)")
    faults.add_argument("--fault-rate", type=float, default=0.0, help="share of requests answered 500")
    faults.add_argument(
        "--rate-limit-rate", type=float, default=0.0, help="share of requests answered 429 with Retry-After"
    )
    faults.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds sent with 429s")
    faults.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    faults.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    for name, text in (
        ("truncate", "truncated body"),
        ("html", "HTML page"),
        ("wrong-type", "text/html content type"),
        ("oversize", "endless body"),
    ):
        faults.add_argument(
            f"--{name}", action="append", default=[], metavar="RELPATH", help=f"table served with a {text} (repeatable)"
        )


def run(args: argparse.Namespace) -> dict:
    """Fill ``--root`` with real tables, or serve it until ``--duration`` ends or Ctrl-C."""
    if args.action == "fill":
        written = write_real_tables(Path(args.root), args.count, parquet_every=args.parquet_every)
        return {"root": str(Path(args.root).resolve()), "tables": len(written)}
    faults = Faults(
        latency_s=args.latency,
        error_rate=args.fault_rate,
        rate_limit_rate=args.rate_limit_rate,
        retry_after_s=args.retry_after,
        truncate=frozenset(args.truncate),
        html=frozenset(args.html),
        wrong_type=frozenset(args.wrong_type),
        oversize=frozenset(args.oversize),
        seed=args.seed,
    )
    portal = serve(args.root, port=args.port, host=args.host, faults=faults)
    print(
        f"serving {args.root} at {portal.url} (CKAN: {portal.url}/api/3/action/, Socrata: {portal.url}/api/catalog/v1)",
        file=sys.stderr,
        flush=True,
    )
    try:
        time.sleep(args.duration) if args.duration is not None else _wait_forever()
    except KeyboardInterrupt:
        pass
    finally:
        portal.stop()
    return {"url": portal.url, "stats": dict(portal.stats)}


def _wait_forever() -> None:
    while True:
        time.sleep(3600)


def summarize(result: dict) -> str:
    """One line: the tables written, or the requests the portal served."""
    if "tables" in result:
        return f"wrote {result['tables']} tables to {result['root']}"
    return f"portal at {result['url']} stopped; requests: {result['stats'].get('requests', 0)}"
