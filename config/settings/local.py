"""Local development: debug on unless the environment says otherwise."""

from config.env import env_bool
from config.settings.base import *

DEBUG = env_bool("DEBUG", True)

# A webhook receiver on this machine is the usual trial.
WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = env_bool("WEBHOOK_ALLOW_PRIVATE_DESTINATIONS", True)
SSO_ALLOW_HTTP_ISSUERS = env_bool("SSO_ALLOW_HTTP_ISSUERS", True)
