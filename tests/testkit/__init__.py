"""Helpers the tests share: the query lake, the plugin's API server, headless Chromium, a standalone Spark
cluster, the CLI called in-process and PEXESO's oracle (tests/ is on pytest's pythonpath; fixtures live in the
conftest files)."""
