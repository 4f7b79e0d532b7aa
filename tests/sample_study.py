"""The analysed study the TUI, MCP, report and query tests read: the tau2 demo pair through the real stages.

`rldiff compare` on the demo pair takes minutes (the default reader, an SAE sized from the data, the sentence
features, hypotheses drafted and labelled over sentence embeddings). Here the same stages run in their cheapest
honest configuration: a tiny random encoder with the default reader's tokenizer as the reader (the pipeline, not
the reader, is under test), a small SAE trained for a few steps, no sentence features, and fewer permutations.
Split, structural features, deltas and clusters are exactly what the product computes on this data. The
hypotheses are the user's kind, added and tested on held-out rollouts by the real ledger with regex verifiers
(drafting needs the sentence embedder, which is what makes the full analysis slow); one is accepted with a note
and two of its labels are checked by hand.
Every number a test checks is read back from the store it made, never written down here.

The build costs about 45 s of CPU, so `cached_sample_study` keeps the result under pytest's cache, keyed by a hash
of everything that could change it (the engine's code and SQL, this file, the sample pair, the library versions):
any change to these rebuilds it, and a session with none starts in seconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
from importlib.metadata import version
from pathlib import Path

from engine.config import AnalyzeConfig
from engine.hypotheses import lifecycle
from engine.ingest import ingest_file
from engine.pipeline import analyze
from engine.store import Store
from tests.factories_features import tiny_reader

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "tau2-grok3"
LIBRARIES = ("duckdb", "numpy", "polars", "torch", "transformers", "sae-lens", "scipy", "hdbscan")
BEFORE, AFTER = "standard", "tighter"
HAND_OFF = "The agent hands off to a human agent less often"
# (statement, regex, segment kind, stated direction): user hypotheses, each tested on held-out rollouts
HYPOTHESES = (
    (HAND_OFF, r"^transfer_to_human_agents\b", "tool_call", "decrease"),
    ("The agent apologises more", r"\b(sorry|apologi[sz]e)", "text", "increase"),
    ("The agent searches for direct flights more", r"^search_direct_flight\b", "tool_call", "increase"),
    ("The agent asks the user to confirm more", r"\bconfirm\b", "text", "increase"),
    ("The agent asks the user to confirm less", r"\bconfirm\b", "text", "decrease"),
)
ACCEPTED_NOTE = "seen in the transcripts"


def config(reader: Path) -> AnalyzeConfig:
    return AnalyzeConfig(
        before=BEFORE,
        after=AFTER,
        reader=str(reader),
        device="cpu",
        sae_width=64,  # a small dictionary: what the SAE rows exercise is their path, not their quality
        sae_steps=50,
        permutations=300,  # enough for q-values below 0.05 on the hand-off; the default 2000 is slower
        sentence_features=False,
        llm=None,
    )


def build_sample_study(folder: Path) -> Path:
    """Ingest the demo pair into `folder`/study.duckdb, analyse it and test the user hypotheses; returns the path."""
    reader = tiny_reader(folder / "reader", "bert", layers=2)
    path = folder / "study.duckdb"
    with Store(path) as store:
        ingest_file(store, SAMPLE / f"{BEFORE}.jsonl.gz", BEFORE)
        ingest_file(store, SAMPLE / f"{AFTER}.jsonl.gz", AFTER)
        analyze(store, config(reader), until="clusters")
        for statement, pattern, kind, direction in HYPOTHESES:
            hypothesis_id = lifecycle.add_hypothesis(store, statement, pattern=pattern, kind=kind, direction=direction)
            lifecycle.test_hypothesis(store, hypothesis_id)
        accepted = int(store.scalar("SELECT hypothesis_id FROM hypotheses WHERE statement = ?", [HAND_OFF]))
        lifecycle.decide(store, accepted, "accepted", ACCEPTED_NOTE)
        for segment_id, verdict in store.execute(  # a person checks the labeler on two of its held-out labels
            "SELECT segment_id, label FROM hypothesis_labels WHERE hypothesis_id = ? ORDER BY segment_id LIMIT 2",
            [accepted],
        ).fetchall():
            lifecycle.add_user_label(store, accepted, segment_id, verdict)
    return path


def inputs_hash() -> str:
    """A hash of what the built study depends on: a change to any of it means a rebuild."""
    digest = hashlib.sha256()
    files = sorted(
        [*(REPO / "engine").rglob("*.py"), *(REPO / "engine").rglob("*.sql"), *SAMPLE.glob("*.jsonl.gz")]
        + [Path(__file__), REPO / "tests" / "factories_features.py"]
    )
    for file in files:
        digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes())
    digest.update(" ".join(version(name) for name in LIBRARIES).encode())
    return digest.hexdigest()[:16]


def cached_sample_study(cache: Path) -> Path:
    """The study built by `build_sample_study`, from `cache` when these inputs built it before. A lock on the
    cache folder makes a second pytest process wait for the first one's build instead of racing it."""
    folder = cache / inputs_hash()
    built = folder / "built"  # written last: an interrupted build is not taken for a finished one
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            for stale in cache.iterdir():
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
            folder.mkdir()
            build_sample_study(folder)
            built.touch()
    return folder / "study.duckdb"
