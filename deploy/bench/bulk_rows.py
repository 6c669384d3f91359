"""Rows written in bulk for benchmarks and scale tests, with the column list taken from
the model: every concrete column but an automatic primary key, each one the caller does not
name getting its model default. A column added to a model later (with a default) needs no
change in any loader."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import models


def bulk_columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    """The model's concrete fields a bulk row writes (not an automatic primary key)."""
    return [
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and isinstance(field, models.AutoField | models.BigAutoField))
    ]


def default_value(field: models.Field[Any, Any]) -> Any:
    """A column's value in a bulk row that names none: the model default, else NULL where
    allowed, else the empty text."""
    if field.has_default():
        value = field.get_default()
        return json.dumps(value) if isinstance(field, models.JSONField) else value
    if field.null:
        return None
    if isinstance(field, models.CharField | models.TextField):
        return ""
    raise ValueError(f"{field.model.__name__}.{field.name}: name a value for it")


def default_sql(field: models.Field[Any, Any]) -> str:
    """The same default as an SQL literal, for ``INSERT … SELECT``."""
    if getattr(field, "auto_now_add", False) or getattr(field, "auto_now", False):
        return "now()"
    value = default_value(field)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    literal = "'" + str(value).replace("'", "''") + "'"
    return literal + "::jsonb" if isinstance(field, models.JSONField) else literal


def insert_select(
    cursor: Any,
    model: type[models.Model],
    values: dict[str, str],
    source: str,
    params: Sequence[Any] = (),
) -> None:
    """``INSERT INTO <model's table> (<bulk_columns>) SELECT … FROM source``: ``values``
    maps a column to its SQL expression, every other column gets ``default_sql``. A literal
    ``%`` is written ``%%`` (the statement always goes with its parameters)."""
    columns = bulk_columns(model)
    unknown = set(values) - {field.column for field in columns}
    if unknown:
        raise ValueError(f"not columns of {model._meta.db_table}: {sorted(unknown)}")
    expressions = [values.get(field.column) or default_sql(field) for field in columns]
    cursor.execute(
        f"INSERT INTO {model._meta.db_table} ({', '.join(f.column for f in columns)}) "  # noqa: S608
        f"SELECT {', '.join(expressions)} FROM {source}",
        list(params),
    )


def copy_rows(cursor: Any, model: type[models.Model], rows: Iterable[dict[str, Any]]) -> int:
    """``COPY <model's table> (<bulk_columns>) FROM STDIN`` of ``rows`` (column -> value;
    the rest from ``default_value``), through a psycopg cursor. Returns the rows written."""
    columns = bulk_columns(model)
    names = [field.column for field in columns]
    defaults: dict[str, Any] = {}  # each column's default, found when a row first needs it

    def default(name: str) -> Any:
        if name not in defaults:
            defaults[name] = default_value(columns[names.index(name)])
        return defaults[name]

    written = 0
    with cursor.copy(f"COPY {model._meta.db_table} ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[name] if name in row else default(name) for name in names])
            written += 1
    return written
