"""Training agents written against the OpenAI API: an endpoint that records token ids, and the
trajectories built from its records (docs/agents.md)."""
