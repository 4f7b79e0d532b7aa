"""Behaviour groups on hand-made paraphrase sets, embedded by the packaged MiniLM: paraphrases land together,
unrelated sentences do not, and held-out paraphrases fire the right group by similarity to its exemplars."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.paraphrases import PARAPHRASES, UNRELATED
from bench.sentences import sample_texts
from engine.features import groups
from engine.features.groups import (
    FLOOR,
    best_threshold,
    contrast_z,
    find_contrastive_groups,
    find_groups,
    merge_groups,
)
from engine.features.reader_spec import resolve_reader
from engine.features.sentence_embed import SentenceEmbedder
from engine.features.sentences import split_sentences
from engine.features.settings import FeatureSettings
from engine.planted_reply_vocab import FEEDBACK_REQUEST
from engine.planted_vocab import Vocabulary
from tests.factories_features import MINILM

HELD_OUT = 3  # paraphrases per behaviour kept out of clustering, to be found by similarity
BACKGROUND = 300  # real sentences of the demo pair around the paraphrases, as in a study


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    spec = resolve_reader(str(MINILM), None, FeatureSettings())
    embedder = SentenceEmbedder(spec, "cpu", tmp_path_factory.mktemp("cache"))
    out = {name: embedder.embed(texts) for name, texts in PARAPHRASES.items()}
    out["unrelated"] = embedder.embed(UNRELATED)
    texts = sorted({t[a:b] for t in sample_texts(400) for a, b in split_sentences(t)})
    out["background"] = embedder.embed(list(np.random.default_rng(0).permutation(texts)[:BACKGROUND]))
    return out


def _discovery(embedded: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    names = list(PARAPHRASES)
    parts = [embedded[n][:-HELD_OUT] for n in names] + [
        np.concatenate([embedded["unrelated"][:-5], embedded["background"]])
    ]
    truth = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts[:-1])] + [np.full(len(parts[-1]), -1)])
    return np.concatenate(parts), truth


@pytest.mark.parametrize("selection", ["leaf", "eom"])
def test_paraphrases_land_together_and_unrelated_sentences_do_not(
    embedded: dict[str, np.ndarray], selection: str
) -> None:
    vectors, truth = _discovery(embedded)
    model = find_groups(vectors, np.random.default_rng(0), selection=selection)  # type: ignore[arg-type]
    assert model.n_groups >= 1
    found = set()
    for members in model.members:
        behaviours = truth[members]
        behaviour, count = np.unique(behaviours, return_counts=True)
        top = behaviour[np.argmax(count)]
        if top >= 0:  # a group of a planted behaviour holds little else
            assert count.max() >= 0.6 * len(members), f"a mixed group: {behaviours}"
            found.add(int(top))
    assert found  # wide paraphrases are sparse for density clustering: bench/groups.py measures how many


def test_held_out_paraphrases_fire_their_group_and_unrelated_text_fires_none(embedded: dict[str, np.ndarray]) -> None:
    vectors, truth = _discovery(embedded)
    model = find_groups(vectors, np.random.default_rng(0))
    group_of = {}
    for g, members in enumerate(model.members):
        values, counts = np.unique(truth[members], return_counts=True)
        group_of.setdefault(int(values[np.argmax(counts)]), set()).add(g)
    assert group_of.keys() - {-1}, "no behaviour formed a group"
    for i, name in enumerate(PARAPHRASES):
        if i not in group_of:
            continue
        _, group, _ = model.fire(embedded[name][-HELD_OUT:])
        assert set(group.tolist()) <= group_of[i]  # a paraphrase fires its own behaviour's group or none
        own = [g for g in group_of[i] if g in set(range(model.n_groups))]
        members = np.concatenate([model.members[g] for g in own])
        row, fired, _ = model.fire(vectors[members])
        assert len(set(row[np.isin(fired, own)].tolist())) >= 0.5 * len(members)  # members fire their group
    _, group, _ = model.fire(embedded["unrelated"][-5:])
    assert group.size == 0


def test_a_concept_covering_two_groups_merges_them_only_when_they_agree() -> None:
    rng = np.random.default_rng(0)
    axis = np.eye(8, dtype=np.float32)

    def around(v: np.ndarray, n: int) -> np.ndarray:
        x = v + 0.05 * rng.standard_normal((n, 8)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    a, b, c = around(axis[0], 6), around(axis[0] + 0.4 * axis[1], 6), around(axis[2], 6)
    rest = around(axis[5], 400)  # the rest of the study
    vectors = np.concatenate([a, b, c, rest])
    members = [np.arange(0, 6), np.arange(6, 12), np.arange(12, 18)]
    bridge = [np.arange(0, 18)]  # one specific concept fires on all three groups
    merged = merge_groups(vectors, members, bridge)
    sizes = sorted(len(m) for m in merged)
    assert sizes == [6, 12]  # a and b agree (centroids alike) and merge; c says something else
    assert len(merge_groups(vectors, members, [])) == 3
    assert len(merge_groups(vectors, members, [np.arange(0, 200)])) == 3  # a broad concept merges nothing


def test_the_threshold_separates_members_from_the_rest() -> None:
    similarity = np.array([0.95, 0.9, 0.85, 0.8, 0.4, 0.35, 0.3, 0.82])
    assert best_threshold(similarity, np.array([0, 1, 2, 3])) == pytest.approx(0.8)
    assert best_threshold(np.array([0.3, 0.2, 0.1]), np.array([0])) == FLOOR  # never below the floor


def test_unscored_rows_count_neither_way() -> None:
    members = np.array([0, 1, 2, 3])
    leaning = np.array([4, 5, 6, 7, 8])  # between the members: counted against them, they lift the threshold
    similarity = np.array([0.95, 0.9, 0.6, 0.55, 0.8, 0.75, 0.7, 0.65, 0.62, 0.4, 0.3])
    assert best_threshold(similarity, members) == pytest.approx(0.9)
    assert best_threshold(similarity, members, leaning) == pytest.approx(0.55)


def test_no_groups_in_too_few_sentences(tmp_path: Path) -> None:
    model = find_groups(np.eye(4, dtype=np.float32), np.random.default_rng(0))
    assert model.n_groups == 0 and model.fire(np.eye(4, dtype=np.float32))[0].size == 0


def _around(rng: np.random.Generator, v: np.ndarray, n: int, noise: float) -> np.ndarray:
    x = v + noise * rng.standard_normal((n, len(v))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_a_group_threshold_is_fitted_leave_one_out_so_near_paraphrases_fire() -> None:
    rng = np.random.default_rng(0)
    axis = np.eye(16, dtype=np.float32)
    vectors = np.concatenate([_around(rng, axis[0], 6, 0.3), _around(rng, np.zeros(16), 300, 1.0)])
    model = groups._model(vectors, [np.arange(6)], None)
    assert model.thresholds[0] < 0.99  # not an exemplar's similarity to itself, which fires on nothing new
    _, fired, _ = model.fire(_around(rng, axis[0], 20, 0.3))
    assert fired.size >= 10  # new paraphrases of the group fire it


def test_contrast_never_reads_a_candidates_own_checkpoint() -> None:
    rng = np.random.default_rng(1)
    vectors = _around(rng, np.zeros(8), 200, 1.0)
    after = rng.integers(0, 2, 200).astype(float)
    chooser = np.arange(200) % 2 == 0
    z = contrast_z(vectors, after, chooser)
    flipped = np.where(chooser, after, 1 - after)  # every candidate's checkpoint changed
    assert np.array_equal(z[~chooser], contrast_z(vectors, flipped, chooser)[~chooser])


def _said_by_after(
    rng: np.random.Generator, said: np.ndarray, background: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, planted, chooser, after share): sentences `said` only by the after checkpoint beside
    `background` random ones said by either, and halves drawn at random."""
    vectors = np.concatenate([said, _around(rng, np.zeros(said.shape[1]), background, 1.0)])
    planted = np.arange(len(vectors)) < len(said)
    chooser = rng.permutation(len(vectors)) % 2 == 0
    return vectors, planted, chooser, np.where(planted, 1.0, rng.integers(0, 2, len(vectors)))


