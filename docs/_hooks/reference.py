"""MkDocs hook: the reference pages generated from the code at build time, so they cannot drift.

- ``reference/cli.md`` from the ``lakejoin`` console script's argparse parsers
  (``lakejoin.cli.build_parser``);
- ``reference/rest.md`` from the Airflow plugin's FastAPI app (``app.openapi()``), mounted at
  ``/lakejoin``;
- ``reference/settings.md`` from the ``LAKEJOIN_*`` environment settings declared in
  ``lakejoin.config.SETTINGS``;
- ``<!-- lakejoin:params METHOD -->`` in any page becomes the table of that method's parameters
  from ``lakejoin.query.params`` (the one place the CLI flags, the REST docs and the search page
  read them from);
- ``<!-- lakejoin:packages -->`` becomes the table of every package and module under
  ``include/lakejoin`` with the first sentence of its docstring.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
MOUNT = "/lakejoin"  # where plugins/lakejoin_plugin.py mounts the app in the Airflow API server
PARAMS_MARKER = re.compile(r"<!-- lakejoin:params (\w+) -->")
PACKAGES_MARKER = "<!-- lakejoin:packages -->"


def on_files(files: Files, config: Any) -> Files:
    """Add the generated reference pages (CLI, REST, settings) to the site."""
    files.append(File.generated(config, "reference/cli.md", content=cli_page()))
    files.append(File.generated(config, "reference/rest.md", content=rest_page()))
    files.append(File.generated(config, "reference/settings.md", content=settings_page()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Replace the packages and parameters markers of a page with their tables."""
    if PACKAGES_MARKER in markdown:
        markdown = markdown.replace(PACKAGES_MARKER, packages_table())
    return PARAMS_MARKER.sub(lambda match: params_table(match.group(1)), markdown)


# --- CLI ---------------------------------------------------------------------------------------


def cli_page() -> str:
    """``reference/cli.md``: every ``lakejoin`` command's usage and options, from its parser."""
    os.environ["COLUMNS"] = "110"  # argparse wraps usage lines to the terminal width
    from lakejoin.cli import build_parser

    parser, modules = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = [
        "# CLI reference",
        "",
        "Generated from the `lakejoin` console script's own parsers when the site is built.",
        "Every command takes `--home DIR` (the lake root: else `$LAKEJOIN_HOME`, else `./.lakejoin`),",
        "`--json` (machine output alone on stdout) and `--quiet`, anywhere after the command name.",
        "Errors print `lakejoin <command>: error: ...` on stderr and exit 2.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{name}`](#{name}) | {_first_line(modules[name].__doc__)} |" for name in commands.choices]
    for name, sub in commands.choices.items():
        lines += ["", f"## {name}", "", _docstring_body(modules[name].__doc__), ""]
        lines += ["```text", sub.format_usage().strip(), "```", ""]
        lines += _arguments_table(sub)
    return "\n".join(lines) + "\n"


def _first_line(doc: str | None) -> str:
    return _md_text((doc or "").strip().split("\n\n")[0].replace("\n", " "))


def _docstring_body(doc: str | None) -> str:
    """The module docstring as Markdown: reST's ``literal`` becomes `literal`, indented blocks code."""
    paragraphs = []
    for block in (doc or "").strip().split("\n\n"):
        if block.startswith("    "):
            paragraphs.append("```text\n" + "\n".join(line[4:] for line in block.splitlines()) + "\n```")
        else:
            paragraphs.append(_md_text(block))
    return "\n\n".join(paragraphs)


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | meaning | default |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.dest in ("home", "json", "quiet"):
            continue
        name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.choices and not action.option_strings:
            name += " — " + ", ".join(f"`{choice}`" for choice in action.choices)
        elif action.choices:
            name += " {" + ", ".join(f"`{choice}`" for choice in action.choices) + "}"
        default = action.default
        shown = "" if default in (None, False, [], argparse.SUPPRESS) else f"`{default}`"
        rows.append(f"| {name} | {_md_text(action.help or '')} | {shown} |")
    return rows if len(rows) > 2 else ["Only the options every command takes."]


def _md_text(text: str) -> str:
    """reST literals to Markdown code; outside code, table bars, tags and link brackets escaped."""
    parts = text.replace("``", "`").split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = parts[i].replace("|", "\\|").replace("<", "&lt;").replace("[", "\\[")
    return "`".join(parts)


# --- REST --------------------------------------------------------------------------------------


def rest_page() -> str:
    """``reference/rest.md``: every route of the search API, from its OpenAPI document."""
    sys.path.insert(0, str(ROOT / "plugins"))
    from lakejoin_airflow.api import app

    spec = app.openapi()
    lines = [
        "# REST reference",
        "",
        "Generated from the Airflow plugin's FastAPI app (`plugins/lakejoin_airflow/api.py`) when the site is",
        f"built. The Airflow API server mounts it at `{MOUNT}`; a running server also serves this schema",
        f"interactively at `{MOUNT}/docs`. Authentication is Airflow's own: a JWT in",
        "`Authorization: Bearer ...`, or the Airflow UI's session cookie (401 without one, 403 for a user",
        "without the `Lakejoin` view). The answers have the CLI's `--json` shapes.",
        "",
        "| method | path | what |",
        "|---|---|---|",
    ]
    operations = [
        (method.upper(), path, operation) for path, item in spec["paths"].items() for method, operation in item.items()
    ]
    for method, path, operation in operations:
        lines.append(
            f"| {method} | [`{MOUNT}{path}`](#{_anchor(operation)}) | {_md_text(operation.get('summary', ''))} |"
        )
    for method, path, operation in operations:
        lines += _operation(method, path, operation, spec)
    return "\n".join(lines) + "\n"


