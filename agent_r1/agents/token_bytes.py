"""Each sampled token's own bytes, for OpenAI's `logprobs.content[i].bytes`.

A character a vocabulary splits across tokens (an emoji, an accented letter in a small byte-level
vocabulary) cannot be decoded one token at a time: each piece decodes to U+FFFD. OpenAI's `bytes` field
exists for this: concatenated, the tokens' bytes are the content's UTF-8. A byte-level BPE tokenizer
(GPT-2's, Qwen's, the locally trained one) writes each token as one printable character per byte, so
its bytes are read back through that map; any other tokenizer's token is decoded and encoded.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _byte_of() -> dict[str, int]:
    """Byte-level BPE's character -> byte map: the printable Latin-1 bytes stand for themselves, every
    other byte, in order, for the characters from U+0100 on (GPT-2's scheme, which `tokenizers` uses)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in set(printable)]
    out.update({chr(256 + k): b for k, b in enumerate(others)})
    return out


def token_bytes(tokenizer: Any, token_id: int, special: bool) -> bytes:
    """The bytes token `token_id` stands for; `special`: an added token, written as its text."""
    piece = tokenizer.convert_ids_to_tokens(token_id)
    byte_of = _byte_of()
    if not special and isinstance(piece, str) and piece and all(ch in byte_of for ch in piece):
        return bytes(byte_of[ch] for ch in piece)
    return tokenizer.decode([token_id]).encode("utf-8")
