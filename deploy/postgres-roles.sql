-- PostgreSQL roles and database for a deployment with row-level security. Run it once, as a
-- superuser, with psql (docs/production.md, "Database roles"):
--
--   psql -v ON_ERROR_STOP=1 -v db=mirror -v owner=mirror_owner -v app=mirror_app \
--        -v owner_password=... -v app_password=... -f deploy/postgres-roles.sql
--
-- The owner role owns the tables: `manage.py migrate` connects as it
-- (MIGRATION_DATABASE_URL) and grants row access to the application role afterwards. The
-- application role is what the web and task workers connect as (DATABASE_URL): not a
-- superuser, no BYPASSRLS, so every org-scoped table's policy applies to it
-- (`manage.py check --database default` verifies this).
CREATE ROLE :"owner" LOGIN PASSWORD :'owner_password';
CREATE ROLE :"app" LOGIN PASSWORD :'app_password' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
CREATE DATABASE :"db" OWNER :"owner";
\connect :"db"
-- PostgreSQL 15+: only the owner may create objects in the public schema.
ALTER SCHEMA public OWNER TO :"owner";
GRANT USAGE ON SCHEMA public TO :"app";
