"""agent-r1: train tool-using LLM agents with end-to-end reinforcement learning."""

__version__ = "0.1.0"
