"""Typed store reads (engine.store.queries) and the triage writes (engine.store.writes) on the analysed demo
pair (tests/sample_study.py)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from engine.errors import InputError
from engine.features.labels import KIND_NAMES
from engine.store import queries, writes


@pytest.fixture(scope="module")
def con(sample_study: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(sample_study), read_only=True)
    yield connection
    connection.close()


@pytest.fixture
def cur(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor on the shared store, for reads."""
    cursor = con.cursor()
    yield cursor
    cursor.close()


@pytest.fixture
def wcur(sample_study_copy: Path) -> duckdb.DuckDBPyConnection:
    """A connection to a store of the test's own, for writes."""
    connection = duckdb.connect(str(sample_study_copy))
    yield connection
    connection.close()


def scalar(cur: duckdb.DuckDBPyConnection, sql: str, params: list | None = None):  # noqa: ANN201
    return cur.execute(sql, params or []).fetchone()[0]


def test_study_summary_counts_agree_with_the_tables(cur: duckdb.DuckDBPyConnection) -> None:
    summary = queries.study_summary(cur)
    assert (summary.before, summary.after) == ("standard", "tighter")
    assert [c.checkpoint for c in summary.checkpoints] == ["standard", "tighter"]
    for c in summary.checkpoints:
        assert c.n_rollouts == scalar(cur, "SELECT count(*) FROM rollouts WHERE checkpoint = ?", [c.checkpoint])
        segments = scalar(
            cur, "SELECT count(*) FROM segments JOIN rollouts USING (rollout_key) WHERE checkpoint = ?", [c.checkpoint]
        )
        assert sum(c.segments_by_kind.values()) == segments
        mean = scalar(cur, "SELECT avg(reward) FROM rollouts WHERE checkpoint = ?", [c.checkpoint])
        assert c.mean_reward == pytest.approx(mean)
        assert c.reward_ci is not None and c.reward_ci[0] < c.mean_reward < c.reward_ci[1]
    ran = [r[0] for r in cur.execute("SELECT stage FROM runs WHERE status = 'done' ORDER BY started_at").fetchall()]
    assert [s.stage for s in summary.stages] == ran
    assert summary.n_features == scalar(cur, "SELECT count(*) FROM features")


def test_compared_checkpoints_come_from_the_last_analysis_then_ingest_order(wcur: duckdb.DuckDBPyConnection) -> None:
    """The pair the last analysis recorded (`meta.analysis_config`), else the first two checkpoints ingested."""
    import json

    from engine.store.queries.study import CONFIG_KEY

    assert queries.compared_checkpoints(wcur) == ("standard", "tighter")
    config = json.loads(scalar(wcur, "SELECT value FROM meta WHERE key = ?", [CONFIG_KEY]))
    swapped = json.dumps(config | {"before": "tighter", "after": "standard"})
    wcur.execute("UPDATE meta SET value = ? WHERE key = ?", [swapped, CONFIG_KEY])
    assert queries.compared_checkpoints(wcur) == ("tighter", "standard")
    wcur.execute("DELETE FROM meta WHERE key = ?", [CONFIG_KEY])
    wcur.execute("DELETE FROM runs")
    assert queries.compared_checkpoints(wcur) == ("standard", "tighter")


def test_delta_page_filters_sorts_and_pages(cur: duckdb.DuckDBPyConnection) -> None:
    everything = queries.delta_page(cur, queries.DeltaFilter(tested_only=False), 0, 10_000)
    assert everything.total == scalar(cur, "SELECT count(*) FROM feature_deltas") == len(everything.rows)
    tested = queries.delta_page(cur, queries.DeltaFilter(sort="abs_delta"), 0, 50)
    assert tested.total == scalar(cur, "SELECT count(*) FROM feature_deltas WHERE tested")
    magnitudes = [abs(r.delta) for r in tested.rows]
    assert magnitudes == sorted(magnitudes, reverse=True)
    by_q = [r.q_value for r in queries.delta_page(cur, queries.DeltaFilter(), 0, 50).rows]  # the default sort
    assert by_q == sorted(by_q)
    second = queries.delta_page(cur, queries.DeltaFilter(sort="abs_delta"), 50, 50)
    assert second.offset == 50 and {(r.feature_id, r.kind) for r in second.rows}.isdisjoint(
        {(r.feature_id, r.kind) for r in tested.rows}
    )
    flt = queries.DeltaFilter(kind="text", direction="decrease", source="sae", max_q=0.5, sort="q")
    page = queries.delta_page(cur, flt, 0, 1000)
    assert page.rows and all(
        r.kind == "text" and r.delta < 0 and r.source == "sae" and r.q_value <= 0.5 for r in page.rows
    )
    assert [r.q_value for r in page.rows] == sorted(r.q_value for r in page.rows)
    found = queries.delta_page(cur, queries.DeltaFilter(search="TRANSFER_to"), 0, 100)
    assert found.rows and all("transfer_to" in (r.label + r.name).lower() for r in found.rows)
    with pytest.raises(ValueError, match="unknown sort"):
        queries.delta_page(cur, queries.DeltaFilter(sort="nonsense"))


