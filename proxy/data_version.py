"""The data version an answer names: the policy's identity of the data, keyed.

The policy derives the data's identity from its files' paths, sizes and modification
times (proxy/policy.py). A size is a function of every person's rows, so releasing that
hash as it was (in every answer, the X-DPSQL-Data-Version header and, through the cache
key, ``explain``) let an analyst who knows the path and the time recover the size by
trying candidates, and tell D from D minus one person (a probe, 2026-12-02). What is
released is an HMAC of the identity under a random key kept in the release store, which
every process and host sharing the store shares: the same data still gets the same
version (so cached releases are found), other data another one, and the version says
nothing else. The operator's own label (``[database] version``) is shown as written.
"""

from __future__ import annotations

import hashlib
import hmac

KEY_BYTES = 32


def released_version(identity: str, key: bytes) -> str:
    """``identity`` (the policy's ``data_version``: ``label+files`` or ``files``) as it
    is released: the label, if any, then 16 hex digits of the keyed hash of the whole."""
    tag = hmac.new(key, identity.encode(), hashlib.sha256).hexdigest()[:16]
    label, plus, _ = identity.rpartition("+")
    return f"{label}+{tag}" if plus else tag
