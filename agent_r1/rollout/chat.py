"""Token ids for everything the policy does not sample: the prompt and the observation glue.

The glue around an observation (closing the assistant turn, a role header, re-opening the
assistant turn) is derived from the tokenizer's own chat template by rendering a conversation
with sentinel contents and cutting at the sentinels, so any ChatML/Qwen-style template works
without hard-coded strings in the rollout.
"""

from __future__ import annotations

from typing import Any

_ACTION = "\x00ACTION\x00"
_OBS = "\x00OBSERVATION\x00"


class ChatCodec:
    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.eos_token_id = tokenizer.eos_token_id
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        with_action = tokenizer.apply_chat_template(
            base + [{"role": "assistant", "content": _ACTION}], tokenize=False)
        with_obs = tokenizer.apply_chat_template(
            base + [{"role": "assistant", "content": _ACTION}, {"role": "tool", "content": _OBS}],
            tokenize=False, add_generation_prompt=True)
        after_action = with_obs.split(_ACTION, 1)[1]
        self.glue_before, self.glue_after = after_action.split(_OBS, 1)
        # what closes an assistant turn (e.g. "<|im_end|>\n"); the model may have sampled the
        # end-of-turn token itself, in which case only the rest is glue
        self.turn_close = with_action.split(_ACTION, 1)[1]
        # Qwen2.5's template wraps tool messages in <tool_response> itself; then the env's own
        # wrapper is peeled off once so the model never sees the tags doubled
        self.template_wraps_tool = self.glue_before.rstrip().endswith("<tool_response>")

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=True)
        return self.encode(text)

    def observation_ids(
        self, observation: str, inline: bool, action_ids: list[int], max_tokens: int
    ) -> tuple[list[int], bool]:
        """(ids, truncated): the observation content cut to `max_tokens`, wrapped in glue.

        Inline observations (tag format) are appended inside the assistant turn with no glue.
        """
        if not inline and self.template_wraps_tool:
            observation = _peel(observation, "<tool_response>\n", "\n</tool_response>")
        content = self.encode(observation)
        truncated = len(content) > max_tokens
        content = content[:max_tokens]
        if inline:
            return content, truncated
        before = self.glue_before
        eos_text = self.tokenizer.convert_ids_to_tokens(self.eos_token_id)
        if action_ids and action_ids[-1] == self.eos_token_id and before.startswith(eos_text):
            before = before[len(eos_text):]
        return self.encode(before) + content + self.encode(self.glue_after), truncated


def _peel(text: str, head: str, tail: str) -> str:
    if text.startswith(head) and text.endswith(tail):
        return text[len(head): len(text) - len(tail)]
    return text
