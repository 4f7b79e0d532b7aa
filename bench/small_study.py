"""Benchmark: does a large hand-off change top the exploratory ranking of a real 4-task study?

    .venv/bin/python bench/small_study.py [--seeds 0,1,2] [--before 13] [--after 4] [--work DIR]

The real pair is grok-3 on tau2 airline, 4 tasks x 4 trials a side, standard against tighter hand-off policy
(`shared/data/tau2-grok3-policy`): the transfer tool goes from 5 of 16 rollouts to 0 of 16. Issue 12 asks that a
hand-off change from 81% to 25% of rollouts (13 of 16 to 4 of 16) at least top the exploratory list of such a
study. This bench runs the split and features stages (reader, SAE, structural and concept features; `rldiff
compare --llm none` defaults), then the deltas stage's whole-study statistics for the ranking, on:
- the real pair, unmodified (the baseline of the same run);
- for each seed, the real pair with hand-offs planted into rollouts that had none, until `--before` of the 16
  standard and `--after` of the 16 tighter rollouts hand off. A planted hand-off is what grok-3 writes when it
  hands off in this data: a `transfer_to_human_agents` call whose summary is a real summary of the same task
  (from the other tau2 files) or, for a task never handed off, built from the user's first message; the tool's
  "Transfer successful"; the hold message; and the simulated user's ###TRANSFER###, after the last message.
Every other message is the real one, so the planted change competes with every real change of the pair.

It prints, per study, the places of the transfer tool's rows (`tool:transfer_to_human_agents`) and of the
hand-off's (the tool or the structural `handoff` feature) in the whole-study exploratory ranking (the order
`rldiff info --exploratory` prints, `engine.deltas.ranking`: one row per feature) and the five rows at the top.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import AnalyzeConfig
from engine.deltas.stage import exploratory_ranking
from engine.ingest import ingest_file
from engine.pipeline import analyze
from engine.safe_text import line
from engine.store import Store
from engine.store.queries import row_labels
from engine.study import resolve_checkpoints

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tau2-grok3-policy"
PAIR = (
    "2025-10-13T11-40-16.379079_airline_llm_agent_grok-3_user_simulator_grok-3.json",
    "2025-10-13T11-40-32.212900_airline_tighter_policy_llm_agent_grok-3_user_simulator_grok-3.json",
)
TRANSFER = "transfer_to_human_agents"
# The hand-off as rldiff names it: the transfer tool, and the structural feature for a hand-off made by the tool
# or announced in a reply (engine.features.structural).
HANDOFF = (f"tool:{TRANSFER}", "handoff")


def hands_off(simulation: dict[str, Any]) -> bool:
    return any(call["name"] == TRANSFER for m in simulation["messages"] for call in m.get("tool_calls") or [])


def handoff_share(path: Path) -> str:
    """'k of n': the file's rollouts that hand off, of all."""
    simulations = json.loads(path.read_text())["simulations"]
    return f"{sum(map(hands_off, simulations))} of {len(simulations)}"


def real_summaries(folder: Path) -> dict[str, list[str]]:
    """task_id -> the summaries grok-3 wrote when it handed off, over every file of the folder."""
    out: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*_grok-3_*.json")):
        for simulation in json.loads(path.read_text())["simulations"]:
            for message in simulation["messages"]:
                for call in message.get("tool_calls") or []:
                    if call["name"] == TRANSFER:
                        out.setdefault(simulation["task_id"], []).append(call["arguments"]["summary"])
    return out


def plant_handoff(simulation: dict[str, Any], summary: str, call_id: str) -> None:
    """Append a hand-off, in the shape grok-3's real ones have here, after the rollout's last message."""
    turn = max(m.get("turn_idx") or 0 for m in simulation["messages"]) + 1
    call = {"id": call_id, "name": TRANSFER, "arguments": {"summary": summary}}
    simulation["messages"] += [
        {"role": "assistant", "content": "", "tool_calls": [call], "turn_idx": turn},
        {
            "role": "tool",
            "content": "Transfer successful",
            "id": call_id,
            "requestor": "assistant",
            "turn_idx": turn + 1,
        },
        {
            "role": "assistant",
            "content": "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.",
            "turn_idx": turn + 2,
        },
        {"role": "user", "content": "###TRANSFER###", "turn_idx": turn + 3},
    ]