def test_feature_detail_has_stats_tasks_examples_and_clusters(cur: duckdb.DuckDBPyConnection) -> None:
    fid = scalar(cur, "SELECT feature_id FROM features WHERE name = 'tool:transfer_to_human_agents'")
    detail = queries.feature_detail(cur, fid)
    assert detail is not None and detail.name == "tool:transfer_to_human_agents"
    kinds = {k for (k,) in cur.execute("SELECT kind FROM feature_deltas WHERE feature_id = ?", [fid]).fetchall()}
    assert {d.row.kind for d in detail.deltas} == kinds and "any" in kinds
    assert len(detail.task_deltas) == scalar(
        cur, "SELECT count(*) FROM feature_task_deltas WHERE feature_id = ?", [fid]
    )
    assert {e.segment.checkpoint for e in detail.examples} == {"standard", "tighter"}
    for e in detail.examples:
        text = scalar(cur, "SELECT text FROM segments WHERE segment_id = ?", [e.segment.segment_id])
        assert e.segment.text == text and all(0 <= a <= b <= len(text) for a, b, _ in e.tokens)
    assert [c for c, _ in detail.clusters] == [
        r[0]
        for r in cur.execute("SELECT cluster_id FROM cluster_members WHERE feature_id = ? ORDER BY 1", [fid]).fetchall()
    ]
    sae = scalar(cur, "SELECT min(feature_id) FROM features WHERE source = 'sae'")
    tokens = [t for e in queries.feature_detail(cur, sae).examples for t in e.tokens]
    assert tokens  # an SAE feature's examples carry the per-token activations that highlight them
    assert queries.feature_detail(cur, 10_000) is None


def test_ngram_list_reads_each_stored_form() -> None:
    assert queries.ngram_list('[{"ngram": "sorry", "score": 2.1}, {"ngram": " "}]') == ["sorry"]
    assert queries.ngram_list([["hand off", 1.0], "policy"]) == ["hand off", "policy"]
    assert queries.ngram_list(None) == [] and queries.ngram_list("not json") == []


def test_clusters_and_members(cur: duckdb.DuckDBPyConnection) -> None:
    clusters = queries.clusters(cur)
    assert len(clusters) == scalar(cur, "SELECT count(*) FROM clusters")
    members = queries.cluster_members(cur, clusters[0].cluster_id)
    assert len(members) == clusters[0].size
    assert all(m.delta is not None for m in members)


def test_hypotheses_filters_examples_and_label_candidates(cur: duckdb.DuckDBPyConnection) -> None:
    rows = queries.hypotheses(cur)
    assert len(rows) == scalar(cur, "SELECT count(*) FROM hypotheses")
    assert rows[0].status == "validated"
    rejected = queries.hypotheses(cur, status="rejected")
    assert len(rejected) == scalar(cur, "SELECT count(*) FROM hypotheses WHERE status = 'rejected'")
    assert all(h.status == "rejected" for h in rejected)
    [(hid,)] = cur.execute("SELECT hypothesis_id FROM hypotheses WHERE decision = 'accepted'").fetchall()
    assert [h.hypothesis_id for h in queries.hypotheses(cur, decision="accepted")] == [hid]
    undecided = queries.hypotheses(cur, decision="undecided")
    assert len(undecided) == len(rows) - 1 and all(h.decision is None for h in undecided)
    findings = queries.top_findings(cur)
    validated = scalar(cur, "SELECT count(*) FROM hypotheses WHERE status = 'validated'")
    assert len(findings) == validated > 0 and all(h.status == "validated" for h in findings)
    examples = queries.hypothesis_examples(cur, hid, per_checkpoint=2)
    positives = {
        r[0]
        for r in cur.execute(
            "SELECT segment_id FROM hypothesis_labels WHERE hypothesis_id = ? AND label", [hid]
        ).fetchall()
    }
    assert examples and {e.segment.segment_id for e in examples} <= positives
    assert max(sum(1 for e in examples if e.segment.checkpoint == c) for c in ("standard", "tighter")) <= 2
    labelled_by_user = {
        r[0] for r in cur.execute("SELECT segment_id FROM user_labels WHERE hypothesis_id = ?", [hid]).fetchall()
    }
    candidates = queries.label_candidates(cur, hid, limit=10_000)
    assert labelled_by_user and not labelled_by_user & {c.segment_id for c in candidates}
    assert len(candidates) == scalar(
        cur, "SELECT count(*) FROM hypothesis_labels WHERE hypothesis_id = ?", [hid]
    ) - len(labelled_by_user)


