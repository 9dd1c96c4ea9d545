"""Token ids for everything the policy does not sample: the prompt and the observation glue.

The glue around an observation (closing the assistant turn, a role header, re-opening the
assistant turn) is derived from the tokenizer's own chat template by rendering a conversation
with sentinel contents and cutting at the sentinels, so any ChatML/Qwen-style template works
without hard-coded strings in the rollout.

Data (message contents: questions, documents, tool output) is encoded without special-token
parsing: a document holding `<|im_end|>\\n<|im_start|>user` stays text and cannot open a turn.
Only the template's glue and a format's own wrapper become special tokens.

A reply the policy sampled and the caller sent back unchanged (`prompt_ids(sampled=...)`) is written
as the ids that were sampled, special tokens and all: the history then holds what the policy saw.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from agent_r1.envs.formats import Observation
from agent_r1.rollout.tool_slots import PATTERN as TOOL_SLOT
from agent_r1.rollout.tool_slots import ToolSlots
from agent_r1.trajectory import ObservationIds

log = logging.getLogger(__name__)

_ACTION = "\x00ACTION\x00"
_OBS = "\x00OBSERVATION\x00"
_DATA = re.compile("\x00DATA(\\d+)\x00|" + TOOL_SLOT)  # a message's content | tool text (tool_slots.py)
_PROBE = " \n <probe> \n "  # a content a verbatim template leaves exactly as it is
_REPLY = "\x00REPLY\x00"  # what the template renders where a sampled reply's ids go

# A fast tokenizer sets whether special-token text is parsed as a flag on its shared Rust tokenizer,
# per call, then encodes with the GIL released: a trusted and a data encode on one tokenizer from two
# threads (endpoint, rollout) can each run under the other's flag. One lock per tokenizer object,
# shared by every codec on it, keyed weakly so a dropped tokenizer takes its lock with it.
_ENCODE_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


class Sampled(NamedTuple):
    """A prompt part written as the ids the policy sampled; `text` is what the template rendered in
    their place (so the checks that compare renders read it)."""

    text: str
    ids: tuple[int, ...]


Part = tuple[str, bool] | Sampled  # (text, is_data), or ids as sampled


def _encode_lock(tokenizer: Any) -> threading.Lock:
    lock = _ENCODE_LOCKS.get(tokenizer)
    if lock is None:
        with _LOCKS_LOCK:
            lock = _ENCODE_LOCKS.setdefault(tokenizer, threading.Lock())
    return lock


class ChatCodec:
    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.eos_token_id = tokenizer.eos_token_id
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        with_obs = tokenizer.apply_chat_template(
            base + [{"role": "assistant", "content": _ACTION}, {"role": "tool", "content": _OBS}],
            tokenize=False, add_generation_prompt=True)
        after_action = with_obs.split(_ACTION, 1)[1]
        self.glue_before, self.glue_after = after_action.split(_OBS, 1)
        # Qwen2.5's template wraps tool messages in <tool_response> itself; then the env's own
        # wrapper is peeled off once so the model never sees the tags doubled
        self.template_wraps_tool = self.glue_before.rstrip().endswith("<tool_response>")
        # the added tokens that split_special_tokens leaves as text (control tokens, format tags)
        specials = sorted({t.content for t in tokenizer.added_tokens_decoder.values() if t.special}, key=len,
                          reverse=True)
        self._special_ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
        self._special_text = {i: t for t, i in self._special_ids.items()}
        self._special_re = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._verbatim = self._render_with_slots(base[:1] + [{"role": "user", "content": _PROBE}], None) is not None

    def encode(self, text: str) -> list[int]:
        """Trusted text (template glue, the model's own action text): special tokens are parsed."""
        with _encode_lock(self.tokenizer):
            return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_data(self, text: str) -> list[int]:
        """Data (questions, documents, tool output): special-token text stays ordinary text."""
        if not text:
            return []
        with _encode_lock(self.tokenizer):
            return self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def encode_parts(self, parts: Sequence[Part]) -> list[int]:
        """(text, is_data) pieces in order: special tokens are parsed in the trusted pieces only;
        a `Sampled` piece is its ids as they are.

        Text runs across piece boundaries are encoded together, so when no data holds special-token
        text the ids equal `encode("".join(texts))` exactly."""
        ids: list[int] = []
        run: list[str] = []
        after = ""  # the special token a sampled reply ended on: the template's own copy is dropped
        for part in parts:
            if isinstance(part, Sampled):
                ids += self.encode_data("".join(run)) + list(part.ids)
                run, after = [], self._special_text.get(part.ids[-1], "") if part.ids else ""
                continue
            text, is_data = part
            if after and not is_data and text.startswith(after):
                text = text[len(after):]
            after = ""
            if is_data or self._special_re is None:
                run.append(text)
                continue
            pos = 0
            for m in self._special_re.finditer(text):
                run.append(text[pos:m.start()])
                ids += self.encode_data("".join(run)) + [self._special_ids[m.group()]]
                run, pos = [], m.end()
            run.append(text[pos:])
        return ids + self.encode_data("".join(run))

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampled: Mapping[int, Sequence[int]] | None = None) -> list[int]:
        """The prompt ids of `messages` (with the generation prompt). `sampled`: message index -> the ids
        the policy sampled for that assistant message, written in its place (the template's header and
        close around them; a close the reply sampled itself is not written twice)."""
        sampled = sampled or {}
        shown = [{"role": "assistant", "content": _REPLY} if i in sampled else m for i, m in enumerate(messages)]
        parts = self._render_with_slots(shown, tools, sampled) if self._verbatim else None
        if parts is None:  # a template that rewrites contents: its own render, parsed as before
            log.warning("chat template does not insert message contents verbatim; the prompt is encoded whole")
            return self.encode(self.tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=True))
        return self.encode_parts(parts)

    def _render_with_slots(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                           sampled: Mapping[int, Sequence[int]] | None = None) -> list[Part] | None:
        """The rendered prompt as (text, is_data) parts, each string content, tool description and
        tool-call argument a data part, each message in `sampled` its ids; None when the template does
        not insert contents verbatim (checked by rendering them for real)."""
        slots, sampled = ToolSlots(), sampled or {}
        parts = self._slotted_parts(messages, slots.messages(messages), slots.tools(tools), slots, sampled)
        if slots and "".join(t for t, _ in parts) != self.tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=True):
            log.warning("chat template writes tool text other than as JSON or verbatim; tool descriptions and "
                        "arguments are encoded as the template's own text")
            parts = self._slotted_parts(messages, messages, tools, ToolSlots(), sampled)
        if messages and messages[-1].get("content") == _PROBE:  # the one-time verbatim check
            real = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                      add_generation_prompt=True)
            return parts if "".join(t for t, _ in parts) == real else None
        return parts

    def _slotted_parts(self, messages: list[dict[str, Any]], rendered: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None, slots: ToolSlots,
                       sampled: Mapping[int, Sequence[int]]) -> list[Part]:
        """`rendered` (messages, their tool text slotted) through the template with each content slotted
        too, cut at the slots into (text, is_data) parts holding `messages`' contents and the slots' text."""
        # an empty content stays empty: templates test it (Qwen2.5 writes "\n" + content only when there
        # is one, as for an assistant turn holding only tool calls), and a slot would read as non-empty
        slotted = [dict(m, content=f"\x00DATA{i}\x00") if isinstance(m.get("content"), str) and m["content"] else m
                   for i, m in enumerate(rendered)]
        text = self.tokenizer.apply_chat_template(slotted, tools=tools or None, tokenize=False,
                                                  add_generation_prompt=True)
        parts: list[Part] = []
        pos = 0
        for m in _DATA.finditer(text):
            index = int(m.group(1)) if m.group(1) is not None else -1
            if index in sampled:
                parts += [(text[pos:m.start()], False), Sampled(messages[index]["content"], tuple(sampled[index]))]
                pos = m.end()
                continue
            if m.group(1) is not None:
                data = messages[index]["content"]
            else:
                quoted = text[m.start() - 1:m.start()] == '"' == text[m.end():m.end() + 1]
                data = slots.text(int(m.group(2)), quoted)
            parts += [(text[pos:m.start()], False), (data, True)]
            pos = m.end()
        parts.append((text[pos:], False))
        return parts

    def observation_ids(
        self, observation: str, inline: bool, action_ids: list[int], max_tokens: int
    ) -> tuple[list[int], bool]:
        """(ids, truncated): the observation cut to `max_tokens`, wrapped in glue.

        The format's wrapper (`<information>`, `<tool_response>`) is kept whole and counted first;
        the rest of the budget is shared fairly among the results' contents, each cut on its own, so
        a long first result can neither cut the closing tag nor hide the later results.
        Inline observations (tag format) are appended inside the assistant turn with no glue.
        """
        parts = observation.parts if isinstance(observation, Observation) else ((observation, True),)
        if not inline and self.template_wraps_tool:
            parts = _peel(parts, "<tool_response>\n", "\n</tool_response>")
        encoded = [(self.encode_parts([(t, False)]) if not d else self.encode_data(t), d) for t, d in parts]
        wrapper = sum(len(ids) for ids, d in encoded if not d)
        shares = iter(_fair_shares([len(ids) for ids, d in encoded if d], max(max_tokens - wrapper, 0)))
        content: list[int] = []
        truncated = False
        for ids, is_data in encoded:
            if is_data:
                share = next(shares)
                truncated |= share < len(ids)
                ids = ids[:share]
            content += ids
        if inline:
            return ObservationIds(content), truncated
        before = self.glue_before
        eos_text = self.tokenizer.convert_ids_to_tokens(self.eos_token_id)
        closes = before.startswith(eos_text)
        if action_ids and action_ids[-1] == self.eos_token_id and closes:
            before, closes = before[len(eos_text):], False
        ids = self.encode(before) + content + self.encode(self.glue_after)
        # the action did not sample the end-of-turn token, so the template's close opens the observation:
        # counted, so GiGPO's anchor sees the same tool result either way (trajectory.ObservationIds)
        close = self.encode(eos_text) if closes else []
        return ObservationIds(ids, close=len(close) if ids[:len(close)] == close else 0), truncated


def _fair_shares(lengths: list[int], budget: int) -> list[int]:
    """Water-filling: short contents keep all their tokens, the long ones split what is left evenly."""
    shares = [0] * len(lengths)
    left = budget
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    for k, i in enumerate(order):
        shares[i] = min(lengths[i], left // (len(order) - k))
        left -= shares[i]
    return shares


def _peel(parts: tuple[tuple[str, bool], ...], head: str, tail: str) -> tuple[tuple[str, bool], ...]:
    """Drops `head` from the start and `tail` from the end of the observation, when it has both."""
    if not parts or not (parts[0][0].startswith(head) and parts[-1][0].endswith(tail)):
        return parts
    if len(parts) == 1:
        text, is_data = parts[0]
        return ((text[len(head): len(text) - len(tail)], is_data),) if len(text) >= len(head) + len(tail) else parts
    out = list(parts)
    out[0] = (parts[0][0][len(head):], parts[0][1])
    out[-1] = (parts[-1][0][: len(parts[-1][0]) - len(tail)], parts[-1][1])
    return tuple(p for p in out if p[0])