def planted_file(source: Path, target: int, seed: int, summaries: dict[str, list[str]], out: Path) -> Path:
    """`source` with hand-offs planted into rollouts without one until `target` rollouts hand off."""
    data = json.loads(source.read_text())
    rng = random.Random(seed)
    without = [s for s in data["simulations"] if not hands_off(s)]
    missing = target - (len(data["simulations"]) - len(without))
    if missing < 0:
        raise SystemExit(f"{source.name}: already more than {target} hand-offs")
    for n, simulation in enumerate(rng.sample(without, missing)):
        first = next(m["content"] for m in simulation["messages"] if m["role"] == "user" and m.get("content"))
        options = summaries.get(simulation["task_id"]) or [
            f"The user asked: {first[:300]} Transferring to a human agent."
        ]
        plant_handoff(simulation, rng.choice(options), f"call_planted_{seed}_{n}")
    out.write_text(json.dumps(data))
    return out


def ranking(before: Path, after: Path, store_path: Path, config: AnalyzeConfig) -> list[dict[str, object]]:
    """The whole-study exploratory ranking, every tested row, of the pair (the stages up to the features: the
    ranking is the deltas stage's whole-study statistics, computed here once for every row)."""
    with Store(store_path) as store:
        ingest_file(store, before, "before")
        ingest_file(store, after, "after")
        analyze(store, config, until="features")
        config = resolve_checkpoints(store, config)
        rows = exploratory_ranking(store, config, np.random.default_rng(config.seed), top=None)
        labels = row_labels(store, [(row["feature_id"], row["kind"]) for row in rows])
        return [{**row, "label": labels.get((row["feature_id"], row["kind"]), "")} for row in rows]


def report(title: str, rows: list[dict[str, object]], seconds: float) -> list[str]:
    def places(names: tuple[str, ...]) -> str:
        return ", ".join(f"{i} ({row['kind']})" for i, row in enumerate(rows, 1) if row["name"] in names) or "none"

    lines = [
        f"{title}: the transfer tool's rows at {places((f'tool:{TRANSFER}',))}, the hand-off's (the tool or the "
        f"structural `handoff`) at {places(HANDOFF)} of {len(rows)} ({seconds:.0f} s)"
    ]
    for i, row in enumerate(rows[:5], 1):
        name = line(f"{row['name']} {row['label']}", 60)  # labels quote rollout text: control characters out
        lines.append(
            f"  {i}. {name:<60} {row['kind']:<9} {row['family']:<10} delta {100 * float(row['delta']):+6.1f} "
            f"score {100 * float(row['score']):5.1f}  p {float(row['p_value']):.2g}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="planting seeds (which rollouts get a hand-off)")
    parser.add_argument("--before", type=int, default=13, help="standard rollouts that hand off, of 16")
    parser.add_argument("--after", type=int, default=4, help="tighter rollouts that hand off, of 16")
    parser.add_argument("--work", type=Path, help="folder for the planted files and stores (default: a temp dir)")
    parser.add_argument("--data", type=Path, default=DATA, help=f"the tau2 grok-3 files (default: {DATA})")
    args = parser.parse_args()
    if not all((args.data / name).is_file() for name in PAIR):
        raise SystemExit(f"{args.data}: the 4-task pair {PAIR[0]} and {PAIR[1]} is not there (see --data)")
    logging.basicConfig(level=logging.WARNING)
    work = args.work or Path(tempfile.mkdtemp(prefix="rldiff-small-study-"))
    summaries = real_summaries(args.data)
    config = AnalyzeConfig(llm="none")
    studies: list[tuple[str, Path, Path]] = [("real pair", args.data / PAIR[0], args.data / PAIR[1])]
    for seed in (int(s) for s in args.seeds.split(",")):
        folder = work / f"seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        before = planted_file(args.data / PAIR[0], args.before, seed, summaries, folder / "before.json")
        after = planted_file(args.data / PAIR[1], args.after, seed + 1000, summaries, folder / "after.json")
        studies.append((f"planted, seed {seed}", before, after))
    for n, (title, before, after) in enumerate(studies):
        start = time.perf_counter()
        rows = ranking(before, after, work / f"study-{n}.duckdb", config)
        title = f"{title} ({handoff_share(before)} -> {handoff_share(after)})"
        print("\n".join(report(title, rows, time.perf_counter() - start)), flush=True)


if __name__ == "__main__":
    main()
