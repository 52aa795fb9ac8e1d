"""Test helpers shared by the suites that build policies from the sample ones."""

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
