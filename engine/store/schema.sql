-- rldiff study store, schema version 4.
-- THE schema: every table a user, the TUI, the MCP server or a report may query. Names and meanings of the
-- contract columns are fixed (DESIGN.md §4); later versions only add. Applied by engine.store.Store on open.

-- Keys: schema_version; analysis_config (the last `analyze`'s whole configuration, JSON: engine.study);
-- split_mode, split_warning (engine.split); sae_source (the SAE the current features came from: a local
-- folder, 'release/sae_id' or '', written with the features; engine.clusters reads its decoder there).
CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

-- A checkpoint is one model (or policy) whose rollouts are compared: typically "before" and "after".
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint  VARCHAR PRIMARY KEY,
    ordinal     INTEGER NOT NULL,          -- order of first ingest: 0 is the earliest
    created_at  TIMESTAMP NOT NULL
);

-- One row per ingested file and checkpoint: re-ingesting the same content is a no-op.
CREATE TABLE IF NOT EXISTS sources (
    source_hash  VARCHAR NOT NULL,         -- sha256 of the file's bytes
    checkpoint   VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    format       VARCHAR NOT NULL,
    n_rollouts   INTEGER NOT NULL,
    n_skipped    INTEGER NOT NULL,
    ingested_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (source_hash, checkpoint)
);

CREATE TABLE IF NOT EXISTS rollouts (
    rollout_key     BIGINT PRIMARY KEY,    -- store-wide id
    checkpoint      VARCHAR NOT NULL,
    rollout_id      VARCHAR NOT NULL,      -- exactly as given in the input; unique within a checkpoint
    task_id         VARCHAR NOT NULL,
    environment_id  VARCHAR,
    trial           INTEGER,
    reward          DOUBLE,
    split           VARCHAR,               -- 'discovery' | 'heldout' | 'excluded' (by --where) | NULL before the split
    source_hash     VARCHAR NOT NULL,
    source_line     INTEGER NOT NULL,      -- physical line (JSONL) or record index (JSON list) in the source
    n_messages      INTEGER NOT NULL,
    metadata        JSON,
    -- strata (schema version 2): what users slice by, e.g. `rldiff analyze --where "NOT timed_out"`
    termination_reason  VARCHAR,           -- as the harness names it: 'user_stop', 'max_steps', 'submitted', ...
    error           VARCHAR,               -- the harness's error for the rollout, NULL when it ended cleanly
    timed_out       BOOLEAN,               -- hit a time, step or token limit (NULL: the input does not say)
    tokens          BIGINT,                -- model tokens, input and output together
    cost_usd        DOUBLE,                -- the agent's cost as the input reports it
    model           VARCHAR                -- the agent's model as the input names it
);

-- Every message of every rollout, as context for the rollout viewer (segments point into it).
CREATE TABLE IF NOT EXISTS messages (
    rollout_key    BIGINT NOT NULL,
    message_index  INTEGER NOT NULL,       -- position in the input `messages` list
    role           VARCHAR NOT NULL,       -- system | user | assistant | tool
    content        VARCHAR,
    reasoning      VARCHAR,
    tool_calls     JSON,                   -- [{"id", "name", "arguments"}] for assistant messages
    tool_call_id   VARCHAR,
    name           VARCHAR,
    is_error       BOOLEAN,                -- tool results only: the environment reported an error
    PRIMARY KEY (rollout_key, message_index)
);

-- The units of analysis: what the model itself produced.
CREATE TABLE IF NOT EXISTS segments (
    segment_id     BIGINT PRIMARY KEY,
    rollout_key    BIGINT NOT NULL,
    message_index  INTEGER NOT NULL,
    part_index     INTEGER NOT NULL,       -- tool call's position in its message; 0 for text and reasoning
    kind           VARCHAR NOT NULL,       -- 'reasoning' | 'text' | 'tool_call'
    text           VARCHAR NOT NULL,       -- tool_call: 'NAME ARGS_JSON'
    tool_name      VARCHAR,
    tool_args      VARCHAR,                -- JSON text; the raw string when the input was not valid JSON
    args_valid     BOOLEAN,                -- tool_call: whether the arguments parsed as JSON
    origin         VARCHAR NOT NULL,       -- 'content' | 'reasoning_field' | 'think_tool' | 'tool_calls'
    content_hash   VARCHAR NOT NULL        -- sha256 of (kind, text): the activation cache key
);

-- Features: SAE latents and deterministic structural features.
CREATE TABLE IF NOT EXISTS features (
    feature_id   BIGINT PRIMARY KEY,
    source       VARCHAR NOT NULL,         -- 'sae' | 'structural' | 'concept' | 'group' (docs/concepts.md)
    name         VARCHAR NOT NULL UNIQUE,  -- stable key: 'sae:123', 'tool:get_order', ...
    label        VARCHAR NOT NULL,         -- readable, offline
    explanation  VARCHAR,                  -- LLM-written, when an LLM is configured
    sae_index    INTEGER,                  -- latent index for source = 'sae'
    threshold    DOUBLE NOT NULL,          -- activation above which the feature "fires"
    top_ngrams   JSON,                     -- distinctive n-grams in top-activating contexts
    snippets     JSON,                     -- short contexts of the strongest activations (SAE features)
    run_id       VARCHAR
);

