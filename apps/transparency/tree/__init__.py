"""The transparency log's byte-exact core (transparency.md §2-§7): no Django here.

* :mod:`.merkle`: RFC 6962 hashing, proof generation from a store of perfect-subtree
  hashes, RFC 9162 verification, and appending leaves to a stored tree.
* :mod:`.note`: org-head leaves, checkpoint bodies and notes, witness vkeys and
  ``cosignature/v1`` lines.
* :mod:`.tiles`: C2SP ``tlog-tiles`` paths and entry bundles.
* :mod:`.proof`: the offline verdict on a receipt's proof object (§7).
"""
