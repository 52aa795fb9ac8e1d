"""Values that collide in DuckDB's own (unkeyed) hash, built by inverting it: for the
keyed-grouping tests (tests/proxy/test_keyed_groups.py) and the hash-flooding benchmark
(bench/hash_flooding.py). DuckDB 2.0's hash of a 64-bit integer is an invertible
multiply-xorshift mix; a text is hashed 8 bytes at a time (xor, multiply) from a seed
that depends on its length, then mixed the same way. PostgreSQL's hash of a BIGINT
folds it to 32 bits first (:func:`pg_folded_integers`). Spark's hash aggregation hashes a
key's UnsafeRow bytes with Murmur3, whose every step can be solved for its last block
(:func:`spark_colliding_integers`)."""

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


def texts_hashing_to(targets: list[int]) -> list[str]:
    """One printable 16-character text (no quote) per target, whose DuckDB hash is that
    target: as :func:`colliding_texts`, with the last state solved for each target."""
    m, minv = np.uint64(_M), np.uint64(_MINV)
    shift = np.uint64(32)
    seed = np.uint64((0xE17A1465 ^ ((16 * 0xC6A4A7935BD1E995) & _MASK)) & _MASK)
    rng = np.random.default_rng(2)
    out = []
    with np.errstate(over="ignore"):
        for t in targets:
            x = np.uint64(t)
            x = (x ^ (x >> shift)) * minv
            x = (x ^ (x >> shift)) * minv
            state = (x ^ (x >> shift)) * minv
            while True:
                first = rng.integers(0x20, 0x7F, size=(40_000, 8), dtype=np.uint8)
                first[first == 0x27] = 0x41
                blocks = first.view("<u8").ravel()
                chars = (((seed ^ blocks) * m) ^ state).view(np.uint8).reshape(-1, 8)
                ok = np.flatnonzero(
                    np.all((chars >= 0x20) & (chars < 0x7F) & (chars != 0x27), axis=1)
                )
                if ok.size:
                    out.append(first[ok[0]].tobytes().decode() + chars[ok[0]].tobytes().decode())
                    break
    return out


def double_hashing_to(target: int) -> float:
    """A DOUBLE whose DuckDB hash is ``target`` (DuckDB hashes a DOUBLE's bits as a
    BIGINT), or NaN when those bits are not a finite number."""
    import struct

    bits = _int_preimage(target) & _MASK
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def pg_folded_integers(n: int) -> list[int]:
    """``n`` distinct BIGINTs that PostgreSQL's ``hashint8`` (and ``hashint8extended``
    under every seed, and so ``hash_record_extended``) hashes alike: it hashes the low
    half XOR the high half, so high half h and low half 12345 XOR h fold to 12345."""
    return [(h << 32) | (12345 ^ h) for h in range(1, n + 1)]


# --- Spark --------------------------------------------------------------------------
# Spark's hash aggregation (HashAggregateExec, its generated code and
# TungstenAggregationIterator alike) looks each grouping key up in a BytesToBytesMap by
# the key's UnsafeRow ``hashCode()``: Murmur3_x86_32 with seed 42 over the row's bytes, 4
# at a time (a word of null bits, then each fixed-width field's 8 bytes, little end first),
# finished by ``fmix`` with the row's length. The map probes from the hash's low bits and
# compares the stored full 32-bit hash before the bytes, so rows with one full hash share
# one probe sequence: inserting n of them costs n^2/2 probes (each a compare of the bytes).
# Every Murmur3 step is a bijection of the state for a given 4-byte block, and of the
# block for a given state, so the last block of a key can be solved for any target.

_C1, _C2, _N = 0xCC9E2D51, 0x1B873593, 0xE6546B64
_U32 = 0xFFFFFFFF
_SPARK_SEED = 42  # UnsafeRow.hashCode
_SPARK_TARGET = 0x5A5A5A5A  # the state every planted key reaches before fmix


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def _mix_k(k: int) -> int:
    return (_rotl((k * _C1) & _U32, 15) * _C2) & _U32


def _unmix_k(m: int) -> int:
    return (_rotl((m * pow(_C2, -1, 1 << 32)) & _U32, 17) * pow(_C1, -1, 1 << 32)) & _U32


