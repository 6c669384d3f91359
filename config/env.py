"""Strict parsing of environment variables for the settings modules.

A typo in a deployment's environment must stop the process at start-up with a clear
message, never fall back silently to a default: every reader here raises
``ImproperlyConfigured`` on a value it cannot parse.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
from pathlib import Path
from typing import Any, overload
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value


def env_required(name: str) -> str:
    value = env_str(name)
    if value is None:
        raise ImproperlyConfigured(f"The environment variable {name} is required.")
    return value


def env_bool(name: str, default: bool) -> bool:
    value = env_str(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false).")


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    value = env_str(name)
    if value is None:
        return default
    try:
        parsed = int(value.strip(), 10)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None
    if parsed < minimum:
        raise ImproperlyConfigured(f"{name}={parsed} must be at least {minimum}.")
    if maximum is not None and parsed > maximum:
        raise ImproperlyConfigured(f"{name}={parsed} must be at most {maximum}.")
    return parsed


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    assert value is not None
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(choices)}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_fernet_keys(name: str) -> list[str]:
    """A comma-separated list of Fernet keys (URL-safe base64 of 32 bytes), each checked
    here; checked without cryptography, which a web worker loads only when it needs it."""
    keys = env_list(name, [])
    for position, key in enumerate(keys, start=1):
        try:
            raw = base64.urlsafe_b64decode(key.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            raw = b""
        if len(raw) != 32:
            raise ImproperlyConfigured(
                f"{name}: key {position} is not a Fernet key (URL-safe base64 of 32 bytes; "
                "make one with Fernet.generate_key(), see docs/production.md)."
            )
    return keys


def env_ip_networks(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of IP addresses or CIDR networks, each checked here."""
    values = env_list(name, default)
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {value!r} is not an IP address or network (e.g. 10.0.0.0/8)."
            ) from None
    return values


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_log_level(name: str, default: str) -> str:
    value = (env_str(name) or default).strip().upper()
    if value not in _LOG_LEVELS:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(_LOG_LEVELS)}.")
    return value


def with_postgres_timeouts(
    options: dict[str, Any], *, statement_timeout_ms: int, connect_timeout_seconds: int
) -> dict[str, Any]:
    """PostgreSQL connection ``OPTIONS`` with a server-side statement timeout and a connect
    timeout; values already given in ``DATABASE_URL``'s query string win. 0 turns either off.
    """
    merged = dict(options)
    if connect_timeout_seconds > 0:
        merged.setdefault("connect_timeout", connect_timeout_seconds)
    if statement_timeout_ms > 0:
        given = str(merged.get("options", ""))
        if "statement_timeout" not in given:
            merged["options"] = f"{given} -c statement_timeout={statement_timeout_ms}".strip()
    return merged


def redacted_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (safe to print and log)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return url


def _postgres_hosts(netloc: str, shown: str) -> tuple[str, str]:
    """libpq's ``HOST`` and ``PORT`` from a URL's host list: ``h1:p1,h2:p2`` (IPv6 hosts in
    brackets) gives ``("h1,h2", "p1,p2")``. A host without a port takes the default port
    (an empty item in libpq's port list)."""
    hostlist = netloc.rpartition("@")[2]
    hosts: list[str] = []
    ports: list[str] = []
    for item in hostlist.split(","):
        match = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]]*)(?::(\d*))?", item)
        if match is None:
            raise ImproperlyConfigured(f"DATABASE_URL {shown!r} has an invalid host {item!r}.")
        host, port = match.group(1).strip("[]"), match.group(2) or ""
        if port and not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f"DATABASE_URL {shown!r}: port {port} is out of range.")
        hosts.append(unquote(host))
        ports.append(port)
    if len(hosts) > 1 and not all(hosts):
        raise ImproperlyConfigured(f"DATABASE_URL {shown!r} has an empty host in its host list.")
    return ",".join(hosts), ",".join(ports) if any(ports) else ""


