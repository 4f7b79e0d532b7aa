"""Statistics for comparing checkpoints: pure numpy/scipy, no store access.

The data are nested (tasks, rollouts per task and checkpoint, segments per rollout), so every test here
keeps segments with their rollout and compares checkpoints within tasks. See docs/statistics.md.
"""
