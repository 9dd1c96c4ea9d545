"""Turn / Trajectory / collate: one agent interaction as one token sequence with an action mask.

Token-in/token-out: `Turn.action_ids` are exactly the ids the engine sampled; they are stored as
they came and never decoded and re-tokenised. Everything else (prompt, observations and the
template glue around them) carries action mask 0.

Tensor convention of `collate`: every per-token tensor is aligned with `input_ids`; position t
describes token t (its log-probability is computed from the logits at t-1), so one `action_mask`
serves the policy loss, entropy, KL, value loss and advantage whitening alike.
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from typing import Any


class ObservationIds(list):
    """An observation's token ids that know how many of their leading tokens close the action's turn
    (`close`): after an action that ended without sampling the end-of-turn token (a stop string, the
    token budget) the template's own close (`<|im_end|>`) opens the observation; after one that sampled
    it, it does not. Those tokens are context like the rest (trained on as observation, mask 0); only
    GiGPO's step anchor (`collate`'s context_keys) leaves them out, so an equal tool result is one
    anchor however the action ended. The count rides on the ids because the rollout loop stores the
    codec's ids on the turn as they come (and pickling to and from Ray workers keeps it)."""

    def __init__(self, ids: Any = (), close: int = 0):
        super().__init__(ids)
        self.close = close


@dataclass
class Turn:
    """One agent step: the sampled action and what the environment answered."""

    action_ids: list[int]
    action_logprobs: list[float]
    action_text: str
    observation_ids: list[int] = field(default_factory=list)
    observation_text: str = ""
    process_reward: float = 0.0  # placed at the last action token of this turn
    tool_calls: int = 0
    valid_tool_calls: int = 0
    truncated: bool = False  # the action hit the per-turn token budget
    observation_truncated: bool = False
    masked: bool = False  # sampled but never trained on (a truncated action: rollout.mask_truncated_turns)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def observation_close(self) -> int:
        """How many leading observation tokens close this turn's action (ObservationIds); 0 for plain ids."""
        return getattr(self.observation_ids, "close", 0)

    @observation_close.setter
    def observation_close(self, count: int) -> None:
        self.observation_ids = ObservationIds(self.observation_ids, close=count)


@dataclass
class Trajectory:
    """A whole episode. `stop_reason` says why it ended (answer, max_turns, budget, ...)."""

    sample_id: str
    prompt_ids: list[int]
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    outcome_reward: float = 0.0
    stop_reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    sample: dict[str, Any] = field(default_factory=dict)
    # the learner version of the weights that sampled it (asynchronous training measures staleness
    # as learner version at update - this); 0 in-process, where rollout and update alternate
    policy_version: int = 0
    # an agent session's steps (agents/assemble.py: a call whose prompt drifted starts a new step) share
    # it, so a group estimator counts the session once (algos/advantages.py); "" = an episode of its own
    session_id: str = ""

    # --- flat views -------------------------------------------------------------------
    @property
    def token_ids(self) -> list[int]:
        ids = list(self.prompt_ids)
        for turn in self.turns:
            ids += turn.action_ids
            ids += turn.observation_ids
        return ids

    @property
    def action_mask(self) -> list[int]:
        mask = [0] * len(self.prompt_ids)
        for turn in self.turns:
            mask += [0 if turn.masked else 1] * len(turn.action_ids)
            mask += [0] * len(turn.observation_ids)
        return mask

    @property
    def sampled_logprobs(self) -> list[float]:
        """Engine log-probabilities aligned with token_ids (0.0 where nothing was sampled)."""
        out = [0.0] * len(self.prompt_ids)
        for turn in self.turns:
            out += list(turn.action_logprobs)
            out += [0.0] * len(turn.observation_ids)
        return out

    @property
    def token_rewards(self) -> list[float]:
        """Process rewards at the token that closed each action; outcome at the last action token.

        Only trained (unmasked) action tokens carry rewards: a masked turn's reward moves to the
        last trained action token before it (token-level estimators ignore masked positions)."""
        rewards = [0.0] * len(self.prompt_ids)
        last_action_pos = -1
        pending = 0.0  # rewards of masked turns with no trained token before them yet
        for turn in self.turns:
            start = len(rewards)
            rewards += [0.0] * len(turn.action_ids)
            if turn.action_ids and not turn.masked:
                last_action_pos = start + len(turn.action_ids) - 1
                rewards[last_action_pos] += turn.process_reward + pending
                pending = 0.0
            elif last_action_pos >= 0:
                rewards[last_action_pos] += turn.process_reward
            else:
                pending += turn.process_reward
            rewards += [0.0] * len(turn.observation_ids)
        if last_action_pos >= 0:
            rewards[last_action_pos] += self.outcome_reward
        return rewards

    @property
    def score(self) -> float:
        """Sequence-level score for GRPO/RLOO: outcome plus all process rewards."""
        return self.outcome_reward + sum(t.process_reward for t in self.turns)

    @property
    def num_action_tokens(self) -> int:
        return sum(len(t.action_ids) for t in self.turns)

    def to_dict(self, tokenizer: Any | None = None) -> dict[str, Any]:
        """A JSON-friendly record (ids, mask, per-turn texts) for logs and `--json` output."""
        record: dict[str, Any] = {
            "sample_id": self.sample_id,
            **({"session_id": self.session_id} if self.session_id else {}),
            "answer": self.answer,
            "outcome_reward": self.outcome_reward,
            "score": self.score,
            "stop_reason": self.stop_reason,
            "num_turns": len(self.turns),
            "turns": [
                {
                    "action": t.action_text,
                    "observation": t.observation_text,
                    "process_reward": t.process_reward,
                    "tool_calls": t.tool_calls,
                    "valid_tool_calls": t.valid_tool_calls,
                    "truncated": t.truncated,
                    "info": t.info,
                }
                for t in self.turns
            ],
            "token_ids": self.token_ids,
            "action_mask": self.action_mask,
        }
        if tokenizer is not None:
            record["prompt"] = tokenizer.decode(self.prompt_ids)
        return record


