"""Strict parsing of the operations variables, and the PostgreSQL timeouts."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_ip_networks, env_log_level, with_postgres_timeouts


def test_allowed_ips_are_addresses_or_networks(monkeypatch):
    monkeypatch.setenv("IPS", "127.0.0.1, ::1,10.0.0.0/8")
    assert env_ip_networks("IPS", []) == ["127.0.0.1", "::1", "10.0.0.0/8"]
    monkeypatch.setenv("IPS", "127.0.0.1,localhost")
    with pytest.raises(ImproperlyConfigured, match="localhost"):
        env_ip_networks("IPS", [])


def test_log_levels_are_checked_and_case_insensitive(monkeypatch):
    monkeypatch.setenv("LEVEL", "warning")
    assert env_log_level("LEVEL", "INFO") == "WARNING"
    monkeypatch.setenv("LEVEL", "loud")
    with pytest.raises(ImproperlyConfigured):
        env_log_level("LEVEL", "INFO")
    monkeypatch.delenv("LEVEL")
    assert env_log_level("LEVEL", "INFO") == "INFO"


def test_postgres_options_get_both_timeouts():
    assert with_postgres_timeouts(
        {"sslmode": "require"}, statement_timeout_ms=5000, connect_timeout_seconds=5
    ) == {"sslmode": "require", "connect_timeout": 5, "options": "-c statement_timeout=5000"}


def test_zero_turns_each_timeout_off():
    assert with_postgres_timeouts({}, statement_timeout_ms=0, connect_timeout_seconds=0) == {}


def test_values_in_the_database_url_win():
    given = {"connect_timeout": "2", "options": "-c search_path=mirror"}
    assert with_postgres_timeouts(given, statement_timeout_ms=100, connect_timeout_seconds=9) == {
        "connect_timeout": "2",
        "options": "-c search_path=mirror -c statement_timeout=100",
    }
    given = {"options": "-c statement_timeout=250"}
    assert with_postgres_timeouts(given, statement_timeout_ms=100, connect_timeout_seconds=0) == (
        given
    )
