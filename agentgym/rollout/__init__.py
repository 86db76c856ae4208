"""Rollouts: token-level policies, the agent loop, trajectories, the async pipeline."""
