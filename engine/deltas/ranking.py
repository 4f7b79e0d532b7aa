"""The exploratory ranking of a small study: the whole study's largest credible changes, families interleaved.

Ranking every row by p-value puts thousands of SAE rows first: with many rows a few reach tiny p on modest
changes, and a p-value measures evidence, not size. A post-training lead asks "what changed most, that I can
trust is not noise?", so a row's score is its **conservative effect**: the distance of its 95% interval from 0
(|delta| minus the interval's half-width on the near side, 0 when the interval covers 0), the smallest change
the data support. It is a shrunk effect that needs no tuning: a large delta resting on few rollouts is pulled
toward 0 by its own standard error. A feature is listed once, at its kind with the highest score: its
rows of other kinds (fires anywhere, per text segment, per tool call) restate the same behaviour and would
take the places of other behaviours. Within each family rows go by that score (then p, then |delta|); the
families are then interleaved (each family's best, in order of their scores, then each family's second, ...), so
no family can fill the list by its size alone.
"""

from __future__ import annotations

import polars as pl


def conservative_effect() -> pl.Expr:
    """The distance of [ci_low, ci_high] from 0 (0 when it covers 0 or is missing: null or NaN, which polars
    would otherwise order above every number)."""
    low, high = pl.col("ci_low").fill_nan(None), pl.col("ci_high").fill_nan(None)
    return pl.when(low > 0).then(low).when(high < 0).then(-high).otherwise(0.0).fill_null(0.0)


def exploratory_order(rows: pl.DataFrame, top: int) -> pl.DataFrame:
    """The first `top` of tested `rows` (feature_id, family, delta, ci_low, ci_high, p_value) in exploratory
    order, one per feature, with their `score` (conservative effect) and `family_rank` (1 = the family's best)."""
    scored = (
        rows.with_columns(score=conservative_effect(), size=pl.col("delta").abs())
        .sort(["score", "p_value", "size"], descending=[True, False, True], nulls_last=True)
        .unique(subset="feature_id", keep="first", maintain_order=True)
    )
    ranked = scored.with_columns(family_rank=pl.int_range(1, pl.len() + 1).over("family"))
    best = ranked.filter(pl.col("family_rank") == 1).select("family", family_score="score")
    return (
        ranked.join(best, on="family")
        .sort(["family_rank", "family_score", "family"], descending=[False, True, False])
        .head(top)
        .drop("family_score", "size")
    )
