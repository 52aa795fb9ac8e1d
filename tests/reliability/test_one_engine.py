"""One engine behind every door (issue #11): a static scan of the doors.

The CLI, the HTTP server, the Trino door and the PostgreSQL door reach the ledger only
through the engine and its budgets façade (``proxy/budgets.py``): none imports
``accounting.ledger`` or a ledger store, none touches an ``.ledger`` attribute, and none
compares mechanism names or does privacy arithmetic (noise scales, curves, conversions)
itself. The self-test runs the scanner over a synthetic door, so the scan can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOORS = ("proxy/cli.py", "proxy/server", "proxy/trino", "proxy/pgwire")
LEDGER_MODULES = ("accounting.ledger", "accounting.store_sqlite", "accounting.store_postgres")
# Privacy arithmetic a door must not do: it calls the engine for all of it.
ARITHMETIC_MODULES = (
    "accounting.rdp",
    "accounting.mechanisms",
    "accounting.partition",
    "accounting.sensitivity",
    "accounting.calibrate",
)
MECHANISM_NAMES = frozenset({"gaussian", "laplace"})


def _door_files() -> list[Path]:
    out: list[Path] = []
    for door in DOORS:
        path = ROOT / door
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def scan(source: str, name: str) -> list[str]:
    """Findings (one line each) for one door module."""
    findings = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        for module in modules:
            if module.startswith(LEDGER_MODULES):
                findings.append(f"{name}:{node.lineno}: imports {module}")
            if module.startswith(ARITHMETIC_MODULES):
                findings.append(f"{name}:{node.lineno}: privacy arithmetic from {module}")
        if isinstance(node, ast.Attribute) and node.attr == "ledger":
            findings.append(f"{name}:{node.lineno}: reaches .ledger")
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in MECHANISM_NAMES:
                    findings.append(f"{name}:{node.lineno}: compares a mechanism name")
    return findings


def test_no_module_outside_accounting_compares_mechanism_names() -> None:
    findings = []
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        findings += [
            f
            for f in scan(path.read_text(), str(path.relative_to(ROOT)))
            if "compares a mechanism name" in f
        ]
    assert findings == [], "\n".join(findings)


def test_the_doors_reach_the_ledger_only_through_the_engine() -> None:
    findings = []
    files = _door_files()
    assert len(files) > 10
    for path in files:
        findings += scan(path.read_text(), str(path.relative_to(ROOT)))
    assert findings == [], "\n".join(findings)


def test_the_scan_catches_a_door_that_goes_around_the_engine() -> None:
    bad = (
        "from accounting.store_sqlite import SQLiteLedger\n"
        "import accounting.rdp\n"
        "def f(ctx, mech):\n"
        "    ctx.engine.ledger.charge('users')\n"
        "    return mech == 'gaussian'\n"
    )
    found = scan(bad, "bad.py")
    assert len(found) == 4, found
