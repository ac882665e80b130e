"""``lakejoin`` console script. Every command takes ``--home``, ``--json`` and ``--quiet``
anywhere after its name; ``--json`` prints machine output alone on stdout."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from lakejoin.config import SPARK_CONSOLE_LOG_ENV, resolve_home
from lakejoin.lake.lease import LakeWriteError

# One module per command under lakejoin.commands (see its docstring for the convention).
COMMAND_MODULES = ("run", "snapshots", "datasets", "columns", "vacuum", "graph", "related")
OPTIONAL_COMMAND_MODULES = ("transform", "quality", "portal", "search", "join", "discover")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """The ``lakejoin`` parser with one sub-command per module of ``COMMAND_MODULES``, and the modules by name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="lake root (default: $LAKEJOIN_HOME, else ./.lakejoin)")
    common.add_argument("--json", action="store_true", help="machine output: JSON alone on stdout")
    common.add_argument("--quiet", action="store_true", help="no progress output")
    parser = argparse.ArgumentParser(prog="lakejoin", description="Joinable-table discovery over a Delta lake.")
    commands = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name in _available_modules():
        module = importlib.import_module(f"lakejoin.commands.{name}")
        sub = commands.add_parser(module.NAME, parents=[common], help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(sub)
        modules[module.NAME] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``lakejoin`` command; print its JSON or summary, and return the exit status."""
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    module = modules[args.command]
    if args.json or args.quiet:
        os.environ.setdefault(SPARK_CONSOLE_LOG_ENV, str(resolve_home(args.home) / "logs" / "spark-console.log"))
    try:
        result = module.run(args)
    except (ValueError, LookupError, FileNotFoundError, LakeWriteError) as error:
        message = str(error) if not isinstance(error, KeyError) else error.args[0]
        if args.json:
            print(json.dumps({"error": message}))
        print(f"lakejoin {args.command}: error: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, default=_json_default, indent=None))
    elif not args.quiet:
        summarize = getattr(module, "summarize", None)
        print(summarize(result) if summarize else json.dumps(result, default=_json_default, indent=2))
    return 0


def _available_modules() -> list[str]:
    import importlib.util

    optional = [m for m in OPTIONAL_COMMAND_MODULES if importlib.util.find_spec(f"lakejoin.commands.{m}")]
    return [*COMMAND_MODULES, *optional]


def _json_default(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, set):
        return sorted(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