-- Sparse: only non-zero activations. For SAE features, the max over the segment's tokens.
CREATE TABLE IF NOT EXISTS segment_features (
    segment_id  BIGINT NOT NULL,
    feature_id  BIGINT NOT NULL,
    activation  FLOAT NOT NULL
);

-- Top-activating segments per feature and checkpoint, with per-token activations for highlighting.
CREATE TABLE IF NOT EXISTS feature_examples (
    feature_id   BIGINT NOT NULL,
    checkpoint   VARCHAR NOT NULL,
    rank         INTEGER NOT NULL,
    segment_id   BIGINT NOT NULL,
    activation   FLOAT NOT NULL,
    tokens       JSON,                     -- [[char_start, char_end, activation], ...] over segment.text
    PRIMARY KEY (feature_id, checkpoint, rank)
);

-- A feature's label drawn from its top discovery examples of one segment kind (SAE, concept and group features,
-- each kind it has examples of): a feature_deltas row of that kind reads it, so a change in reasoning is not
-- named by the feature's replies. Rows without one ('any', structural features) read features.label.
CREATE TABLE IF NOT EXISTS feature_kind_labels (
    feature_id  BIGINT NOT NULL,
    kind        VARCHAR NOT NULL,
    label       VARCHAR NOT NULL,
    PRIMARY KEY (feature_id, kind)
);

-- Per feature and segment kind, on the discovery split. kind 'any' is the rollout-level view.
CREATE TABLE IF NOT EXISTS feature_deltas (
    feature_id          BIGINT NOT NULL,
    kind                VARCHAR NOT NULL,
    prevalence_before   DOUBLE,            -- task-weighted mean of each rollout's rate (firing / segments of kind)
    prevalence_after    DOUBLE,
    delta               DOUBLE,            -- after - before, in proportion (x100 for points); 'any': length-adjusted
    ratio               DOUBLE,
    ci_low              DOUBLE,            -- CI of delta: cluster-robust t over tasks (within task if few tasks)
    ci_high             DOUBLE,
    p_value             DOUBLE,            -- permutation within task (Freedman-Lane on log-length for 'any')
    q_value             DOUBLE,            -- Benjamini-Hochberg within the row's family
    rollout_rate_before DOUBLE,            -- share of rollouts where it fires at least once
    rollout_rate_after  DOUBLE,
    n_before            INTEGER,           -- segments of this kind
    n_after             INTEGER,
    reward_assoc_before DOUBLE,            -- rollout-level association with reward within the checkpoint
    reward_assoc_after  DOUBLE,
    tested              BOOLEAN NOT NULL,
    skip_reason         VARCHAR,
    family              VARCHAR,           -- testing family with its own BH: structural|sae|concept|lexical|rollout
    pooled_before       DOUBLE,            -- sum(firing segments) / sum(segments): moves with length, shown only
    pooled_after        DOUBLE,
    min_p               DOUBLE,            -- smallest p-value the design allows (Tarone); > fdr: not tested
    PRIMARY KEY (feature_id, kind)
);

CREATE TABLE IF NOT EXISTS feature_task_deltas (
    feature_id         BIGINT NOT NULL,
    kind               VARCHAR NOT NULL,
    task_id            VARCHAR NOT NULL,
    prevalence_before  DOUBLE,
    prevalence_after   DOUBLE,
    n_before           INTEGER,
    n_after            INTEGER,
    PRIMARY KEY (feature_id, kind, task_id)
);

CREATE TABLE IF NOT EXISTS clusters (
    cluster_id         INTEGER PRIMARY KEY,
    label              VARCHAR NOT NULL,
    kind               VARCHAR NOT NULL,
    size               INTEGER NOT NULL,
    prevalence_before  DOUBLE,             -- any member fires
    prevalence_after   DOUBLE,
    delta              DOUBLE,
    ci_low             DOUBLE,
    ci_high            DOUBLE,
    p_value            DOUBLE,
    q_value            DOUBLE
);

CREATE TABLE IF NOT EXISTS cluster_members (
    cluster_id  INTEGER NOT NULL,
    feature_id  BIGINT NOT NULL,
    membership  DOUBLE,                    -- hdbscan membership probability
    PRIMARY KEY (cluster_id, feature_id)
);

