"""Tests: only speed-ups over base.py."""

from config.settings.base import *

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False
