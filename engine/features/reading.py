"""Step 1 of the features stage: every distinct segment text the activation cache lacks goes through the
truncated reader once; activations are written to the cache as they come (`engine.features.cache`)."""

from __future__ import annotations

import time

from engine.features.cache import ActivationCache
from engine.features.reader import Reader
from engine.features.reader_spec import ReaderSpec
from engine.features.run import SEGMENTS, FeatureRun, rates


def fill_cache(run: FeatureRun, spec: ReaderSpec, cache: ActivationCache) -> None:
    """Run the reader over every distinct segment text the cache lacks."""
    cursor = run.store.cursor()
    try:
        cursor.register("cached_hashes", cache.index().select("content_hash").to_arrow())
        missing = f"{SEGMENTS} AND s.content_hash NOT IN (SELECT content_hash FROM cached_hashes)"
        distinct = cursor.execute(f"SELECT count(DISTINCT s.content_hash) {SEGMENTS}", run.params).fetchall()[0][0]
        todo = cursor.execute(f"SELECT count(DISTINCT s.content_hash) {missing}", run.params).fetchall()[0][0]
        run.metrics.update(distinct_texts=distinct, cache_hits=distinct - todo, reader_segments=todo)
        if todo == 0:
            run.metrics.update(reader_tokens=0, reader_seconds=0.0)
            return
        started = time.perf_counter()
        reader = Reader.load(spec, run.device, run.settings)
        stream = cursor.sql(
            f"SELECT s.content_hash, any_value(s.kind), any_value(s.text) AS body {missing} "
            "GROUP BY s.content_hash ORDER BY length(body), s.content_hash",
            params=run.params,
        ).to_arrow_reader(1024)
        tokens = input_tokens = 0
        with rates(run.progress, "reading segments", todo) as step, cache.writer() as writer:
            for segment in reader.read(
                row for batch in stream for row in zip(*batch.to_pydict().values(), strict=True)
            ):
                writer.add(segment)
                tokens += len(segment.spans)
                input_tokens += segment.input_tokens
                step(1, len(segment.spans))
        seconds = time.perf_counter() - started
        run.metrics.update(
            reader_padded_tokens=reader.stats.padded_tokens,
            reader_tokens=tokens,
            reader_input_tokens=input_tokens,
            reader_seconds=round(seconds, 2),
            reader_tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
        )
    finally:
        cursor.close()
