"""Methods added to every vLLM worker (`LLM(worker_extension_cls=WORKER_EXTENSION)`), called by name
through `LLM.collective_rpc("<method>", args=...)`.

Why by name: vLLM refuses to pickle a function into its engine process unless
VLLM_ALLOW_INSECURE_SERIALIZATION=1, and a method name is what TRL's and verl's integrations send too.
The worker process imports this module itself (the class is named by its import path), so it
must import without vLLM's driver side and stay small.

Weights cross the process boundary as a safetensors file the engine side writes (tmpfs where there
is one): vLLM's RPC serialiser is built for scheduler messages, not for a model's tensors, and a file
is one copy each way whatever the transport. `agent_r1_load_weights_file` loads it with the model's
`reload_weights`, which maps HF names onto vLLM's fused layers (qkv_proj, gate_up_proj) and
processes them for its kernels as a fresh load does.
"""

from __future__ import annotations

from typing import Any

WORKER_EXTENSION = "agent_r1.rollout.vllm_worker.WeightSyncExtension"


class WeightSyncExtension:
    """Mixed into vLLM's worker class."""

    reload_weights: Any  # vLLM's Worker.reload_weights (in-place reload, vLLM >= 0.1x)

    def agent_r1_load_weights_file(self, path: str) -> int:
        """Loads every tensor of the safetensors file at `path` (HF names); returns how many."""
        from safetensors.torch import load_file

        tensors = load_file(path)
        # not `model.load_weights`: the CPU build repacks linear weights for its kernels after loading
        # (the parameters left behind are empty), and `reload_weights` redoes that processing per layer
        self.reload_weights(weights_iterator=iter(tensors.items()))
        return len(tensors)