def collate(trajectories: list[Trajectory], pad_token_id: int) -> dict[str, Any]:
    """Right-pad trajectories into `[batch, seq]` tensors.

    Returns input_ids (long), attention_mask, action_mask, response_mask (every token after the
    prompt, observations included: the paper's mask-off ablations), token_rewards,
    sampled_logprobs (float32), scores `[batch]`, group_ids (list of sample ids) and session_ids
    (an agent session's steps share one; any other row its own index).
    Padding is 0 in every mask. For turn-level estimators (algos/advantages.py): turn_index
    (long `[batch, seq]`: k on every token of turn k, its action and its observation, masked turns
    included; -1 on prompt and padding) and context_keys (per row, one digest per turn of the newest
    context the turn acts on: the prompt's ids for turn 0, turn k-1's observation ids for turn k, less
    the leading tokens that close turn k-1's action: ObservationIds).
    """
    import torch  # here, not at the top: the CLI's commands that never collate stay free of torch

    if not trajectories:
        raise ValueError("collate() got no trajectories")
    seqs = [t.token_ids for t in trajectories]
    width = max(len(s) for s in seqs)
    batch = len(seqs)
    input_ids = torch.full((batch, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.float32)
    action = torch.zeros((batch, width), dtype=torch.float32)
    response = torch.zeros((batch, width), dtype=torch.float32)
    rewards = torch.zeros((batch, width), dtype=torch.float32)
    logprobs = torch.zeros((batch, width), dtype=torch.float32)
    turn_index = torch.full((batch, width), -1, dtype=torch.long)
    context_keys: list[list[bytes]] = []
    for i, traj in enumerate(trajectories):
        n = len(seqs[i])
        input_ids[i, :n] = torch.tensor(seqs[i], dtype=torch.long)
        attention[i, :n] = 1.0
        action[i, :n] = torch.tensor(traj.action_mask, dtype=torch.float32)
        response[i, len(traj.prompt_ids):n] = 1.0
        rewards[i, :n] = torch.tensor(traj.token_rewards, dtype=torch.float32)
        logprobs[i, :n] = torch.tensor(traj.sampled_logprobs, dtype=torch.float32)
        pos, keys = len(traj.prompt_ids), [_digest(traj.prompt_ids)]
        for k, turn in enumerate(traj.turns):
            end = pos + len(turn.action_ids) + len(turn.observation_ids)
            turn_index[i, pos:end], pos = k, end
            keys.append(_digest(turn.observation_ids[turn.observation_close:]))  # what the env answered
        context_keys.append(keys[:len(traj.turns)])
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "action_mask": action,
        "response_mask": response,
        "token_rewards": rewards,
        "sampled_logprobs": logprobs,
        "scores": torch.tensor([t.score for t in trajectories], dtype=torch.float32),
        "group_ids": [t.sample_id for t in trajectories],
        "session_ids": [t.session_id or i for i, t in enumerate(trajectories)],  # i: a row of its own
        "turn_index": turn_index,
        "context_keys": context_keys,
    }


def _digest(ids: list[int]) -> bytes:
    """A 128-bit digest of a token-id sequence: equal ids, equal digest (in every process)."""
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).digest()
