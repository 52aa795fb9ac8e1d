"""A cold `dpsql` imports only what its command needs (issue 18: start-up was almost all
imports). Each run is a new process on a real PUMS policy; the modules left out are the
ones that cost most of a start-up and that the command never uses: scipy (the Gaussian
mechanism on public keys needs none of it), pandas (pyarrow's pandas probe, skipped by
the CLI), asyncio (through wrapt 2), the HTTP server's stack and the PostgreSQL door;
`--help` imports none of the engine's libraries. Assertions are on ``sys.modules``, not on time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.proxy.conftest import ROOT

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
SERVER = ("fastapi", "uvicorn", "starlette", "pydantic", "proxy.server", "proxy.pgwire")
# asyncio: wrapt 2 (imported by OpenDP's `deprecated` decorators) imports it at import,
# with ssl and subprocess, about 30 ms of a cold query (pyproject.toml pins wrapt<2).
HEAVY = ("scipy", "pandas", "asyncio", "ssl", *SERVER)
ENGINE = ("numpy", "duckdb", "pyarrow", "sqlglot", "opendp", "rich", "proxy.engine")

# The report is printed by an exit handler: a one-shot command ends its process itself
# once done (proxy.cli._exit_now), after running the exit handlers.
_RUN = """
import atexit, gc, json, os, runpy, sys
sys.argv = ["dpsql", *sys.argv[1:]]
code = None

@atexit.register
def report():
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    print(json.dumps({"code": code, "modules": sorted(sys.modules), "gc": gc.isenabled(),
                      "blas": blas}))

try:
    runpy.run_module("proxy.cli", run_name="__main__")
except SystemExit as exit_:
    code = exit_.code
"""


def _policy(tmp: Path) -> Path:
    text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{ROOT / "sample_data" / "pums" / "PUMS_pid.csv"}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    path = tmp / "policy.toml"
    path.write_text(text)
    return path


def _dpsql(policy: Path, *args: str) -> tuple[str, set[str]]:
    """(stdout, the modules imported) of one `dpsql --policy POLICY ARGS` process."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, "--policy", str(policy), *args],
        cwd=policy.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None), proc.stderr
    return proc.stdout, set(report["modules"])


def _query(policy: Path) -> set[str]:
    out, modules = _dpsql(policy, "query", SQL, "--epsilon", "1")
    assert "n:" in out  # the answer was printed, with its interval
    return modules


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The ``names`` (packages count with their submodules) among ``modules``."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_a_cold_query_leaves_the_heavy_modules_alone(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    first = _query(policy)  # planned, charged, run and noised
    assert {"duckdb", "sqlglot", "pyarrow"} <= first  # it did answer for real
    assert "opendp" in first  # the draw
    assert not _loaded(first, HEAVY), _loaded(first, HEAVY)
    again = _query(policy)  # answered from the release store
    assert not _loaded(again, HEAVY), _loaded(again, HEAVY)
    assert "opendp" not in again  # a replay draws nothing


def test_schema_and_help_leave_the_server_alone(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    out, schema = _dpsql(policy, "schema", "--format", "json")
    assert json.loads(out.split("\n{", 1)[0])[0]["name"] == "pums.pums"
    assert "proxy.engine" in schema  # it read the catalog through the engine
    assert not _loaded(schema, HEAVY), _loaded(schema, HEAVY)
    out, csv = _dpsql(policy, "query", SQL, "--epsilon", "1", "--format", "csv")
    assert out.startswith("sex,n,")  # rendered by proxy.server.formats, as over HTTP
    assert "proxy.server.formats" in csv
    assert not _loaded(csv, ("fastapi", "uvicorn", "starlette", "proxy.server.app")), _loaded(
        csv, ("fastapi", "uvicorn", "starlette", "proxy.server.app")
    )
    for args in (("query", "--help"), ("--help",)):
        out, modules = _dpsql(policy, *args)
        assert "usage: dpsql" in out
        assert not _loaded(modules, (*HEAVY, *ENGINE)), _loaded(modules, (*HEAVY, *ENGINE))


_PROBE = """
import datetime, decimal, json, sys
import numpy as np
import pyarrow as pa
from proxy.cli import _skip_pyarrow_pandas_probe

_skip_pyarrow_pandas_probe()
skipped = "pandas" not in sys.modules
inputs = [[1, None, 3], [1.5, float("nan")], ["a", None], [datetime.date(2024, 1, 2)],
          [decimal.Decimal("1.25")], np.array([1.0, np.nan]), np.array(["x", None], dtype=object)]
arrays = [pa.array(v) for v in inputs]
import pandas  # still importable: it was hidden only while pyarrow probed
print(json.dumps({"skipped": skipped, "pandas": pandas.__name__,
                  "arrays": [[str(a.type), a.null_count, a.to_pylist().__repr__()] for a in arrays]}))
"""


def test_the_pandas_probe_skip_changes_no_array() -> None:
    def arrays(code: str) -> dict[str, object]:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    skipped = arrays(_PROBE)
    probed = arrays(_PROBE.replace("_skip_pyarrow_pandas_probe()", "import pandas"))
    assert skipped["skipped"] is True and skipped["pandas"] == "pandas"
    assert probed["skipped"] is False  # the control did load pandas first
    assert skipped["arrays"] == probed["arrays"]  # same types, nulls and values


def test_a_one_shot_command_runs_without_the_cycle_collector(tmp_path: Path) -> None:
    # The collector's passes over the imported modules were a tenth of a cold query.
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, "--policy", str(_policy(tmp_path)), "query", SQL,
         "--epsilon", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True, env=env,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["gc"] is False
    # NumPy was imported with OpenBLAS on one thread (its pool's start-up was ~50 ms).
    assert report["blas"] == "1" and "numpy" in report["modules"]
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, "--policy", str(_policy(tmp_path)), "keys", "--help"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env,
    )
    # --help exits while parsing: the collector and OpenBLAS are untouched.
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["gc"] is True and report["blas"] is None



