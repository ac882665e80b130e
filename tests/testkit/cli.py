"""The ``lakejoin`` command line called in-process, its JSON answer parsed."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

from lakejoin import cli


def run_cli(*argv: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(list(argv))
    result = json.loads(out.getvalue())
    assert code == 0, result
    return result


def without_timing(response: Any) -> Any:
    """``response`` without its ``seconds`` fields, at any depth (transform times each result's learning)."""
    if isinstance(response, dict):
        return {k: without_timing(v) for k, v in response.items() if k != "seconds"}
    if isinstance(response, list):
        return [without_timing(v) for v in response]
    return response
