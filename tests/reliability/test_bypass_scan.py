"""Suite 5: a static scan that fails on any way around the privacy core.

* Noise is drawn only in ``accounting/mechanisms.py``: no call to a sampler of numpy,
  ``random``, ``secrets`` or scipy anywhere else in ``accounting/`` or ``proxy/``, no
  ``import random`` at all, and ``opendp`` imported nowhere else.
* ``proxy/`` sends no SQL that draws randomness inside DuckDB (``random()``, ``setseed``,
  ``uuid()``): the only per-query randomness in the core is the secret seed parameter.
* ``accounting/`` imports nothing from ``proxy``, sqlglot, duckdb or fastapi.

The self-tests run the same scanner over synthetic bad modules, so the scan can fail.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MECHANISMS = Path("accounting/mechanisms.py")

RANDOM_MODULES = ("numpy.random", "random", "secrets", "scipy.stats", "torch", "jax.random")
NOISE_NAMES = frozenset(
    {
        "normal",
        "laplace",
        "gumbel",
        "exponential",
        "gauss",
        "randn",
        "rand",
        "randint",
        "randrange",
        "randbelow",
        "randbits",
        "random",
        "random_sample",
        "standard_normal",
        "standard_exponential",
        "geometric",
        "binomial",
        "poisson",
        "choice",
        "choices",
        "sample",
        "shuffle",
        "permutation",
        "uniform",
        "integers",
        "default_rng",
        "RandomState",
        "Generator",
        "SystemRandom",
        "rvs",
    }
)
# secrets.token_* mint API keys and HMAC secrets: opaque bytes that never enter a
# released value, so they are not noise; numeric draws (randbelow, randbits) are.
FORBIDDEN_IN_ACCOUNTING = ("proxy", "sqlglot", "duckdb", "fastapi")
RANDOM_SQL = re.compile(r"\b(random\s*\(|setseed\b|gen_random_uuid|uuid\s*\()", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    rule: str
    detail: str


def _top(name: str) -> str:
    return name.split(".")[0]


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module path it stands for, from every import in the module."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or _top(a.name)] = a.name if a.asname else _top(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The dotted path of ``a.b.c`` (or ``a.b().c``: a call in the chain keeps its path)."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            parts.append(aliases.get(node.id, node.id))
            return ".".join(reversed(parts))
        else:
            return None


def _is_noise(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    if last == "rvs":
        return True
    return last in NOISE_NAMES and any(dotted.startswith(m + ".") for m in RANDOM_MODULES)


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return [f"{'.' * node.level}{node.module or ''}"]
        base = node.module or ""
        return [base] + [f"{base}.{a.name}" for a in node.names]
    if (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "__import__")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
        )
    ):
        return [node.args[0].value]
    return []


def scan_module(path: Path, rel: Path) -> list[Finding]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases = _aliases(tree)
    in_accounting = rel.parts[0] == "accounting"
    in_proxy = rel.parts[0] == "proxy"
    is_mechanisms = rel == MECHANISMS
    found: list[Finding] = []

    def add(node: ast.AST, rule: str, detail: str) -> None:
        found.append(Finding(str(rel), getattr(node, "lineno", 0), rule, detail))

    for node in ast.walk(tree):
        for module in _imported_modules(node):
            top = _top(module)
            if top == "random":
                add(node, "import-random", module)
            if top == "opendp" and not is_mechanisms:
                add(node, "opendp-outside-mechanisms", module)
            if in_accounting and (
                top in FORBIDDEN_IN_ACCOUNTING or module.lstrip(".").startswith("proxy")
            ):
                add(node, "accounting-imports-forbidden", module)
            if not is_mechanisms and _is_noise(module):
                add(node, "noise-import", module)
        if isinstance(node, (ast.Attribute, ast.Name)) and not is_mechanisms:
            dotted = _dotted(node, aliases)
            if dotted is not None and _is_noise(dotted):
                add(node, "noise-draw", dotted)
        if (
            in_proxy
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and RANDOM_SQL.search(node.value)
        ):
            add(node, "random-in-sql", node.value[:60])
    return found


def scan(root: Path) -> list[Finding]:
    findings: list[Finding] = []
    for package in ("accounting", "proxy"):
        for path in sorted((root / package).rglob("*.py")):
            findings += scan_module(path, path.relative_to(root))
    # One attribute chain is visited once per Attribute node; report each place once.
    return sorted(set(findings), key=lambda f: (f.path, f.line, f.rule, f.detail))


def test_no_bypass_in_the_code_base() -> None:
    modules = list((ROOT / "accounting").rglob("*.py")) + list((ROOT / "proxy").rglob("*.py"))
    assert len(modules) >= 20 and (ROOT / MECHANISMS).exists()
    assert scan(ROOT) == []


def test_mechanisms_is_where_noise_comes_from() -> None:
    # The allowance for mechanisms.py must not be vacuous: it does import OpenDP (inside
    # the functions that build measurements, so a process that draws nothing skips it).
    text = (ROOT / MECHANISMS).read_text()
    assert re.search(r"^\s*(import|from) opendp\b", text, re.MULTILINE)


BAD_ACCOUNTING = """
import random
import numpy as np
import duckdb
from proxy.errors import DPSQLError
from sqlglot import exp
from fastapi import FastAPI
import opendp.prelude as dp
from numpy.random import default_rng
from scipy import stats
import secrets as s


