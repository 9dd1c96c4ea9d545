"""Prefect flows and deployments; thin: each task calls the `agent_r1` library."""