def test_contrastive_groups_find_what_one_checkpoint_says_and_nothing_in_a_null_pair() -> None:
    rng = np.random.default_rng(0)
    axis = np.eye(32, dtype=np.float32)
    said = np.concatenate([_around(rng, axis[i], 40, 0.1) for i in range(3)])  # three behaviours of after only
    vectors, planted, chooser, after = _said_by_after(rng, said, 600)
    model = find_contrastive_groups(vectors, after, chooser, ~chooser, np.random.default_rng(0))
    assert model.n_groups >= 3
    for members in model.members:
        assert planted[members].mean() >= 0.8, "a group of background sentences"
    assert planted[np.unique(np.concatenate(model.members))].sum() >= 0.5 * planted.sum()
    null = np.where(planted, rng.integers(0, 2, len(vectors)), after)  # the same sentences on both sides
    assert find_contrastive_groups(vectors, null, chooser, ~chooser, np.random.default_rng(0)).n_groups == 0


def test_a_behaviours_sentences_below_the_keep_bar_do_not_lift_its_threshold(tmp_path: Path) -> None:
    """50 rating requests of the planted replies' grammar (vocabulary seed 101) said by the after checkpoint
    only, among about 1,500 real sentences said by either. Some requests' neighbourhoods lean after
    less than the keep bar (CONTRAST_Z) asks; counted against the group, they lifted its threshold until it
    fired on 26 of the 50. Left out of the fit (LEAN_Z), the group fires on most of them and no more other text."""
    spec = resolve_reader(str(MINILM), None, FeatureSettings())
    embedder = SentenceEmbedder(spec, "cpu", tmp_path)
    vocabulary, rng = Vocabulary(101), np.random.default_rng(101)
    said = embedder.embed([vocabulary.sentence(FEEDBACK_REQUEST, rng) for _ in range(50)])
    texts = sorted({t[a:b] for t in sample_texts(400) for a, b in split_sentences(t)})
    vectors = np.concatenate([said, embedder.embed(texts)])
    planted = np.arange(len(vectors)) < len(said)
    halves = np.random.default_rng(2)
    chooser = halves.permutation(len(vectors)) % 2 == 0
    after = np.where(planted, 1.0, halves.integers(0, 2, len(vectors)))
    model = find_contrastive_groups(vectors, after, chooser, ~chooser, np.random.default_rng(0))
    fired = np.unique(model.fire(vectors)[0])
    assert planted[fired].sum() >= 40 and (~planted[fired]).sum() <= 2


