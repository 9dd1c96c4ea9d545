"""Scripted-agent demonstrations for the SFT warm start, rendered through the real env.

The scripted agent follows a sample's `plan` (its tool inputs: search queries, calculator
expressions, ...) and then answers; a share of
demos instead answers at once with a guess, so that the warm start is deliberately imperfect
and RL has something to fix: with too few guesses SFT alone already answers almost everything and
RL has no headroom to show, while with a majority of guesses the greedy warm start mostly guesses
and RL's job is to learn that searching first pays. Demos are Trajectories with the
same action mask as rollouts: only the agent's own text is trained on.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from agent_r1.config import DEMO_STYLES
from agent_r1.rollout.chat import ChatCodec
from agent_r1.trajectory import Trajectory, Turn


def _spaced(value: Any) -> str:
    """A leading space, so that with byte-level BPE a name inside a tag gets the same token ids
    as in the question and the documents (" Duso"), and the policy can copy ids instead of
    learning a second spelling of every name; the parsers strip it."""
    return " " + str(value).strip()


def copy_spelling(value: Any, context: str) -> str:
    """`value` spelled as it was last written in `context` (chat demos): with a leading space when its
    latest whole-word occurrence follows a space (a name or number inside a sentence), bare when it
    follows anything else (a tool result on a line of its own, "<tool_response>\n1217\n"; a number
    that opens the question), spaced when it does not occur. Byte-level BPE gives " 1217" and "1217"
    other ids, so a demo that always spaced would teach a second spelling of every value read from a
    tool result instead of copying its ids. Only the first word's spacing is the demo's choice: the
    words after it follow spaces whatever the context."""
    text = str(value).strip()
    if not text:
        return " "
    word = text.split()[0]
    found = list(re.finditer(r"(?<!\w)" + re.escape(word) + r"(?!\w)", context))
    if found and found[-1].start() > 0 and context[found[-1].start() - 1] != " ":
        return text
    return " " + text


def tool_action(fmt: str, name: str, arguments: dict[str, Any]) -> str:
    """The text of one tool call in format `fmt` (tag: the one argument is the tag body)."""
    if fmt == "tag":
        (value,) = arguments.values()
        return f"<{name}>{_spaced(value)}</{name}>"
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def scripted_actions(sample: dict[str, Any], fmt: str, guess: str | None,
                     tool_args: dict[str, str] | None = None, turn: Callable[..., str] | None = None,
                     spell: Callable[[Any], str] = _spaced) -> list[str]:
    """The scripted agent's actions: each `plan` step as a tool call, then the answer.

    A plan step is a call (`{"name": ..., "arguments": {...}}`) or a plain string, the input of
    the sample's first tool; `tool_args` maps tool names to the argument a string fills
    (default: search -> query). With `turn` (`chat_turn` over a tokenizer) each action is a whole
    assistant turn as the chat template writes it (demo_style chat). `spell` writes a copied value
    (an answer; a chat call's string argument): `_spaced`, or `copy_spelling` over the context so far.
    """
    answer = f"<answer>{spell(guess if guess is not None else sample['answers'][0])}</answer>"
    answer = turn(content=answer) if turn else answer
    if guess is not None:
        return [answer]
    tool_args = tool_args or {"search": "query"}
    default_tool = ((sample.get("env") or {}).get("tools") or list(tool_args) or ["search"])[0]

    def call(name: str, arguments: dict[str, Any]) -> str:
        return turn(calls=[{"name": name, "arguments": arguments}]) if turn else tool_action(fmt, name, arguments)

    actions = []
    for step in sample.get("plan") or []:
        if isinstance(step, dict):
            actions.append(call(step["name"], step.get("arguments", {})))
        else:
            # chat: spaced inside the JSON string too, so a copied name has the question's token ids
            actions.append(call(default_tool, {tool_args[default_tool]: spell(step) if turn else step}))
    return actions + [answer]


def chat_turn(tokenizer: Any, calls: list[dict[str, Any]] | None = None, content: str = "") -> str:
    """An assistant turn as `tokenizer`'s chat template writes it, from after the generation prompt
    through the end-of-turn token: what a policy answering an OpenAI-style client samples, which the
    client's re-sent history then renders back token for token. `calls`: [{"name", "arguments"}]."""
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"type": "function", "function": c} for c in calls]
    prefix = tokenizer.apply_chat_template(base, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(base + [message], tokenize=False)
    eos = tokenizer.eos_token
    turn = full[len(prefix):] if full.startswith(prefix) else ""
    if eos not in turn or any(json.dumps(c["name"]) not in turn for c in calls or ()):
        raise ValueError("sft.demo_style=chat needs a chat template that renders an assistant message's "
                         "tool_calls after the generation prompt (model.chat_template: qwen2.5); this one "
                         f"wrote {turn[:120]!r}")
    return turn[:turn.index(eos) + len(eos)]


def demo_trajectory(env: Any, codec: ChatCodec, sample: dict[str, Any],
                    actions: list[str] | Callable[[str], list[str]], max_observation_tokens: int) -> Trajectory:
    """Plays `actions` in `env`; observations come from the real tools, masked as in rollouts. `actions`
    may be a function of the text so far (prompt, actions, observations), asked again before each turn
    for the actions from there on (chat demos spell a copied value as the context last wrote it)."""
    messages = env.reset(sample)
    prompt = codec.prompt_ids(messages, tools=None if env.fmt.inline_observations else env.tool_schemas)
    traj = Trajectory(sample_id=str(sample["id"]), prompt_ids=prompt, sample=sample)
    planned = actions if callable(actions) else (lambda _context: actions)
    while True:
        todo = planned(codec.decode(traj.token_ids))[len(traj.turns):]
        if not todo:
            break
        text = todo[0]
        ids = codec.encode(text)  # env style: rollouts stop at the closing tag, so no end-of-turn token
        step = env.step(text)
        turn = Turn(action_ids=ids, action_logprobs=[0.0] * len(ids), action_text=text)
        traj.turns.append(turn)
        if step.done:
            traj.answer, traj.stop_reason = step.answer, "answer"
            break
        turn.observation_ids, _ = codec.observation_ids(step.observation or "", env.fmt.inline_observations, ids,
                                                        max_observation_tokens)
    return traj


def build_demos(samples: list[dict[str, Any]], make_env: Callable[[dict[str, Any]], Any], codec: ChatCodec,
                fmt: str, guess_fraction: float, seed: int, max_observation_tokens: int,
                style: str = "env") -> list[Trajectory]:
    """One demo per sample; `guess_fraction` of them answer by a guess drawn from the answers
    of other samples of the same question type (often wrong, sometimes right). `style`: DEMO_STYLES
    (sft.demo_style)."""
    if style not in DEMO_STYLES or (style == "chat" and fmt != "hermes"):
        raise ValueError(f"sft.demo_style={style!r} with env.format={fmt!r}: choose one of {list(DEMO_STYLES)}; "
                         "chat writes tool calls as the chat template does, so it needs env.format=hermes")
    turn = partial(chat_turn, codec.tokenizer) if style == "chat" else None
    demos = []
    for s, guess in zip(samples, demo_guesses(samples, guess_fraction, seed)):
        env = make_env(s)
        args = _string_arguments(env)
        if turn is None:
            actions: Any = scripted_actions(s, fmt, guess, args)
        else:
            def actions(context: str, s=s, guess=guess, args=args) -> list[str]:
                return scripted_actions(s, fmt, guess, args, turn, partial(copy_spelling, context=context))
        demos.append(demo_trajectory(env, codec, s, actions, max_observation_tokens))
    return demos


def demo_guesses(samples: list[dict[str, Any]], guess_fraction: float, seed: int) -> list[str | None]:
    """Per sample, the guess its demo answers by (None: it follows its plan): `guess_fraction` of them,
    each drawn from the answers of the samples of its question type."""
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {}
    for s in samples:
        pools.setdefault(s.get("type", ""), []).append(s["answers"][0])
    return [rng.choice(pools[s.get("type", "")]) if rng.random() < guess_fraction else None for s in samples]


def _string_arguments(env: Any) -> dict[str, str]:
    """{tool name: its one required string parameter} for the env's tools that have one."""
    out = {}
    for name, tool in env.runner.tools.items():
        props = tool.parameters.get("properties", {})
        strings = [k for k in tool.parameters.get("required", props) if props.get(k, {}).get("type") == "string"]
        if len(strings) == 1:
            out[name] = strings[0]
    return out
