"""Local development: debug on unless the environment says otherwise."""

from config.env import env_bool
from config.settings.base import *

DEBUG = env_bool("DEBUG", True)
