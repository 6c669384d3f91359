import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line
from apps.receipts.verifier.verify import content_hash
from apps.transparency.tree.merkle import verify_consistency, verify_inclusion
from apps.transparency.tree.note import is_hex64, verify_cosignature_line
from apps.transparency.tree.proof import ProofVerdict, verify_proof


def _hashes(value: Any) -> list[bytes] | None:
    if not isinstance(value, list) or not all(is_hex64(item) for item in value):
        return None
    return [bytes.fromhex(item) for item in value]


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _op_inclusion(line: dict[str, Any]) -> bool:
    proof = _hashes(line.get("proof"))
    if proof is None or not is_hex64(line.get("leaf_hash")) or not is_hex64(line.get("root")):
        return False
    if not _int(line.get("index")) or not _int(line.get("size")):
        return False
    return verify_inclusion(
        bytes.fromhex(line["leaf_hash"]),
        line["index"],
        line["size"],
        proof,
        bytes.fromhex(line["root"]),
    )


def _op_consistency(line: dict[str, Any]) -> bool:
    proof = _hashes(line.get("proof"))
    first_root, second_root = line.get("first_root"), line.get("second_root")
    if proof is None or not isinstance(first_root, str) or not isinstance(second_root, str):
        return False
    if not is_hex64(first_root) or not is_hex64(second_root):
        return False
    if not _int(line.get("first")) or not _int(line.get("second")):
        return False
    return verify_consistency(
        line["first"], line["second"], bytes.fromhex(first_root), bytes.fromhex(second_root), proof
    )


def _op_cosignature(line: dict[str, Any]) -> bool:
    values = (line.get("vkey"), line.get("body"), line.get("line"))
    if not all(isinstance(value, str) for value in values):
        return False
    return verify_cosignature_line(*values)  # type: ignore[arg-type]


def verify_line(line: Any) -> ProofVerdict:
    """One ``--jsonl`` line (§9)."""
    if not isinstance(line, dict):
        return ProofVerdict(valid=False, reason="bad_input", detail="not a JSON object")
    op = line.get("op", "verify_proof")
    if op == "verify_proof":
        return verify_proof(
            action_hash=line.get("action_hash"),
            proof=line.get("proof"),
            origin=line.get("origin"),
            witness_keys=line.get("witness_keys"),
            required_cosignatures=line.get("required_cosignatures"),
            org_id=line.get("org_id"),
        )
    checks = {
        "verify_inclusion": _op_inclusion,
        "verify_consistency": _op_consistency,
        "verify_cosignature": _op_cosignature,
    }
    if op not in checks:
        return ProofVerdict(valid=False, reason="bad_input", detail=f"unknown op {op!r}")
    if checks[op](line):
        return ProofVerdict(valid=True)
    return ProofVerdict(valid=False, reason="invalid", detail=f"{op} failed")


def _read(source: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as error:
        raise CommandError(f"cannot read {source}: {error.strerror}") from error


class Command(BaseCommand):
    help = (
        "Verify a receipt's transparency[] proofs offline (transparency.md §7, §9) against "
        "a trusted origin, witness keys and a quorum; or, with --jsonl, one check per input "
        "line. Exit 0 iff everything verifies."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("receipt", nargs="?", help="a receipt's JSON file, or -")
        parser.add_argument("--jsonl", metavar="FILE", help="machine-readable mode (file or -)")
        parser.add_argument("--origin")
        parser.add_argument("--witness-key", nargs="*", default=[], metavar="VKEY")
        parser.add_argument("--required", type=int, default=None)
        parser.add_argument("--org-id", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["jsonl"] is not None:
            self._jsonl(options["jsonl"])
            return
        if options["receipt"] is None or options["origin"] is None:
            raise CommandError("give a receipt file (or -) and --origin, or --jsonl")
        if options["required"] is None:
            raise CommandError("--required K: how many trusted cosignatures are required")
        try:
            receipt = json.loads(_read(options["receipt"]))
            action_hash = content_hash(receipt["content"])
            proofs = receipt.get("transparency", [])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CommandError(f"not a receipt: {error}") from error
        if not isinstance(proofs, list) or not proofs:
            missing = {"valid": False, "reason": "malformed", "detail": "no transparency proof"}
            self.stdout.write(json_line(missing))
            sys.exit(1)
        all_valid = True
        for proof in proofs:
            verdict = verify_proof(
                action_hash=action_hash,
                proof=proof,
                origin=options["origin"],
                witness_keys=options["witness_key"],
                required_cosignatures=options["required"],
                org_id=options["org_id"],
            )
            shown: dict[str, Any] = {
                "log_id": proof.get("log_id") if isinstance(proof, dict) else None,
                "leaf_index": proof.get("leaf_index") if isinstance(proof, dict) else None,
                **verdict.as_dict(),
            }
            self.stdout.write(json_line(shown))
            all_valid = all_valid and verdict.valid
        if not all_valid:
            sys.exit(1)

    def _jsonl(self, source: str) -> None:
        data = _read(source)
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        all_valid = True
        for raw in lines:
            try:
                line = json.loads(raw)
            except ValueError:
                line = None
            verdict = verify_line(line)
            self.stdout.write(json_line(verdict.as_dict()))
            all_valid = all_valid and verdict.valid
        if not all_valid:
            sys.exit(1)