def _step(h: int, k: int) -> int:
    """Murmur3_x86_32's state after the 4-byte block ``k`` (unsigned) from state ``h``."""
    return (_rotl(h ^ _mix_k(k), 13) * 5 + _N) & _U32


def _block_to(h: int, target: int) -> int:
    """The 4-byte block that takes state ``h`` to ``target``."""
    return _unmix_k(_rotl(((target - _N) * pow(5, -1, 1 << 32)) & _U32, 19) ^ h)


def _fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _U32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _U32
    return h ^ (h >> 16)


def _signed(x: int, bits: int) -> int:
    return x - (1 << bits) if x >= 1 << (bits - 1) else x


def spark_row_hash(*values: int) -> int:
    """Spark's ``UnsafeRow.hashCode()`` (a Java int) of a row of non-null BIGINTs (up to
    64 fields: one word of null bits)."""
    h = _step(_step(_SPARK_SEED, 0), 0)
    for v in values:
        v &= (1 << 64) - 1
        h = _step(_step(h, v & _U32), v >> 32)
    return _signed(_fmix(h, 8 * (1 + len(values))), 32)


def _unstep(h: int, k: int) -> int:
    """The state that the block ``k`` takes to ``h``."""
    return _rotl(((h - _N) * pow(5, -1, 1 << 32)) & _U32, 19) ^ _mix_k(k)


def spark_aligned_user() -> int:
    """The BIGINT below 2^32 after whose 8 bytes Murmur3's state is back where it was
    before them (after the row's word of null bits): the UnsafeRow (this user, p) then
    hashes as the UnsafeRow (p) does, up to the length ``fmix`` mixes in, for every p."""
    start = _step(_step(_SPARK_SEED, 0), 0)
    return _block_to(start, _unstep(start, 0))  # the high half 0 then takes it back


def spark_colliding_integers(n: int, user_id: int | None = None) -> list[int]:
    """``n`` distinct BIGINTs p whose UnsafeRows (``user_id``, p) all have one and the same
    Spark ``hashCode()``: one BytesToBytesMap probe sequence. With ``user_id``
    :func:`spark_aligned_user` (the default) the one-column rows (p) all collide as well;
    with any other user they do not (both at once is two 32-bit conditions on p's 64 bits:
    about one p per pair of targets). Spark SQL's ``hash(p)`` is Murmur3 too, but over p
    alone from seed 42 and finished with length 8: these p do not collide there.

    In front of the BytesToBytesMap, Spark's generated code keeps a first-level "fast"
    map (RowBasedAggregateHashMap: 2^16 rows, 2^17 buckets, 2 probes, then the key goes
    to the BytesToBytesMap) whose bucket is the low 17 bits of ``h = (h ^ 0x9e3779b9) +
    key + (h << 6) + (h >>> 2)`` over the keys: for BIGINT keys ending in p, p's low 17
    bits and the keys before it. So p's low 17 bits are one value (for each 2^15 of them,
    the next value), the 15 bits above them count, and the high half is solved for: the
    fast map takes two of them and hands every other to the flooded map."""
    user = spark_aligned_user() if user_id is None else user_id
    start = _step(_step(_SPARK_SEED, 0), 0)
    if user_id is not None:
        start = _step(_step(start, user & _U32), (user >> 32) & _U32)
    c1, c2, n5 = np.uint32(_C1), np.uint32(_C2), np.uint32(_N)
    inv1, inv2 = np.uint32(pow(_C1, -1, 1 << 32)), np.uint32(pow(_C2, -1, 1 << 32))

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return (x << np.uint32(r)) | (x >> np.uint32(32 - r))

    i = np.arange(n, dtype=np.uint32)
    low = ((i & np.uint32(0x7FFF)) << np.uint32(17)) | (np.uint32(0xA5A5) + (i >> np.uint32(15)))
    state = rotl(np.uint32(start) ^ (rotl(low * c1, 15) * c2), 13) * np.uint32(5) + n5
    mixed = np.uint32(_rotl(((_SPARK_TARGET - _N) * pow(5, -1, 1 << 32)) & _U32, 19)) ^ state
    high = rotl(mixed * inv2, 17) * inv1
    ids = (high.astype(np.uint64) << np.uint64(32)) | low.astype(np.uint64)
    return ids.view(np.int64).tolist()
