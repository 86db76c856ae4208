"""``ScriptedTokens``: a token policy that answers with set texts, for testing what sits
behind a model server (a harness, the capture proxy) without a model."""

from __future__ import annotations

from typing import Any

from agentgym.core.policies import Generation, Sampling, TokenPolicy

__all__ = ["ScriptedTokens"]


class ScriptedTokens(TokenPolicy):
    """Answers its n-th call with the tokens of ``texts[n]`` (the last text once they run
    out) and the tokenizer's end-of-sequence token, each with log-probability ``logprob``
    and policy version ``version``; :attr:`generations` keeps what it sampled, in order.

    Args:
        tokenizer: the tokenizer of the model the server renders prompts for.
        texts: the answers, in order.
    """

    def __init__(self, tokenizer: Any, texts: list[str], *, logprob: float = -0.5,
                 version: int = 0):
        self.tokenizer, self.texts = tokenizer, list(texts)
        self.logprob, self.version = logprob, version
        self.generations: list[Generation] = []

    @property
    def sampled(self) -> list[int]:
        """Every token sampled so far, call after call."""
        return [t for g in self.generations for t in g.token_ids]

    def next_text(self) -> str:
        """The text of the next answer (override to answer by the prompt)."""
        return self.texts[min(len(self.generations), len(self.texts) - 1)]

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        text = self.next_text()
        ids = [*self.tokenizer.encode(text, add_special_tokens=False),
               self.tokenizer.eos_token_id]
        generation = Generation(ids, [self.logprob] * len(ids), "stop",
                                versions=[self.version] * len(ids))
        self.generations.append(generation)
        return generation
