from typing import Any

from django.db import migrations


def encode_webhook_urls(apps: Any, schema_editor: Any) -> None:
    """Endpoints stored before URLs were encoded get the encoded form they are sent with
    (IDNA host, percent-encoded path and query). One that cannot be encoded, or would be
    too long once encoded, stays as it is: each attempt to it fails with the reason, and
    the run of failures disables it as any other."""
    from apps.events.destinations import MAX_URL_LENGTH, DestinationRefused, encoded_url

    WebhookEndpoint = apps.get_model("events", "WebhookEndpoint")
    for endpoint in WebhookEndpoint.objects.filter(url__regex=r"[^\x21-\x7e]").iterator():
        try:
            url = encoded_url(endpoint.url)
        except DestinationRefused:
            continue
        if url != endpoint.url and len(url) <= MAX_URL_LENGTH:
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=url)


class Migration(migrations.Migration):
    dependencies = [("events", "0004_transparency_alert_event")]

    operations = [migrations.RunPython(encode_webhook_urls, migrations.RunPython.noop)]
