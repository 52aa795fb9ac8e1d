"""Test helpers shared by the suites that build policies: from the sample ones, and the
header of the small typed databases' policies (:func:`users_policy`)."""

from __future__ import annotations

AUTO_PROMPTS = (
    'max_rows_per_group = "auto"    # Linf: rows of one person counted per group, chosen from\n'
    "max_rows_per_group_limit = 256 #   the data (paid once: [proxy] auto_bounds_epsilon) up to this"
)
AUTO_TICKETS = 'max_rows_per_group = "auto"\nmax_rows_per_group_limit = 32'


def fixed_caps(text: str) -> str:
    """The demo policy with the fixed row caps its "auto" tables had before (prompts 10,
    tickets 3): for suites whose figures (ledger events per query, exact caps) assume a
    cap known in advance. The auto caps have their own tests (test_auto_bounds.py)."""
    assert AUTO_PROMPTS in text and AUTO_TICKETS in text, "the demo policy's caps changed"
    return text.replace(AUTO_PROMPTS, "max_rows_per_group = 10").replace(
        AUTO_TICKETS, "max_rows_per_group = 3"
    )


# The header of the small typed databases' policies: one population of users, a ledger
# in the test's folder; a template with {db} and {folder}, so the tables' own braces are
# doubled, as {{ lower = 0, upper = 10 }}.
_HEADER = """
[proxy]
default_epsilon = 0.5
default_delta = 1e-9
mechanism = "gaussian"

[database]
duckdb = "{db}"

[ledger]
path = "{folder}/ledger.sqlite"

[populations.users]
epsilon_cap = 1e7
delta = 1e-4
"""


def users_policy(tables: str) -> str:
    """The header above followed by ``tables`` (TOML ``[tables.*]`` sections)."""
    return _HEADER + "\n" + tables.lstrip("\n")


def ev_policy(max_rows_per_group: int, columns: str = "") -> str:
    """:func:`users_policy` with one table ``ev`` of the users' rows (``user_id``, K = 4
    groups a person) and ``columns`` (TOML lines such as ``columns.n = {{ ... }}``)."""
    return users_policy(
        '[tables.ev]\npopulation = "users"\nunit = "user_id"\nmax_groups = 4\n'
        f"max_rows_per_group = {max_rows_per_group}\n{columns}"
    )
