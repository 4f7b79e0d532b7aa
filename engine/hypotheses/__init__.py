"""Hypotheses: drafting (LLM or extractive), labelers (verifier, judge), held-out validation, the ledger."""
