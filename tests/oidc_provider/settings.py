"""The test provider's settings (its own project: nothing of the service's)."""

import os
from pathlib import Path

from jwcrypto import jwk

HERE = Path(__file__).resolve().parent
PORT = int(os.environ["OIDC_PROVIDER_PORT"])
ISSUER = f"http://127.0.0.1:{PORT}/o"
SETUP_SECRET = os.environ["OIDC_PROVIDER_SETUP_SECRET"]

SECRET_KEY = os.urandom(32).hex()
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}
}
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/accounts/login/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A new RSA key each start: the relying party must fetch it from the JWKS endpoint.
SIGNING_KEY = jwk.JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None)
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": SIGNING_KEY.decode(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "PKCE_REQUIRED": True,
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Email address",
        "profile": "Profile",
        "groups": "Groups",
    },
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.ProviderValidator",
}