CREATE TABLE IF NOT EXISTS hypotheses (
    hypothesis_id      INTEGER PRIMARY KEY,
    statement          VARCHAR NOT NULL,
    direction          VARCHAR NOT NULL,   -- 'increase' | 'decrease' (after relative to before)
    labeler            VARCHAR NOT NULL,   -- 'verifier' | 'judge'
    spec               JSON,               -- verifier spec, or {"question": ...} for a judge
    status             VARCHAR NOT NULL,   -- 'proposed' | 'validated' | 'rejected' | 'inconclusive'
    origin             VARCHAR NOT NULL,   -- 'llm' | 'extractive' | 'user'
    prevalence_before  DOUBLE,             -- held-out, from the labels
    prevalence_after   DOUBLE,
    delta              DOUBLE,
    ci_low             DOUBLE,
    ci_high            DOUBLE,
    p_value            DOUBLE,
    q_value            DOUBLE,
    mde                DOUBLE,             -- minimum detectable effect when inconclusive
    n_labeled          INTEGER,
    reward_assoc       DOUBLE,
    reason             VARCHAR,            -- why validated / rejected / inconclusive
    decision           VARCHAR,            -- the user's triage: 'accepted' | 'rejected' | NULL
    note               VARCHAR,
    provenance         JSON,               -- source cluster/features, prompt hash, model, split, seed
    created_at         TIMESTAMP NOT NULL,
    tested_at          TIMESTAMP,
    decided_at         TIMESTAMP,
    exploratory        BOOLEAN             -- written after held-out evidence was shown: never 'validated' (v5)
);

CREATE TABLE IF NOT EXISTS hypothesis_labels (
    hypothesis_id  INTEGER NOT NULL,
    segment_id     BIGINT NOT NULL,
    label          BOOLEAN NOT NULL,
    evidence       VARCHAR,                -- the span that decided the label
    weight         DOUBLE NOT NULL DEFAULT 1.0,  -- inverse sampling probability
    PRIMARY KEY (hypothesis_id, segment_id)
);

-- Every held-out test ever run, kept when its hypothesis is dropped or redrafted: the held-out BH family
-- counts all of them, so re-running the stage cannot forget earlier tests (docs/statistics.md).
CREATE TABLE IF NOT EXISTS heldout_tests (
    statement      VARCHAR NOT NULL,
    spec           VARCHAR NOT NULL,
    p_value        DOUBLE,
    tested_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (statement, spec)
);

-- Each time held-out evidence (labelled examples) was shown to a person (schema version 5): a user hypothesis
-- written after the first is exploratory (docs/statistics.md, "No leaks").
CREATE TABLE IF NOT EXISTS heldout_views (
    viewed_at      TIMESTAMP NOT NULL,
    via            VARCHAR NOT NULL,       -- 'cli' | 'tui' | 'mcp' | 'report'
    hypothesis_id  INTEGER                 -- whose examples, when one hypothesis's
);

-- The last labeler calibration of each hypothesis (schema version 5): engine.hypotheses.calibration, as JSON.
CREATE TABLE IF NOT EXISTS hypothesis_calibrations (
    hypothesis_id  INTEGER PRIMARY KEY,
    result         JSON NOT NULL,
    computed_at    TIMESTAMP NOT NULL
);

-- Labels a person gave, to calibrate the labeler.
CREATE TABLE IF NOT EXISTS user_labels (
    hypothesis_id  INTEGER NOT NULL,
    segment_id     BIGINT NOT NULL,
    label          BOOLEAN NOT NULL,
    created_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (hypothesis_id, segment_id)
);

-- Sentences of text and reasoning segments (schema version 2; docs/concepts.md). Tool calls have none: a tool
-- call is one unit. Spans are trimmed character offsets into segments.text; rewritten by each features run.
CREATE TABLE IF NOT EXISTS sentences (
    sentence_id     BIGINT PRIMARY KEY,
    segment_id      BIGINT NOT NULL,
    sentence_index  INTEGER NOT NULL,      -- position within the segment, from 0
    char_start      INTEGER NOT NULL,      -- [char_start, char_end) into segments.text
    char_end        INTEGER NOT NULL,
    text            VARCHAR NOT NULL
);

-- What each pipeline stage finished, with what configuration: a re-run skips finished work.
CREATE TABLE IF NOT EXISTS runs (
    run_id       VARCHAR PRIMARY KEY,
    stage        VARCHAR NOT NULL,
    config       JSON NOT NULL,
    input_hash   VARCHAR NOT NULL,
    versions     JSON NOT NULL,
    seed         BIGINT,
    status       VARCHAR NOT NULL,         -- 'running' | 'done' | 'failed' | 'stale' (inputs replaced)
    metrics      JSON,
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP
);

-- LLM responses keyed by prompt hash, with token and cost accounting.
CREATE TABLE IF NOT EXISTS llm_cache (
    prompt_hash    VARCHAR PRIMARY KEY,
    model          VARCHAR NOT NULL,
    response       JSON NOT NULL,
    input_tokens   INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    cost_usd       DOUBLE NOT NULL,
    created_at     TIMESTAMP NOT NULL
);
