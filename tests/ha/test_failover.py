"""High availability: the primary PostgreSQL is killed under load (deploy/ha/failover_drill.py).

Runs etcd and two Patroni-managed PostgreSQL nodes on the loopback address, two deployments
(key-scoped with its task worker, team-path) reaching the primary through libpq's multi-host
DATABASE_URL, SDK-shaped pushes, batches and votes from several clients, and a SIGKILL of the
primary's postmaster mid-run. `.ci/run` installs Debian's patroni and etcd-server.
"""

from __future__ import annotations

import json

import pytest

from deploy.ha.cluster import missing_tools
from deploy.ha.failover_drill import drill

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def report(request):
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    return write


@pytest.mark.skipif(
    bool(missing_tools()), reason=f"needs {', '.join(missing_tools())}: .ci/run installs them"
)
def test_a_killed_primary_fails_over_without_losing_an_acknowledged_write(report):
    figures = drill(seconds=15, kill_after=5, clients=3)
    report(
        "\nfailover: unavailability window "
        f"{figures['unavailability_window_s']} s (failures spanned {figures['failure_span_s']} s), "
        f"acknowledged {figures['acknowledged']} / in the chain {figures['in_chain']}, "
        f"votes {figures['votes_acknowledged']} acknowledged "
        f"({figures['votes_reconciled_after_a_lost_answer']} after a lost answer) / "
        f"{figures['votes_recorded']} recorded, "
        f"old primary back as standby after {figures['old_primary_back_as_standby_after_s']} s"
    )
    assert figures["ok"], json.dumps(figures, default=str)
    assert figures["acknowledged_but_lost"] == {"ks": 0, "tp": 0}
    # Some requests met the failover (else the drill proved nothing), and it was short.
    assert figures["failure_span_s"] > 0
    assert figures["unavailability_window_s"] < 30
