# The two commands the README leads with: `make run` and `make test`.
# Both work on a fresh machine with Python 3.11+ and nothing else installed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1:8000

.PHONY: run test lint typecheck checks pytest bench clean

$(VENV)/.installed: requirements/base.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

run: $(VENV)/.installed
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap_demo --console-url http://$(HOST)/admin/
	$(PY) manage.py runserver $(HOST)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy apps config

# Migrations up to date, and the production settings pass Django's deployment checks.
checks: $(VENV)/.installed
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) manage.py makemigrations --check --dry-run
	DJANGO_SETTINGS_MODULE=config.settings.production \
	DJANGO_SECRET_KEY=check-deploy-$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))') \
	ALLOWED_HOSTS=mirror.example.com \
	$(PY) manage.py check --deploy --database default --fail-level WARNING

pytest: $(VENV)/.installed
	$(VENV)/bin/pytest

test: lint typecheck checks pytest

bench: $(VENV)/.installed
	$(PY) deploy/bench/verify.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
