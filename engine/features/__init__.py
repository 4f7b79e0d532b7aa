"""The feature engine: a reader model truncated at one layer, a sparse autoencoder over its token activations,
deterministic structural features, and offline labels. The pipeline stage is `engine.features.stage.run`."""
