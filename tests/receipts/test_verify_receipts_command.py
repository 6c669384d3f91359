import json
from io import BytesIO, StringIO, TextIOWrapper
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.receipts.management.commands.verify_receipts import split_lines

SDK_SESSION = Path(__file__).resolve().parents[1] / "data" / "sdk" / "session_interop.jsonl"


def run(tmp_path, content: bytes, *flags: str) -> tuple[int, list[dict]]:
    source = tmp_path / "receipts.jsonl"
    source.write_bytes(content)
    out = StringIO()
    code = 0
    try:
        call_command("verify_receipts", str(source), *flags, stdout=out)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def test_it_prints_one_verdict_per_line_and_exits_0_when_all_are_valid(tmp_path):
    lines = SDK_SESSION.read_bytes().splitlines()
    code, verdicts = run(tmp_path, b"\n".join(lines) + b"\n")
    assert code == 0
    assert verdicts == [{"kind": "Valid", "trust_level": "L0"}] * len(lines)


def test_a_blank_line_is_malformed_and_the_exit_code_is_1(tmp_path):
    first = SDK_SESSION.read_bytes().splitlines()[0]
    code, verdicts = run(tmp_path, first + b"\n\n" + first)
    assert code == 1
    assert [v["kind"] for v in verdicts] == ["Valid", "Malformed", "Valid"]
    assert "detail" in verdicts[1]


def test_a_tampered_line_reports_its_verdict(tmp_path):
    first = SDK_SESSION.read_bytes().splitlines()[0]
    code, verdicts = run(tmp_path, first.replace(b"q3 filings", b"q4 filings"))
    assert code == 1
    assert verdicts == [{"kind": "HashMismatch"}]


def test_only_lf_separates_lines():
    assert split_lines(b"a\r\nb\xe2\x80\xa8c\n") == [b"a\r", b"b\xe2\x80\xa8c"]
    assert split_lines(b"a\n\nb") == [b"a", b"", b"b"]
    assert split_lines(b"") == []


def test_chain_mode_prints_the_chain_outcome(tmp_path):
    code, outcome = run(tmp_path, SDK_SESSION.read_bytes(), "--chain")
    lines = SDK_SESSION.read_bytes().splitlines()
    assert code == 0
    assert outcome == [{"kind": "Valid", "length": len(lines)}]


def test_chain_mode_catches_a_dropped_receipt(tmp_path):
    lines = SDK_SESSION.read_bytes().splitlines()
    code, outcome = run(tmp_path, b"\n".join([lines[0], *lines[2:]]), "--chain")
    assert code == 1
    assert outcome[0]["kind"] == "LinkBroken"
    assert outcome[0]["seq"] == 2


def test_it_reads_standard_input(monkeypatch):
    first = SDK_SESSION.read_bytes().splitlines()[0]
    monkeypatch.setattr("sys.stdin", TextIOWrapper(BytesIO(first + b"\n")))
    out = StringIO()
    call_command("verify_receipts", "-", stdout=out)
    assert json.loads(out.getvalue()) == {"kind": "Valid", "trust_level": "L0"}


def test_a_missing_file_is_a_clear_error(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="cannot read"):
        call_command("verify_receipts", str(tmp_path / "absent.jsonl"), stdout=StringIO())
