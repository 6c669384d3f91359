# The two commands the README leads with: `make run` and `make test`.
# Both work on a fresh machine with Python 3.11+ and nothing else installed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Where `make run` serves: `make run HOST=127.0.0.1:8001` (or 0.0.0.0:8000 to be reached
# from other machines: add the name to ALLOWED_HOSTS). Checked free before anything runs.
HOST ?= 127.0.0.1:8000

.PHONY: run test lint typecheck checks pytest bench docs clean

$(VENV)/.installed: requirements/base.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

# bootstrap_demo checks the port before it migrates: a taken port is refused before anything
# is written.
run: $(VENV)/.installed
	$(PY) manage.py bootstrap_demo --bind $(HOST) --migrate
	@echo
	@echo "Countersign is starting on http://$(HOST)/ with one background worker beside it"
	@echo "(every queue: webhooks, emails, approval expiry, exports). Ctrl-C stops both."
	@export PUBLIC_BASE_URL=http://$(HOST); \
	$(PY) manage.py run_worker --queues default,periodic,deliveries:2 & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	$(PY) manage.py runserver $(HOST)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy apps clients config

# Migrations up to date, and the production settings pass Django's deployment checks.
# The deploy check reads the settings only (no --database): its secret, secrets key, hosts
# and origin are placeholders, so comparing them with whatever database this checkout
# points at (the demo's db.sqlite3, whose log `make run` published under localhost/v1/log) would only
# report the placeholders. The database checks (the application role, the log's stored
# origin) run where the deployment's database is: its `migrate`, and
# `manage.py check --deploy --database default` there.
checks: $(VENV)/.installed
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) manage.py makemigrations --check --dry-run
	DJANGO_SETTINGS_MODULE=config.settings.production \
	DJANGO_SECRET_KEY=check-deploy-$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))') \
	ALLOWED_HOSTS=mirror.example.com TRANSPARENCY_ORIGIN=mirror.example.com/v1/log \
	SECRETS_ENCRYPTION_KEYS=$$($(PY) -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())') \
	$(PY) manage.py check --deploy --fail-level WARNING

# The append's tests once more with psycopg's public pipeline (DB_APPEND_PIPELINE=psycopg),
# the fallback of the default libpq one: the transaction, quota thresholds, reconnection,
# outage and batches (93 tests, about 45 s).
PIPELINE_TESTS := tests/receipts/test_append_transaction.py tests/receipts/test_quota_thresholds.py \
	tests/tenancy/test_org_context_reconnect.py tests/common/test_outage_logging.py \
	tests/common/test_prepared.py tests/receipts/test_teampath_batch_api.py \
	tests/receipts/test_push_concurrency.py tests/receipts/test_teampath_batch_concurrency.py

pytest: $(VENV)/.installed
	$(VENV)/bin/pytest
	DB_APPEND_PIPELINE=psycopg $(VENV)/bin/pytest -q $(PIPELINE_TESTS)

test: lint typecheck checks pytest

bench: $(VENV)/.installed
	$(PY) deploy/bench/verify.py

# The documentation site (docs/conf.py), rebuilt from scratch (-E: every page read again, so
# every warning is reported again) with warnings as errors: a broken link or anchor, or a
# page in no table of contents, fails. Written to docs/_build/html (git-ignored).
docs: $(VENV)/.installed
	rm -rf docs/_build
	$(VENV)/bin/sphinx-build -E -W --keep-going -b html -d docs/_build/doctrees docs docs/_build/html
	@echo "documentation written to docs/_build/html/index.html"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache docs/_build

# Full-page screenshots of every console screen, signed in as the demo's owner over its data
# (and what the SDK steps of docs/sdk.md add), at 1366 x 768, for
# review: written to screenshots/ (git-ignored). Needs /usr/bin/chromium.
SCREENSHOTS ?= screenshots
.PHONY: screenshots
screenshots: $(VENV)/.installed
	rm -rf $(SCREENSHOTS)
	CONSOLE_SCREENSHOTS=$(abspath $(SCREENSHOTS)) $(VENV)/bin/pytest -q -p no:cacheprovider \
		tests/console/test_console_screens.py
	@echo "screenshots written to $(SCREENSHOTS)/"
