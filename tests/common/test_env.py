from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_int, parse_database_url

BASE = Path("/srv/app")


def test_it_parses_a_postgres_url():
    parsed = parse_database_url(
        "postgres://u:p%40ss@db.local:6543/mirror?sslmode=require", base_dir=BASE
    )
    assert parsed == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "mirror",
        "USER": "u",
        "PASSWORD": "p@ss",
        "HOST": "db.local",
        "PORT": "6543",
        "OPTIONS": {"sslmode": "require"},
    }


def test_postgresql_is_the_same_scheme():
    assert parse_database_url("postgresql://127.0.0.1/x", base_dir=BASE)["NAME"] == "x"


def test_sqlite_paths_are_relative_with_three_slashes_and_absolute_with_four():
    assert (
        parse_database_url("sqlite:///db.sqlite3", base_dir=BASE)["NAME"] == "/srv/app/db.sqlite3"
    )
    assert parse_database_url("sqlite:////tmp/x.db", base_dir=BASE)["NAME"] == "/tmp/x.db"


@pytest.mark.parametrize(
    "url", ["mysql://x/y", "postgres://host/", "sqlite://", "sqlite://host/x.db", "nonsense"]
)
def test_it_refuses_urls_it_cannot_use(url):
    with pytest.raises(ImproperlyConfigured):
        parse_database_url(url, base_dir=BASE)


def test_booleans_are_parsed_strictly(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", True) is False
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured):
        env_bool("FLAG", False)


def test_integers_and_choices_are_parsed_strictly(monkeypatch):
    monkeypatch.setenv("N", "12x")
    with pytest.raises(ImproperlyConfigured):
        env_int("N", 1)
    monkeypatch.setenv("N", "-1")
    with pytest.raises(ImproperlyConfigured):
        env_int("N", 1)
    monkeypatch.setenv("PROFILE", "both")
    with pytest.raises(ImproperlyConfigured):
        env_choice("PROFILE", "keyscoped", ("keyscoped", "teampath"))


def test_it_parses_libpq_multi_host_urls_for_a_replicated_cluster():
    parsed = parse_database_url(
        "postgres://app:s3cret@db1:5432,db2:5433,[::1]:5434/mirror?target_session_attrs=read-write",
        base_dir=BASE,
    )
    assert parsed["HOST"] == "db1,db2,::1"
    assert parsed["PORT"] == "5432,5433,5434"
    assert parsed["USER"] == "app"
    assert parsed["PASSWORD"] == "s3cret"
    assert parsed["NAME"] == "mirror"
    assert parsed["OPTIONS"] == {"target_session_attrs": "read-write"}


def test_a_host_without_a_port_in_a_host_list_takes_the_default_port():
    parsed = parse_database_url("postgres://u@db1,db2:6000/x", base_dir=BASE)
    assert (parsed["HOST"], parsed["PORT"]) == ("db1,db2", ",6000")
    assert parse_database_url("postgres://u@db1,db2/x", base_dir=BASE)["PORT"] == ""


@pytest.mark.parametrize(
    "url",
    ["postgres://u@db1:5432,:5433/x", "postgres://u@db1:99999,db2/x", "postgres://u@db1:x,db2/x"],
)
def test_it_refuses_a_host_list_it_cannot_use(url):
    with pytest.raises(ImproperlyConfigured):
        parse_database_url(url, base_dir=BASE)