def test_examples_come_from_different_rollouts(wcur: duckdb.DuckDBPyConnection) -> None:
    """A labeler's first positives by segment id are one rollout's turns; the examples shown are taken one per
    rollout while there are rollouts left (a fixed pseudo-random draw), so they show what was counted across the
    study."""
    wcur.execute("DELETE FROM hypothesis_labels; DELETE FROM user_labels; DELETE FROM hypotheses")
    [checkpoint] = wcur.execute("SELECT checkpoint FROM checkpoints ORDER BY ordinal LIMIT 1").fetchone()
    busy, *others = [
        r[0]
        for r in wcur.execute(
            "SELECT s.rollout_key FROM segments s JOIN rollouts r USING (rollout_key) WHERE r.checkpoint = ? "
            "GROUP BY 1 HAVING count(*) >= 6 ORDER BY min(s.segment_id) LIMIT 4",
            [checkpoint],
        ).fetchall()
    ]
    first = "SELECT segment_id FROM segments WHERE rollout_key = ? ORDER BY segment_id LIMIT 6"
    positives = [r[0] for r in wcur.execute(first, [busy]).fetchall()]  # the busy rollout's turns come first
    last = "SELECT max(segment_id) FROM segments WHERE rollout_key = ?"
    positives += [wcur.execute(last, [key]).fetchone()[0] for key in others]  # one turn of each other rollout
    hid = writes.add_user_hypothesis(wcur, "h", "increase", "verifier", {"regex": "x"})
    wcur.executemany("INSERT INTO hypothesis_labels VALUES (?, ?, true, NULL, 1.0)", [[hid, p] for p in positives])
    shown = queries.hypothesis_examples(wcur, hid, per_checkpoint=4)
    assert {e.segment.segment_id for e in shown} <= set(positives)
    assert len({e.segment.rollout_key for e in shown}) == 4
    assert [e.segment.segment_id for e in shown] == [
        e.segment.segment_id for e in queries.hypothesis_examples(wcur, hid, 4)
    ]
    assert len(queries.hypothesis_examples(wcur, hid, per_checkpoint=8)) == 8  # then more of each rollout's