_ENDS = """
import atexit, concurrent.futures, json, runpy, sys, threading, time
from pathlib import Path

marks = Path(sys.argv.pop(1))


class Teardown:
    def __del__(self) -> None:  # runs only when the interpreter frees its modules
        with marks.open("a") as f:
            f.write("teardown\\n")


held = Teardown()


def late() -> None:  # a thread still working when the command is done: joined first
    time.sleep(0.3)
    with marks.open("a") as f:
        f.write("thread\\n")


threading.Thread(target=late).start()
# An idle worker of a live pool waits on its queue: only threading's shutdown (the
# pool's exit hook) tells it to stop.
pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(int)


@atexit.register
def handler() -> None:
    with marks.open("a") as f:
        f.write("exit handler\\n")
    print("printed at exit", end="")  # buffered: the flush after the handlers sends it


sys.argv = ["dpsql", *sys.argv[1:]]
runpy.run_module("proxy.cli", run_name="__main__")
"""


def test_a_one_shot_command_ends_its_process_after_the_exit_handlers(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    marks = tmp_path / "marks"

    def dpsql(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _ENDS, str(marks), "--policy", str(policy), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )

    first = dpsql("query", SQL, "--epsilon", "1", "--format", "json")
    assert first.returncode == 0, first.stderr
    # The whole answer was flushed, then what the exit handlers printed.
    answer, tail = first.stdout.rsplit("\n", 1)
    assert json.loads(answer)["privacy"]["cached"] is False and tail == "printed at exit"
    # Threads were joined, then exit handlers ran (the ledger's deferred fsync is one);
    # the teardown did not.
    assert marks.read_text() == "thread\nexit handler\n"
    marks.unlink()
    refused = dpsql("query", "SELECT pid FROM PUMS.PUMS", "--epsilon", "1")
    assert refused.returncode == 2 and refused.stdout == "printed at exit"  # its exit code
    assert marks.read_text() == "thread\nexit handler\n"
    # The charge made by the first process is in the ledger the next one reads.
    again = dpsql("query", SQL, "--epsilon", "1", "--format", "json")
    assert json.loads(again.stdout.rsplit("\n", 1)[0])["privacy"]["cached"] is True
    marks.unlink()
    # A command that serves is never ended this way: --help exits while parsing, as usual.
    helped = dpsql("serve", "--help")
    assert helped.returncode == 0 and "usage: dpsql serve" in helped.stdout
    assert marks.read_text() == "thread\nexit handler\nteardown\n"


def test_a_one_shot_command_without_stdout_exits_as_python_would(tmp_path: Path) -> None:
    # Review 5: started with its output closed (`dpsql query ... >&-`), Python has no
    # sys.stdout and prints nothing; the command answered and charged, but _exit_now
    # flushed None and ended with a traceback and status 1 (Python's own exit: 0). A
    # script that retried on that status saw a failure for a query it had paid for.
    policy = _policy(tmp_path)
    args = ["--policy", str(policy), "query", SQL, "--epsilon", "1"]
    closed = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        cwd=tmp_path, capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120,
        check=False, preexec_fn=lambda: os.close(1),
    )
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr
    # It was answered (and charged): the next ask is the cached release.
    again = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args, "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    )
    assert json.loads(again.stdout)["privacy"]["cached"] is True
