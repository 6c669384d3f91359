"""An S3-compatible server for the tests: moto's standalone server (``python -m
moto.server``), started once per test session as its own process on a free port of
127.0.0.1 and stopped at the end. It keeps buckets in its memory and implements the S3 API
the archive uses over HTTP: versioning, object lock (default retention, refused deletes),
multipart uploads. The service talks to it through django-storages and boto3 exactly as to
a provider's bucket; nothing in the service's process is patched."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.child_env import child_environment, free_port, serving

# What boto3 signs with: the test server accepts any key (a bucket's service checks them).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "archive-test-key",
    "AWS_SECRET_ACCESS_KEY": "archive-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen[bytes]

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )  # fmt: skip

    def bucket(self, *, lock: dict[str, Any] | None = None, versioned: bool = False) -> str:
        """A new bucket: with object lock and ``lock`` as its default retention (e.g.
        ``{"Mode": "COMPLIANCE", "Days": 1}``), or plain (versioned or not)."""
        name = f"archive-{uuid.uuid4().hex[:12]}"
        client = self.client()
        client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=lock is not None)
        if lock is not None:
            client.put_object_lock_configuration(
                Bucket=name,
                ObjectLockConfiguration={
                    "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": lock},
                },
            )  # fmt: skip
        elif versioned:
            client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        return name


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with (
        tempfile.TemporaryDirectory(prefix="s3-server-") as home,
        serving(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=child_environment(), cwd=home, log=Path(home, "s3.log"),
            ready=lambda: requests.get(f"{endpoint}/moto-api/", timeout=2).status_code < 500,
        ) as process,
    ):  # fmt: skip
        yield S3Server(endpoint=endpoint, process=process)
