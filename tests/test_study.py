"""The study room: named random streams, the last analysis configuration, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.pipeline import STAGES, analyze
from engine.store.queries import compared_checkpoints
from engine.study import STREAMS, last_config, record_config, resolve_checkpoints, stream
from tests.factories_stats import build_study


def test_every_stage_has_its_own_stream_with_a_fixed_id():
    assert len(set(STREAMS.values())) == len(STREAMS)
    assert [name for name, _ in STAGES] == ["split", "features", "deltas", "clusters", "hypotheses"]
    # the stages' former positions: stores analysed before streams had names reproduce
    for position, (name, _) in enumerate(STAGES):
        assert stream(3, name).random(4).tolist() == np.random.default_rng([3, position]).random(4).tolist()
    assert stream(3, "hypothesis_test", 7).random() != stream(3, "hypothesis_test", 8).random()


def test_the_last_analysis_configuration_comes_back_whole(store):
    build_study(store, np.random.default_rng(0), n_tasks=12, n_features=2, split=None)
    config = AnalyzeConfig(seed=5, permutations=123, sentence_features=False, where="reward > 0")
    analyze(store, config, until="split")
    assert last_config(store) == AnalyzeConfig(
        before="before", after="after", seed=5, permutations=123, sentence_features=False, where="reward > 0"
    )
    record_config(store, AnalyzeConfig(before="after", after="before"))  # the latest analysis wins
    assert (last_config(store).before, last_config(store).after) == ("after", "before")


def test_older_stores_fall_back_to_the_hypotheses_run_then_to_defaults(store):
    build_study(store, np.random.default_rng(0), n_tasks=4, n_features=2)
    assert last_config(store) == AnalyzeConfig(before="before", after="after")
    store.execute(
        "INSERT INTO runs (run_id, stage, config, input_hash, versions, seed, status, started_at, finished_at) "
        "VALUES ('r', 'hypotheses', ?, 'h', '{}', 9, 'done', now(), now())",
        [json.dumps({"seed": 9, "fdr": 0.1, "gone_field": 1})],
    )
    assert last_config(store) == AnalyzeConfig(before="before", after="after", seed=9, fdr=0.1)


def test_checkpoints_are_checked(store):
    build_study(store, np.random.default_rng(0), n_tasks=4, n_features=2)
    with pytest.raises(InputError, match="no checkpoint named 'later'"):
        resolve_checkpoints(store, AnalyzeConfig(after="later"))
    with pytest.raises(InputError, match="same checkpoint"):
        resolve_checkpoints(store, AnalyzeConfig(before="before", after="before"))


def test_the_tui_and_the_engine_read_the_same_compared_checkpoints(store):
    build_study(store, np.random.default_rng(0), n_tasks=4, n_features=2)
    assert compared_checkpoints(store.cursor()) == last_config(store).checkpoints == ("before", "after")
    record_config(store, AnalyzeConfig(before="after", after="before"))
    assert compared_checkpoints(store.cursor()) == last_config(store).checkpoints == ("after", "before")
    store.execute(
        "INSERT INTO runs (run_id, stage, config, input_hash, versions, seed, status, started_at, finished_at) "
        "VALUES ('r', 'hypotheses', ?, 'h', '{}', 0, 'done', now(), now())",
        [json.dumps({"before": "before", "after": "after"})],
    )
    assert compared_checkpoints(store.cursor()) == ("after", "before")  # the analysis's record wins
    store.execute("DELETE FROM meta WHERE key = 'analysis_config'")  # an older store: the run's record
    assert compared_checkpoints(store.cursor()) == last_config(store).checkpoints == ("before", "after")
