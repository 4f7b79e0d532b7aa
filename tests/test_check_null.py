"""`rldiff check-null`: one checkpoint dealt within each task into two pseudo-checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine.cli import main
from engine.errors import InputError
from engine.null_check import NULL_AFTER, NULL_BEFORE, deal, prepare
from engine.store import Store

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "tau2-grok3" / "standard.jsonl.gz"


def test_deal_splits_every_task_evenly() -> None:
    sizes = [1, 2, 3, 4, 5, 6, 7, 1, 2, 9]
    rollouts = pl.DataFrame(
        {
            "rollout_key": np.arange(sum(sizes)),
            "task_id": [f"t{i}" for i, n in enumerate(sizes) for _ in range(n)],
        }
    )
    dealt = deal(rollouts, np.random.default_rng(0))
    assert sorted(dealt["rollout_key"].to_list()) == list(range(sum(sizes)))
    joined = dealt.join(rollouts, on="rollout_key")
    per_task = joined.group_by("task_id").agg(
        (pl.col("checkpoint") == NULL_BEFORE).sum().alias("a"), (pl.col("checkpoint") == NULL_AFTER).sum().alias("b")
    )
    assert all(abs(a - b) <= 1 for a, b in per_task.select("a", "b").iter_rows())
    assert deal(rollouts, np.random.default_rng(0)).equals(dealt)
    assert not deal(rollouts, np.random.default_rng(1)).equals(dealt)  # the seed decides who goes where


def counts(store: Store) -> tuple:
    return store.execute(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM messages), (SELECT count(*) FROM segments)"
    ).fetchall()[0]


def test_prepare_from_a_file(tmp_path: Path) -> None:
    store, name = prepare(tmp_path / "null.duckdb", SAMPLE, None, seed=0)
    with store, Store(tmp_path / "direct.duckdb") as direct:
        from engine.ingest import ingest_file

        ingest_file(direct, SAMPLE, "x")
        assert name == "all"
        assert store.checkpoints() == [NULL_BEFORE, NULL_AFTER]
        assert counts(store) == counts(direct)
        shared = store.scalar(
            "SELECT count(*) FROM (SELECT task_id FROM rollouts GROUP BY 1 HAVING count(DISTINCT checkpoint) = 2)"
        )
        assert shared == store.scalar(
            "SELECT count(*) FROM (SELECT task_id FROM rollouts GROUP BY 1 HAVING count(*) > 1)"
        )


def test_prepare_from_a_store_copies_one_checkpoint(tau2_store: Store, tmp_path: Path) -> None:
    source = Path(tau2_store.path)
    expected = tau2_store.execute(
        "SELECT count(*), (SELECT count(*) FROM segments JOIN rollouts USING (rollout_key) "
        "WHERE checkpoint = 'tighter') FROM rollouts WHERE checkpoint = 'tighter'"
    ).fetchall()[0]
    tau2_store.close()
    store, name = prepare(tmp_path / "null.duckdb", source, "tighter", seed=3)
    with store:
        assert name == "tighter"
        assert (counts(store)[0], counts(store)[2]) == expected
        assert store.scalar("SELECT count(*) FROM rollouts WHERE split IS NOT NULL") == 0
    with Store(source, read_only=True) as again:
        assert again.checkpoints() == ["standard", "tighter"]
    with pytest.raises(InputError, match="no checkpoint named 'nope'"):
        prepare(tmp_path / "other.duckdb", source, "nope", seed=0)


def test_cli_names_a_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-null", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "n.duckdb")]) == 2
    assert "missing.jsonl: no such file or store" in capsys.readouterr().err
