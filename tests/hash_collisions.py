"""Values that collide in DuckDB's own (unkeyed) hash, built by inverting it: for the
keyed-grouping tests (tests/proxy/test_keyed_groups.py) and the hash-flooding benchmark
(bench/hash_flooding.py). DuckDB 2.0's hash of a 64-bit integer is an invertible
multiply-xorshift mix; a text is hashed 8 bytes at a time (xor, multiply) from a seed
that depends on its length, then mixed the same way. PostgreSQL's hash of a BIGINT
folds it to 32 bits first (:func:`pg_folded_integers`)."""

from __future__ import annotations

import numpy as np

_M = 0xD6E8FEB86659FD93
_MASK = (1 << 64) - 1
_MINV = pow(_M, -1, 1 << 64)


def _unmix(x: int) -> int:
    return x ^ (x >> 32)


def _int_preimage(h: int) -> int:
    """The BIGINT whose DuckDB hash is ``h`` (DuckDB's integer hash is invertible)."""
    x = _unmix(h)
    x = (x * _MINV) & _MASK
    x = _unmix(x)
    x = (x * _MINV) & _MASK
    x = _unmix(x)
    return x - (1 << 64) if x >= 1 << 63 else x


def colliding_integers(n: int) -> list[int]:
    """``n`` BIGINTs whose hashes agree on the top 16 and the low 24 bits."""
    return [_int_preimage((0xBEEF << 48) | (i << 24) | 0x5A5A5A) for i in range(1, n + 1)]


def colliding_texts(n: int) -> list[str]:
    """``n`` printable 16-character texts with one and the same DuckDB hash: DuckDB hashes
    a text 8 bytes at a time (xor, multiply) before a final mix, so a second block can
    cancel whatever the first did."""
    m, minv = np.uint64(_M), np.uint64(_MINV)
    shift = np.uint64(32)
    seed = np.uint64((0xE17A1465 ^ ((16 * 0xC6A4A7935BD1E995) & _MASK)) & _MASK)
    rng = np.random.default_rng(1)
    target = np.uint64(0x0123456789ABCDEF)
    with np.errstate(over="ignore"):
        x = target ^ (target >> shift)
        x = x * minv
        x = x ^ (x >> shift)
        x = x * minv
        state = (x ^ (x >> shift)) * minv  # the state before the last multiply
        found: set[bytes] = set()
        while len(found) < n:
            first = rng.integers(0x20, 0x7F, size=(400_000, 8), dtype=np.uint8)
            blocks = first.view("<u8").ravel()
            second = ((seed ^ blocks) * m) ^ state
            chars = second.view(np.uint8).reshape(-1, 8)
            ok = np.all((chars >= 0x20) & (chars < 0x7F), axis=1)
            for a, b in zip(blocks[ok], second[ok], strict=True):
                found.add(a.tobytes() + b.tobytes())
    return sorted(s.decode() for s in found)[:n]


def pg_folded_integers(n: int) -> list[int]:
    """``n`` distinct BIGINTs that PostgreSQL's ``hashint8`` (and ``hashint8extended``
    under every seed, and so ``hash_record_extended``) hashes alike: it hashes the low
    half XOR the high half, so high half h and low half 12345 XOR h fold to 12345."""
    return [(h << 32) | (12345 ^ h) for h in range(1, n + 1)]
