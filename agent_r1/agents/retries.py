"""Which of a session's calls were used: an agent that throws a reply away and asks again is not
trained on the reply it threw away.

Agents retry: a reply that does not parse, a tool call to a tool that does not exist, a vote over a few
samples. Each retry resends the same history, so its rendered prompt is identical, token for token, to
the abandoned call's. Recorded as they are, the abandoned replies would be trained as if the agent had
acted on them (and each would start a step of its own, counted as drift).

The rule, over calls whose prompts are identical: a call is used when a later call's prompt extends
its prompt + completion (the agent went on from that reply); if some are, those are kept (an agent may
branch from several); if none is (the session's last turn, or a history that re-tokenised the reply
differently), the last of them is kept: the reply the agent ended with. Calls whose prompt no other
call shares are always kept. A retry that edits the history (adds a note, drops the bad reply and
rewords) renders a different prompt and is not detected: it stays a step of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_r1.agents.records import CallRecord


def extends(prompt_ids: Sequence[int], context: Sequence[int]) -> bool:
    """Whether a call's prompt continues `context` (an earlier call's prompt + completion): the test by
    which a session's calls stay one trajectory (assemble.py), and a retried call is told abandoned."""
    return len(prompt_ids) >= len(context) and list(prompt_ids[:len(context)]) == list(context)


def used_calls(records: Sequence[CallRecord]) -> tuple[list[CallRecord], int]:
    """(the calls kept, in call order; how many were abandoned)."""
    same: dict[tuple[int, ...], list[int]] = {}
    for i, rec in enumerate(records):
        same.setdefault(tuple(rec.prompt_ids), []).append(i)
    dropped: set[int] = set()
    for rows in same.values():
        if len(rows) < 2:
            continue
        mine = set(rows)
        sampled = {i: records[i].prompt_ids + records[i].completion_ids for i in rows}
        continued = [i for i in rows if any(extends(records[j].prompt_ids, sampled[i])
                                            for j in range(i + 1, len(records)) if j not in mine)]
        dropped |= mine - set(continued or rows[-1:])
    return [rec for i, rec in enumerate(records) if i not in dropped], len(dropped)