def test_one_modest_behaviour_becomes_a_group() -> None:
    """A behaviour said 44 times in discovery (as often as a reply behaviour of the planted benchmark), and
    nothing else changing: each half keeps about half of its sentences, and hdbscan returns no cluster for
    rows that are all one behaviour unless its root may be one (the code before found no group here), and
    then keeps a core of 5 as the cluster. Clustered together, with that allowed, and the kept rows it calls
    noise joined to their nearest group, they are a group of the behaviour, which fires on most of it and
    hardly elsewhere (on its core alone, the threshold fitted to 5 members fired on a third)."""
    rng = np.random.default_rng(3)
    said = _around(rng, np.eye(32, dtype=np.float32)[0], 44, 0.15)
    vectors, planted, chooser, after = _said_by_after(rng, said, 2000)
    model = find_contrastive_groups(vectors, after, chooser, ~chooser, np.random.default_rng(0))
    assert model.n_groups >= 1
    assert all(planted[members].mean() >= 0.8 for members in model.members)
    fired = np.unique(model.fire(vectors)[0])
    assert planted[fired].sum() >= 0.75 * planted.sum() and (~planted[fired]).sum() <= 0.01 * (~planted).sum()


def test_a_rate_that_moves_fourfold_becomes_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """A behaviour both checkpoints say, 80 times by after and 20 by before (a rate that moves fourfold), among
    1,000 background sentences said by either, six draws. Among 15 neighbours a fifth from before is z = 2.3,
    under the keep bar: only chance lifts some over it, and half the draws form no group. Read among 30 as well
    (SCALES), every draw forms a group of the behaviour that fires on nearly all of it and hardly elsewhere."""

    def fired(seed: int) -> tuple[int, int]:
        rng = np.random.default_rng(seed)
        said = _around(rng, np.eye(32, dtype=np.float32)[0], 100, 0.1)
        vectors, planted, chooser, after = _said_by_after(rng, said, 1000)
        after[:20] = 0.0  # the checkpoint with less says it too
        model = find_contrastive_groups(vectors, after, chooser, ~chooser, np.random.default_rng(0))
        assert all(planted[members].mean() >= 0.8 for members in model.members)
        rows = np.unique(model.fire(vectors)[0])
        return int(planted[rows].sum()), int((~planted[rows]).sum())

    both = [fired(seed) for seed in range(6)]
    assert all(behaviour >= 90 and other <= 10 for behaviour, other in both), both
    monkeypatch.setattr(groups, "SCALES", (15,))
    alone = [fired(seed) for seed in range(6)]
    assert sum(b == 0 for b, _ in alone) >= 2 and sum(b for b, _ in alone) < 0.5 * sum(b for b, _ in both), alone
