"""The console: checkpoints with their witnesses, witness registration, inclusion status."""

from __future__ import annotations

import time
from http import HTTPStatus

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from nacl.signing import SigningKey

from apps.receipts.models import MirrorEntry
from apps.transparency.models import Witness
from apps.transparency.services import (
    cosignature_submit,
    transparency_publish_epoch,
    witness_register,
)
from apps.transparency.tree import note
from tests.receipts.factories import Agent

pytestmark = pytest.mark.django_db

SEED = bytes(range(32))
KEY = bytes(SigningKey(SEED).verify_key)


@pytest.fixture
def superuser_client(db) -> Client:
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.login(username="root", password="pw-root")
    return client


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def test_a_receipt_page_says_whether_the_log_covers_it(cast, push) -> None:
    receipt = Agent().receipt()
    assert push(receipt).status_code == HTTPStatus.CREATED
    entry = MirrorEntry.objects.get(action_hash=receipt["content"]["action_hash"])
    page = f"/admin/receipts/mirrorentry/{entry.pk}/change/"
    assert "not yet in a checkpoint" in member("viewer").get(page).content.decode()
    transparency_publish_epoch()
    html = member("viewer").get(page).content.decode()
    assert "included: org tree size 1, first published in epoch 1" in html


def test_the_latest_checkpoint_is_shown_with_its_witnesses(cast, push, superuser_client) -> None:
    witness_register(name="w1.example", key=note.b64(KEY))
    push(Agent().receipt())
    result = transparency_publish_epoch()
    body = note.checkpoint_body("localhost/v1/log", 1, result.root or b"")
    cosignature_submit(
        checkpoint_size=1, cosignature=note.cosign(SEED, "w1.example", int(time.time()), body)
    )
    listing = member("viewer").get("/admin/transparency/checkpoint/")
    assert listing.status_code == HTTPStatus.OK
    assert "w1.example" in listing.content.decode()
    detail = member("viewer").get("/admin/transparency/checkpoint/1/change/").content.decode()
    assert "localhost/v1/log" in detail
    assert "— w1.example " in detail


def test_operators_register_witnesses_in_the_console(cast, superuser_client) -> None:
    answer = superuser_client.post(
        "/admin/transparency/witness/add/", {"name": "w2.example", "key": note.b64(KEY)}
    )
    assert answer.status_code == HTTPStatus.FOUND
    witness = Witness.objects.get()
    assert witness.vkey == note.vkey_of("w2.example", KEY)
    refused = superuser_client.post(
        "/admin/transparency/witness/add/", {"name": "bad name", "key": note.b64(KEY)}
    )
    assert refused.status_code == HTTPStatus.OK
    assert Witness.objects.count() == 1
    assert member("owner").get("/admin/transparency/witness/add/").status_code == 403