def _anchor(operation: dict[str, Any]) -> str:
    return operation["operationId"].replace("_", "-")


def _operation(method: str, path: str, operation: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    lines = ["", f"## {method} {MOUNT}{path} {{#{_anchor(operation)}}}", ""]
    lines += [f"**{_md_text(operation.get('summary', ''))}**", ""]
    if operation.get("description"):
        lines += [_md_text(operation["description"]), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_type(schema, spec)} | "
                f"{'yes' if parameter.get('required') else ''} | {_cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    for content_type, content in operation.get("requestBody", {}).get("content", {}).items():
        lines += [f"Request body (`{content_type}`):", ""]
        lines += _schema_table(_resolve(content.get("schema", {}), spec), spec)
    lines += ["", "| status | meaning |", "|---|---|"]
    lines += [f"| {code} | {_cell(answer.get('description', ''))} |" for code, answer in operation["responses"].items()]
    return lines


def _schema_table(schema: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return ["```json", json.dumps(schema, indent=1)[:2000], "```", ""]
    required = set(schema.get("required", []))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in properties.items():
        default = (
            f"`{json.dumps(field['default'])}`" if "default" in field else ("required" if name in required else "")
        )
        rows.append(f"| `{name}` | {_type(field, spec)} | {default} | {_cell(field.get('description', ''))} |")
    return [*rows, ""]


def _type(schema: dict[str, Any], spec: dict[str, Any]) -> str:
    schema = _resolve(schema, spec)
    if "anyOf" in schema:
        return " or ".join(_type(option, spec) for option in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    kind = schema.get("type", "object")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}), spec)}"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"≥ {schema['minimum']:g}")
    if "maximum" in schema:
        bounds.append(f"≤ {schema['maximum']:g}")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _cell(text: str) -> str:
    """A description in one table cell: its list items and paragraphs kept apart by line breaks."""
    return _md_text(text.strip()).replace("\n\n", "<br>").replace("\n", "<br>")


# --- settings ----------------------------------------------------------------------------------


def settings_page() -> str:
    """``reference/settings.md``: every ``LAKEJOIN_*`` setting with its default and meaning."""
    from lakejoin.config import SETTINGS, SettingKind

    lines = [
        "# Settings reference",
        "",
        "Generated from `lakejoin.config.SETTINGS` when the site is built: every environment variable",
        "Lakejoin reads. Each is read when it is needed, so a change applies to the next run, query or task;",
        "unset or empty means the default. Flags (`--home`, `--spark-master`) win over their variable.",
    ]
    lines += ["", "| variable | kind | default | type | meaning |", "|---|---|---|---|---|"]
    for setting in sorted(SETTINGS.values(), key=lambda s: list(SettingKind).index(s.kind)):
        default = "unset" if setting.default is None else f"`{setting.default}`"
        value_type = {"int": "integer", "float": "number"}.get(setting.parse.__name__, "text")
        lines.append(
            f"| `{setting.name}` | {setting.kind.value} | {default} | {value_type} | {_md_text(setting.meaning)} |"
        )
    return "\n".join(lines) + "\n"


# --- packages ----------------------------------------------------------------------------------


def packages_table() -> str:
    """Every package and module of the library, in file order, with the first sentence of its docstring."""
    library = ROOT / "include" / "lakejoin"
    rows = ["| module | what it is |", "|---|---|"]
    for path in sorted(library.rglob("*.py")):
        if "__pycache__" in path.parts or (path.name.startswith("_") and path.name != "__init__.py"):
            continue
        parts = path.relative_to(library.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if path.name == "__init__.py" else parts)
        label = f"**`{name}`**" if path.name == "__init__.py" else f"`{name}`"
        rows.append(f"| {label} | {_md_text(_first_sentence(ast.get_docstring(ast.parse(path.read_text())) or ''))} |")
    return "\n".join(rows)


def _first_sentence(doc: str) -> str:
    paragraph = doc.split("\n\n")[0].replace("\n", " ")
    return re.split(r"(?<=[a-z)`])\. ", paragraph, maxsplit=1)[0].rstrip(":")


# --- method parameters -------------------------------------------------------------------------


def params_table(method: str) -> str:
    """The table of one method's parameters: type, default, range and meaning."""
    from lakejoin.query.params import METHOD_SPECS, ParamSpec

    def bounds(spec: ParamSpec) -> str:
        if spec.choices:
            return ", ".join(f"`{choice}`" for choice in spec.choices)
        if spec.minimum is not None and spec.maximum is not None:
            return f"{spec.minimum:g} to {spec.maximum:g}"
        return ""

    specs = METHOD_SPECS[method].params
    if not specs:
        return f"`{method}` takes no parameter besides `k` (default 10)."
    rows = ["| parameter | type | default | range | meaning |", "|---|---|---|---|---|"]
    rows += [
        f"| `{p.name}` | {p.type} | {'' if p.default is None else f'`{p.default}`'} | {bounds(p)} | "
        f"{_md_text(p.help)} |"
        for p in specs
    ]
    return "\n".join(rows)