def test_a_finding_decided_by_a_broader_ones_evidence_is_listed_beneath_it(wcur: duckdb.DuckDBPyConnection) -> None:
    """Evidence is the same when it lies in one sentence of the segment (two overlapping spans of it) or one
    evidence string holds the other; other sentences of the same turns are not the same evidence."""
    wcur.execute("DELETE FROM hypothesis_labels; DELETE FROM user_labels; DELETE FROM hypotheses")
    rows = wcur.execute(
        "SELECT segment_id, list(text ORDER BY sentence_index)[1:2] FROM sentences GROUP BY ALL "
        "HAVING count(*) >= 2 AND min(length(text)) >= 20 ORDER BY segment_id"
    ).fetchall()
    turns = [(sid, first, second) for sid, (first, second) in rows if second not in first and first not in second]
    assert len(turns) >= 13
    half = [(len(first) // 2) for _, first, _ in turns]
    start = [first[: h + 3] for (_, first, _), h in zip(turns, half, strict=False)]  # two spans of one sentence,
    end = [first[h - 3 :] for (_, first, _), h in zip(turns, half, strict=False)]  # neither holding the other
    assert not any(a in b or b in a for a, b in zip(start, end, strict=True))
    first = [f for _, f, _ in turns]
    second = [s for _, _, s in turns]
    # name: direction, q, positives as (turn, evidence)
    plan = {
        "broad": ("increase", 0.01, [(i, start[i]) for i in range(10)]),
        "narrow": ("increase", 0.001, [(i, end[i]) for i in range(4)] + [(10, first[10])]),  # 4 of 5: beneath
        "same turns": ("increase", 0.002, [(i, second[i]) for i in range(4, 9)]),
        "opposite": ("decrease", 0.003, [(i, first[i]) for i in range(5)]),
        "three of five": ("increase", 0.004, [(i, first[i]) for i in (0, 1, 2, 11, 12)]),
        "rejected": ("increase", 0.5, [(i, first[i]) for i in range(5)]),
    }
    ids = {}
    for name, (direction, q, positives) in plan.items():
        ids[name] = writes.add_user_hypothesis(wcur, name, direction, "verifier", {"regex": "x"})
        status = "rejected" if name == "rejected" else "validated"
        wcur.execute("UPDATE hypotheses SET status = ?, q_value = ? WHERE hypothesis_id = ?", [status, q, ids[name]])
        wcur.executemany(
            "INSERT INTO hypothesis_labels VALUES (?, ?, true, ?, 1.0)",
            [[ids[name], turns[i][0], evidence] for i, evidence in positives],
        )
        wcur.execute(  # a negative label never counts
            "INSERT INTO hypothesis_labels VALUES (?, ?, false, NULL, 1.0)", [ids[name], turns[-1][0]]
        )
    rows = queries.hypotheses(wcur)
    same = {h.statement: h.same_evidence for h in rows}
    assert same.pop("narrow") == queries.SharedEvidence(ids["broad"], shared=4, positives=5)
    assert set(same.values()) == {None}  # another sentence of the same turns, the other direction, 3 of 5, rejected
    order = [h.statement for h in rows]
    assert order[:3] == ["broad", "narrow", "same turns"]  # the group where its first member (narrow) stands
    assert queries.hypothesis(wcur, ids["narrow"]).same_evidence.hypothesis_id == ids["broad"]


def test_rollouts_transcript_and_counterparts(cur: duckdb.DuckDBPyConnection) -> None:
    page = queries.rollout_page(cur, checkpoint="tighter", limit=5)
    assert page.total == scalar(cur, "SELECT count(*) FROM rollouts WHERE checkpoint = 'tighter'")
    assert len(page.rows) == 5 and all(r.checkpoint == "tighter" for r in page.rows)
    some = scalar(cur, "SELECT rollout_id FROM rollouts ORDER BY rollout_key DESC LIMIT 1")
    assert [r.rollout_id for r in queries.rollout_page(cur, search=some[:13].upper()).rows] == [some]
    first = queries.rollout_page(cur, limit=1).rows[0]
    transcript = queries.transcript(cur, first.rollout_key)
    assert transcript is not None
    assert [m.message_index for m in transcript.messages] == list(range(first.n_messages))
    assert len(transcript.segments) == first.n_segments
    assert any(m.tool_calls for m in transcript.messages if m.role == "assistant")
    others = queries.counterpart_rollouts(cur, first.rollout_key)
    assert others and all(o.task_id == first.task_id and o.checkpoint != first.checkpoint for o in others)
    assert others[0].trial == first.trial
    assert queries.transcript(cur, 10_000) is None
    ref = queries.segment_location(cur, transcript.segments[0].segment_id)
    assert ref is not None and ref.rollout_key == first.rollout_key


def test_search_finds_each_category(cur: duckdb.DuckDBPyConnection) -> None:
    hits = queries.search(cur, "hands off")
    assert {"feature", "hypothesis"} <= {h.category for h in hits}
    some = scalar(cur, "SELECT rollout_id FROM rollouts ORDER BY rollout_key DESC LIMIT 1")
    assert {h.category for h in queries.search(cur, some)} == {"rollout"}
    hid = scalar(cur, "SELECT max(hypothesis_id) FROM hypotheses")
    assert any(h.category == "hypothesis" and h.id == hid for h in queries.search(cur, str(hid)))


def test_search_finds_a_feature_by_the_label_of_one_of_its_kinds(cur: duckdb.DuckDBPyConnection) -> None:
    """A row's name in the deltas table is its kind's label: searching for it finds the feature, shown by it."""
    feature_id, of_kind, own = cur.execute(
        "SELECT kl.feature_id, kl.label, f.label FROM feature_kind_labels kl JOIN features f USING (feature_id) "
        "WHERE kl.label <> f.label ORDER BY kl.feature_id, kl.kind LIMIT 1"
    ).fetchone()
    word = next(w for w in of_kind.split("“")[1:] if w.split("”")[0].lower() not in own.lower()).split("”")[0]
    hits = [h for h in queries.search(cur, word, limit=1000) if h.category == "feature" and h.id == feature_id]
    assert len(hits) == 1 and word.lower() in hits[0].title.lower() and hits[0].title != own


def test_decisions_notes_and_user_labels_are_written(wcur: duckdb.DuckDBPyConnection) -> None:
    writes.set_decision(wcur, 0, "rejected")
    assert wcur.execute(
        "SELECT decision, decided_at IS NOT NULL FROM hypotheses WHERE hypothesis_id = 0"
    ).fetchone() == (
        "rejected",
        True,
    )
    writes.set_decision(wcur, 0, None)
    assert scalar(wcur, "SELECT decision FROM hypotheses WHERE hypothesis_id = 0") is None
    writes.set_note(wcur, 0, "  looks real  ")
    assert scalar(wcur, "SELECT note FROM hypotheses WHERE hypothesis_id = 0") == "looks real"
    segment = scalar(wcur, "SELECT min(segment_id) FROM segments")
    writes.set_user_label(wcur, 0, segment, True)
    writes.set_user_label(wcur, 0, segment, False)
    assert wcur.execute(
        "SELECT label FROM user_labels WHERE hypothesis_id = 0 AND segment_id = ?", [segment]
    ).fetchall() == [(False,)]
    with pytest.raises(InputError, match="decision must be one of"):
        writes.set_decision(wcur, 0, "maybe")
    with pytest.raises(InputError, match="no hypothesis with id 999"):
        writes.set_note(wcur, 999, "x")
    with pytest.raises(InputError, match="no segment"):
        writes.set_user_label(wcur, 0, 10**9, True)


def test_add_user_hypothesis_gets_the_next_id(wcur: duckdb.DuckDBPyConnection) -> None:
    expected = scalar(wcur, "SELECT max(hypothesis_id) + 1 FROM hypotheses")
    new_id = writes.add_user_hypothesis(wcur, " hands off less ", "decrease", "verifier", {"regex": "transfer"})
    assert new_id == expected
    row = queries.hypothesis(wcur, new_id)
    assert row is not None and (row.statement, row.status, row.origin, row.spec) == (
        "hands off less",
        "proposed",
        "user",
        {"regex": "transfer"},
    )
    with pytest.raises(InputError, match="direction"):
        writes.add_user_hypothesis(wcur, "x", "sideways", "verifier", {})


def test_the_study_fills_every_table_but_the_llm_and_review_logs(sample_study: Path) -> None:
    """What the queries above read is real data: only the tables of an LLM (offline here), of held-out examples
    shown to someone, and of a labeler calibration (each tested where it is written) stay empty."""
    with duckdb.connect(str(sample_study), read_only=True) as c:
        tables = [r[0] for r in c.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        empty = {t for t in tables if c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0}
    assert empty == {"llm_cache", "heldout_views", "hypothesis_calibrations"}


def test_a_row_is_called_by_the_label_of_its_kind(cur: duckdb.DuckDBPyConnection) -> None:
    """A feature whose top examples are of another kind (a latent of tool calls that also fires in replies)
    is called, at each kind, by the label drawn from that kind's examples: in the deltas table, the feature
    screen's rows, cluster members and `row_labels`; its 'any' row keeps the feature's own label."""
    feature_id, kind, own, of_kind = cur.execute(
        "SELECT d.feature_id, d.kind, f.label, kl.label FROM feature_deltas d JOIN features f USING (feature_id) "
        "JOIN feature_kind_labels kl ON kl.feature_id = d.feature_id AND kl.kind = d.kind "
        "WHERE kl.label <> f.label AND d.tested ORDER BY d.q_value, d.feature_id LIMIT 1"
    ).fetchone()
    assert of_kind.startswith(KIND_NAMES[kind])
    labels = queries.row_labels(cur, [(feature_id, kind), (feature_id, "any"), (-1, kind)])
    assert labels == {(feature_id, kind): of_kind, (feature_id, "any"): own}  # an unknown id is left out
    page = queries.delta_page(cur, queries.DeltaFilter(kind=kind, max_q=None, tested_only=False), limit=100_000)
    assert {r.label for r in page.rows if r.feature_id == feature_id} == {of_kind}
    found = queries.delta_page(cur, queries.DeltaFilter(kind=kind, search=of_kind, tested_only=False)).rows
    assert feature_id in {r.feature_id for r in found}  # search reads what the row shows
    detail = queries.feature_detail(cur, feature_id)
    assert detail is not None and detail.label == own
    assert {d.row.kind: d.row.label for d in detail.deltas}.get(kind) == of_kind


def test_fetchone_says_when_a_query_returns_no_row(cur: duckdb.DuckDBPyConnection) -> None:
    from engine.errors import RldiffError
    from engine.store.queries.base import fetchone, first_row

    assert fetchone(cur, "SELECT count(*) FROM features")[0] > 0
    assert first_row(cur, "SELECT 1 WHERE false") is None
    with pytest.raises(RldiffError, match="no row"):
        fetchone(cur, "SELECT 1 WHERE false")
