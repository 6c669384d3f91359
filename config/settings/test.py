"""Tests: only speed-ups over base.py."""

from config.settings.base import *

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False

# Test code reads and writes every org's rows directly; requests still run in their org.
ORG_CONTEXT_DEFAULT = "all"