def leak(x):
    a = np.random.normal(0, 1)
    b = np.random.default_rng(0).laplace(0, 1)
    c = default_rng().gumbel()
    d = random.gauss(0, 1)
    e = stats.norm.rvs()
    f = s.randbelow(10)
    g = __import__("random").random()
    return x + a + b + c + d + e + f + g
"""

BAD_PROXY = """
import importlib
from numpy import random as npr

SQL = "SELECT COUNT(*) FROM t WHERE RANDOM() < 0.5"
SEED = "SELECT setseed(0.1)"


def shuffle(rows):
    npr.shuffle(rows)
    importlib.import_module("random")
    return rows
"""

GOOD = """
import math
import numpy as np
from scipy import special, stats


def fine(x):
    return float(np.sum(np.exp(-x))) + stats.norm.ppf(0.9) + special.erf(1.0) + math.pi
"""


@pytest.fixture
def fz_fake_tree(tmp_path: Path) -> Path:
    for package in ("accounting", "proxy"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "accounting" / "bad.py").write_text(BAD_ACCOUNTING)
    (tmp_path / "proxy" / "sub").mkdir()
    (tmp_path / "proxy" / "sub" / "bad.py").write_text(BAD_PROXY)
    (tmp_path / "accounting" / "good.py").write_text(GOOD)
    (tmp_path / "accounting" / "mechanisms.py").write_text(
        "import opendp.prelude as dp\nimport numpy as np\nimport secrets\n"
        "def seed():\n    return secrets.randbits(64)\n"
    )
    return tmp_path


def test_scanner_reports_every_rule_on_a_bad_tree(fz_fake_tree: Path) -> None:
    findings = scan(fz_fake_tree)
    by_path: dict[str, set[str]] = {}
    for f in findings:
        by_path.setdefault(f.path, set()).add(f.rule)
    assert by_path["accounting/bad.py"] == {
        "import-random",
        "opendp-outside-mechanisms",
        "accounting-imports-forbidden",
        "noise-import",
        "noise-draw",
    }
    assert by_path["proxy/sub/bad.py"] == {"import-random", "noise-draw", "random-in-sql"}
    assert "accounting/good.py" not in by_path
    assert "accounting/mechanisms.py" not in by_path
    draws = {f.detail for f in findings if f.rule == "noise-draw"}
    assert {
        "numpy.random.normal",
        "numpy.random.default_rng.laplace",
        "numpy.random.default_rng.gumbel",
        "random.gauss",
        "scipy.stats.norm.rvs",
        "secrets.randbelow",
        "numpy.random.shuffle",
    } <= draws
    forbidden = {f.detail for f in findings if f.rule == "accounting-imports-forbidden"}
    assert {"duckdb", "proxy.errors", "sqlglot", "fastapi"} <= forbidden
    sql = [f for f in findings if f.rule == "random-in-sql"]
    assert len(sql) == 2


def test_scanner_flags_a_single_draw(tmp_path: Path) -> None:
    for package in ("accounting", "proxy"):
        (tmp_path / package).mkdir()
    (tmp_path / "proxy" / "release.py").write_text(
        "import numpy as np\n\n\ndef noisy(v):\n    return v + np.random.laplace(0, 1)\n"
    )
    assert scan(tmp_path) == [Finding("proxy/release.py", 5, "noise-draw", "numpy.random.laplace")]
