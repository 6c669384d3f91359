-- PostgreSQL roles for a deployment with row-level security (run once, as a superuser).
--
-- mirror_owner owns the tables: `manage.py migrate` connects as it (MIGRATION_DATABASE_URL)
-- and grants row access to the application role afterwards. mirror_app is what the web
-- workers connect as (DATABASE_URL): not a superuser, no BYPASSRLS, so every org-scoped
-- table's policy applies to it (`manage.py check --database default` verifies this).
CREATE ROLE mirror_owner LOGIN PASSWORD 'change-me-owner';
CREATE ROLE mirror_app LOGIN PASSWORD 'change-me-app' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
CREATE DATABASE mirror OWNER mirror_owner;
\connect mirror
-- PostgreSQL 15+: only the owner may create objects in the public schema.
ALTER SCHEMA public OWNER TO mirror_owner;
GRANT USAGE ON SCHEMA public TO mirror_app;
