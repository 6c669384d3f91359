#!/bin/sh
# Runs once, when the postgres container initialises an empty data directory
# (/docker-entrypoint-initdb.d): the owner and application roles of deploy/postgres-roles.sql.
# The image's POSTGRES_USER is a superuser and only runs this script; the service never
# connects as it (system check mirror.E101 refuses a superuser).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v db="$MIRROR_DB" -v owner="$MIRROR_OWNER" -v app="$MIRROR_APP" \
  -v owner_password="$MIRROR_OWNER_PASSWORD" -v app_password="$MIRROR_APP_PASSWORD" \
  -f /deploy/postgres-roles.sql
