"""The transparency log (transparency.md): ``tree/`` (pure Python: RFC 6962 trees and
proofs, checkpoints, cosignatures, tiles), per-org trees extended from the mirror, epochs
publishing the top log and its checkpoints, witnesses and their cosignatures, and the
verify, witness and monitor tools. The service holds no log signing key: witnesses sign.
"""
