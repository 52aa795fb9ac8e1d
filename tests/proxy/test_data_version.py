"""The released data version is keyed (proxy/data_version.py): an analyst who knows the
data file's path and time cannot recover its size from an answer (a probe, 2026-12-02:
the version was sha256(path|size|mtime), and D and D minus one person differ in size)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from proxy.data_version import released_version
from proxy.engine import Engine
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.proxy.conftest import demo_policy


def test_the_label_is_kept_and_the_rest_keyed() -> None:
    assert released_version("2024-06+0123456789abcdef", b"k").startswith("2024-06+")
    assert "0123456789abcdef" not in released_version("2024-06+0123456789abcdef", b"k")
    assert released_version("a+b+c", b"k").startswith("a+b+")
    tag = released_version("0123456789abcdef", b"k")
    assert len(tag) == 16 and "+" not in tag
    assert released_version("x", b"k") == released_version("x", b"k")
    assert released_version("x", b"k") != released_version("x", b"l")
    assert released_version("x", b"k") != released_version("y", b"k")


def _old_version(path: Path, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(f"{path}|{size}|{mtime_ns}\n".encode()).hexdigest()[:16]


def test_an_answer_does_not_reveal_the_files_size(tmp_path: Path) -> None:
    db = generate(tmp_path / "usage.duckdb", people=40, prompts=200, seed=3)
    policy = demo_policy(tmp_path, db)
    st = os.stat(db)
    engine = Engine(policy)
    try:
        result = engine.run(QueryRequest("SELECT COUNT(*) AS n FROM users", epsilon=1.0))
        public = engine.run(QueryRequest("SELECT 1 AS one"))
        released = {result.privacy.data_version, public.privacy.data_version}
        assert len(released) == 1
        # An attacker's search over sizes around the true one finds no match.
        found = [
            size
            for size in range(st.st_size - 4096, st.st_size + 4096)
            if _old_version(db, size, st.st_mtime_ns) in released
        ]
        assert found == []
        assert policy.data_version == _old_version(db, st.st_size, st.st_mtime_ns)
        assert policy.data_version not in released
    finally:
        engine.close()
    # The key lives in the release store: another process (a new Engine) names the same
    # data alike, so its cached releases are found.
    again = Engine(policy)
    try:
        assert again.policy.data_version in released
    finally:
        again.close()
