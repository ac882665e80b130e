"""The ``LAKEJOIN_*`` settings: declared once in ``lakejoin.config``, read from the environment when asked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakejoin.config import (
    HOME,
    LEASE_SECONDS,
    SETTINGS,
    SHUFFLE_PARTITIONS,
    SettingKind,
    UnknownSetting,
    resolve_home,
    setting,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("include", "plugins", "dags", "spark_jobs")
SETTING_NAME = re.compile(r"\bLAKEJOIN_[A-Z0-9_]*[A-Z0-9]\b")


def names_in_source() -> dict[str, str]:
    """Every ``LAKEJOIN_*`` name the code mentions -> one file that mentions it."""
    found: dict[str, str] = {}
    for folder in SOURCE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in SETTING_NAME.findall(path.read_text()):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_setting_the_code_names_is_declared_once_in_config() -> None:
    found = names_in_source()
    assert {"LAKEJOIN_HOME", "LAKEJOIN_INDEX_MEMORY", "LAKEJOIN_PAUSE_AT"} <= set(found)  # the scan sees the code
    undeclared = {name: path for name, path in found.items() if name not in SETTINGS}
    assert not undeclared, f"declare these in lakejoin/config.py: {undeclared}"


def test_every_declaration_says_what_it_means_and_the_test_switches_are_marked() -> None:
    for name, declared in SETTINGS.items():
        assert declared.name == name and declared.meaning.strip(), name
    test_only = {name for name, declared in SETTINGS.items() if declared.kind is not SettingKind.USER}
    assert test_only == {"LAKEJOIN_TEST_FAIL_DISCOVER_SHARD", "LAKEJOIN_PAUSE_AT"}


def test_a_setting_is_read_when_asked_not_when_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHUFFLE_PARTITIONS.name, raising=False)
    assert SHUFFLE_PARTITIONS.read() == 8
    monkeypatch.setenv(SHUFFLE_PARTITIONS.name, "3")
    assert SHUFFLE_PARTITIONS.read() == 3
    monkeypatch.setenv(LEASE_SECONDS.name, "2.5")
    assert LEASE_SECONDS.read() == 2.5
    monkeypatch.setenv(LEASE_SECONDS.name, "")  # empty means unset
    assert LEASE_SECONDS.read() == 30.0


def test_home_comes_from_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(HOME.name, raising=False)
    assert resolve_home() == tmp_path / ".lakejoin"
    monkeypatch.setenv(HOME.name, str(tmp_path / "lake"))
    assert resolve_home() == tmp_path / "lake"
    assert resolve_home(tmp_path / "flag") == tmp_path / "flag"


def test_a_malformed_value_fails_with_the_parsers_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHUFFLE_PARTITIONS.name, "many")
    with pytest.raises(ValueError, match="many"):
        SHUFFLE_PARTITIONS.read()


def test_an_unknown_name_is_refused() -> None:
    assert setting("LAKEJOIN_INDEX_MEMORY") is SETTINGS["LAKEJOIN_INDEX_MEMORY"]
    with pytest.raises(UnknownSetting, match="LAKEJOIN_NO_SUCH_THING is not a Lakejoin setting"):
        setting("LAKEJOIN_NO_SUCH_THING")
