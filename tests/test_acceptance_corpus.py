"""The acceptance corpus (bench/acceptance_queries.toml) and dpsql's side of the benchmark
(bench/acceptance.py), without SmartNoise: every query cites its source, and every query
a peer documents as accepted that dpsql refuses is refused for a known reason (a feature
of issue 13 §1–§5 it needs, or the privacy rules), never for anything else."""

from __future__ import annotations

from bench import acceptance


def test_corpus_is_well_formed() -> None:
    queries = acceptance.load()
    assert len(queries) >= 200
    assert len({q.id for q in queries}) == len(queries)
    assert {q.suite for q in queries} == {"smartnoise", "qrlew", "google"}
    for q in queries:
        assert q.source and q.sql.strip()
        assert set(q.needs) <= set(acceptance.FEATURES)
        if q.suite != "smartnoise":
            assert q.adapted, q.id  # other corpora's tables are renamed to PUMS


def test_every_refusal_has_a_known_reason() -> None:
    queries = acceptance.load()
    rows = acceptance.evaluate(queries, smartnoise=False)
    unexplained = [
        (r.query.id, r.reason)
        for r in rows
        if r.query.documented == "accepted" and r.reason.startswith("other")
    ]
    assert not unexplained, unexplained
    # §6–§8 on their own: every Google example without a §1–§5 need is answered but the
    # one that asks for no noise.
    google = [r for r in rows if r.query.suite == "google" and not r.query.needs]
    refused = [r.query.id for r in google if not r.dpsql.answered]
    assert {r.reason for r in google if not r.dpsql.answered} == {
        "by design: no-noise setting (epsilon = 1e20)",
        "not offered: an array of quantiles (ANON_QUANTILES; one ANON_PERCENTILE_CONT per "
        "quantile instead)",
    }, refused
    assert acceptance.summarize(rows).total[0] >= 180
