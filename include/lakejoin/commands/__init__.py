"""CLI commands, one module per command. Each module exposes

- ``NAME``: the sub-command name,
- ``add_arguments(parser: argparse.ArgumentParser) -> None``,
- ``run(args: argparse.Namespace) -> object``: the JSON-able result printed by ``--json``,
  and a human summary otherwise (``summarize(result) -> str`` if the module defines it).

``lakejoin.cli`` lists the modules in ``COMMAND_MODULES``.
"""