def parse_database_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """Turn ``DATABASE_URL`` into a Django ``DATABASES`` entry.

    Accepted: ``postgres://`` / ``postgresql://`` (user, password, host, port, name and
    ``?options`` such as ``sslmode``), with libpq's multi-host form for a replicated
    cluster (``postgres://u@db1:5432,db2:5432/name?target_session_attrs=read-write``: libpq
    tries the hosts in order and keeps the one that accepts writes);
    ``sqlite:///relative/path`` (relative to the project root) and ``sqlite:////absolute/path``.
    """
    shown = redacted_url(url)
    try:
        parts = urlsplit(url)
        multi_host = "," in parts.netloc.rpartition("@")[2]
        port = None if multi_host else parts.port
    except ValueError as error:
        raise ImproperlyConfigured(f"DATABASE_URL {shown!r} is not a valid URL: {error}.") from None
    if parts.scheme in ("postgres", "postgresql"):
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL {shown!r} names no database.")
        options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        host, ports = (
            _postgres_hosts(parts.netloc, shown)
            if multi_host
            else (parts.hostname or "", str(port or ""))
        )
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": host,
            "PORT": ports,
            "OPTIONS": options,
        }
    if parts.scheme == "sqlite":
        if parts.netloc:
            raise ImproperlyConfigured(
                f"DATABASE_URL {shown!r}: use sqlite:///relative or sqlite:////absolute."
            )
        raw_path = unquote(parts.path)
        if raw_path in ("", "/"):
            raise ImproperlyConfigured(f"DATABASE_URL {shown!r} names no SQLite file.")
        # sqlite:///x -> path "/x" (relative); sqlite:////x -> path "//x" (absolute)
        relative = raw_path[1:]
        path = Path(relative) if relative.startswith("/") else base_dir / relative
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported (postgres, postgresql, sqlite)."
    )


# The options of an ``s3://`` archive storage URL: each of django-storages' ``S3Storage``
# named exactly as the backend does, and the archive's own ``object_lock`` (``required``:
# retire nothing that is not held by the bucket's object lock; apps.audit.storage).
_S3_OPTIONS = ("endpoint_url", "region_name", "addressing_style", "signature_version",
               "object_lock")  # fmt: skip
_OBJECT_LOCK_VALUES = ("required", "")


def parse_archive_storage_url(url: str, *, default_root: Path) -> dict[str, Any]:
    """Turn ``ARCHIVE_STORAGE_URL`` into a Django ``STORAGES`` entry (the archive of retired
    receipts, written once and never changed).

    Accepted: empty (a directory, ``default_root``); ``file:///absolute/path``; and
    ``s3://bucket/optional/prefix?endpoint_url=https://...&region_name=...`` for an
    S3-compatible bucket through django-storages (``apps.audit.s3.ArchiveS3Storage``, its
    ``S3Storage`` with version-pinned reads and the option ``object_lock=required``;
    credentials come from boto3's own environment, never this URL). An archive is never
    overwritten: the S3 entry keeps ``file_overwrite`` off, and a bucket with object lock
    holds each object for its default retention.
    """
    if not url:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(default_root)},
        }
    shown = redacted_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise ImproperlyConfigured(
            f"ARCHIVE_STORAGE_URL {shown!r} is not a URL: {error}."
        ) from None
    if parts.username or parts.password:
        raise ImproperlyConfigured(
            f"ARCHIVE_STORAGE_URL {shown!r} carries credentials: give the bucket's to boto3 "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role) instead."
        )
    if parts.scheme == "file":
        if parts.netloc or not parts.path.startswith("/"):
            raise ImproperlyConfigured(f"ARCHIVE_STORAGE_URL {shown!r}: use file:///absolute/path.")
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": unquote(parts.path)},
        }
    if parts.scheme == "s3":
        if not parts.hostname:
            raise ImproperlyConfigured(f"ARCHIVE_STORAGE_URL {shown!r} names no bucket.")
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        unknown = sorted(set(query) - set(_S3_OPTIONS))
        if unknown:
            raise ImproperlyConfigured(
                f"ARCHIVE_STORAGE_URL {shown!r}: unknown option(s) {', '.join(unknown)}; "
                f"known: {', '.join(_S3_OPTIONS)}."
            )
        if query.get("object_lock", "") not in _OBJECT_LOCK_VALUES:
            raise ImproperlyConfigured(
                f"ARCHIVE_STORAGE_URL {shown!r}: object_lock is 'required' or absent."
            )
        options: dict[str, Any] = {
            "bucket_name": parts.hostname,
            "location": unquote(parts.path).strip("/"),
            "file_overwrite": False,
            "default_acl": None,
            "querystring_auth": True,
            **query,
        }
        return {"BACKEND": "apps.audit.s3.ArchiveS3Storage", "OPTIONS": options}
    raise ImproperlyConfigured(
        f"ARCHIVE_STORAGE_URL {shown!r}: use file:///absolute/path or s3://bucket/prefix."
    )
