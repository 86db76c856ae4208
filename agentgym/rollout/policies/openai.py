"""``openai:URL``: an OpenAI-compatible completions server as a token-level policy.

:class:`OpenAIPolicy` sends the prompt as token ids (``"prompt": [ids...]``) to
``{URL}/completions``, which vLLM, SGLang, llama.cpp and OpenAI's legacy endpoint accept,
so the server sees exactly the tokens the rollout loop keeps. It asks for ``logprobs=1``
and, unless ``vllm_extensions=False``, for vLLM's ``return_token_ids`` and
``return_tokens_as_token_ids`` (and ``skip_special_tokens=false``). The completion's tokens
come from, in order of preference:

1. ``choices[0].token_ids`` (vLLM's ``return_token_ids``), with the logprobs of
   ``choices[0].logprobs.token_logprobs``;
2. ``choices[0].logprobs.tokens`` written as ``"token_id:123"`` (vLLM's
   ``return_tokens_as_token_ids``), with the same logprobs;
3. else the completion's text, tokenized with the policy's tokenizer: ``logprobs`` is
   then None (the server's tokens are unknown), and when the server reports
   ``finish_reason="stop"`` without the end-of-turn token, the tokenizer's eos token is
   appended, since that is the token the model sampled to stop. Re-tokenized text can
   differ from what the model sampled (and from ``max_tokens`` in length): prefer a server
   that returns token ids for training.

Which tokenizer (the rollout loop renders chat messages with it): the ``tokenizer``
argument (an object or a folder), else the folder in ``$AGENTGYM_TOKENIZER``, else the model
the server reports at ``{URL}/models`` (vLLM reports the folder or hub id it serves). A
tokenizer is loaded from a local folder or the local hub cache, never downloaded. The
model name sent with each request is ``model`` or the first id at ``{URL}/models``.

HTTP runs on the standard library (``urllib``) in a thread pool of ``max_concurrency``
threads, so many episodes can wait on the server at once without blocking the event loop.
Overloaded answers (HTTP 429, 502, 503, 504) are retried ``max_retries`` times; a server
that cannot be reached fails at once with an error naming the URL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import ipaddress
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.policies import Generation, Sampling, TokenPolicy
from agentgym.rollout.models import local_folder

__all__ = ["OpenAIPolicy", "OpenAIServerError", "openai_policy"]

TOKENIZER_ENV = "AGENTGYM_TOKENIZER"
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_TOKEN_ID_PREFIX = "token_id:"


class OpenAIServerError(AgentGymError):
    """The server could not be reached, or answered with an error or an unusable body."""


class OpenAIPolicy(TokenPolicy):
    """Samples completions from an OpenAI-compatible server, token ids in and out.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        tokenizer: a tokenizer object or folder (see the module docstring for the default).
        model: the model name to send; default: the first id at ``{base_url}/models``.
        api_key: sent as a bearer token; default: ``$OPENAI_API_KEY`` if set.
        timeout: seconds to wait for one completion.
        max_concurrency: requests in flight at once (threads of the HTTP pool).
        max_retries: retries of an overloaded answer (429, 502, 503, 504).
        vllm_extensions: ask for vLLM's token-id fields; turn off for servers that reject
            unknown fields.
        extra_body: more fields for every request (e.g. ``{"top_k": 20}``).
    """

    def __init__(
        self,
        base_url: str,
        tokenizer: Any = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_concurrency: int = 64,
        max_retries: int = 2,
        vllm_extensions: bool = True,
        extra_body: dict[str, Any] | None = None,
    ):
        self.base_url = _normalize_url(base_url)
        if max_concurrency < 1:
            raise InvalidArgumentError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout, self.max_retries = timeout, max_retries
        self.vllm_extensions = vllm_extensions
        self.extra_body = dict(extra_body or {})
        self.requests_sent = 0
        self._lock = threading.Lock()  # counters
        self._model_lock = threading.Lock()  # the first /models lookup
        self._opener = _opener_for(self.base_url)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrency, thread_name_prefix="agentgym-openai"
        )
        self.tokenizer = _resolve_tokenizer(self, tokenizer)

    def __repr__(self) -> str:
        return f"OpenAIPolicy({self.base_url!r}, model={self.model!r})"

    async def generate(self, prompt_ids: Sequence[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids`` from the server."""
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise InvalidArgumentError(
                "prompt_ids is empty: a completion needs at least one prompt token")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._complete, prompt, sampling)

    def close(self) -> None:
        """Stop the HTTP threads (requests in flight finish first)."""
        self._pool.shutdown(wait=True)

    # ---- HTTP ------------------------------------------------------------------------------

    def _complete(self, prompt: list[int], sampling: Sampling) -> Generation:
        body: dict[str, Any] = {
            "model": self._model_name(),
            "prompt": prompt,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "n": 1,
            "logprobs": 1,
            "stream": False,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self.vllm_extensions:
            body.update(
                return_token_ids=True, return_tokens_as_token_ids=True, skip_special_tokens=False
            )
        body.update(self.extra_body)
        started = time.perf_counter()
        answer = self._request("POST", "/completions", body)
        generation = self._parse(answer)
        generation.metrics["server_seconds"] = time.perf_counter() - started
        return generation

    def _model_name(self) -> str:
        with self._model_lock:
            if self.model is None:
                self.model = _served_models(self)[0]
            return self.model

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self.base_url + path
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
                break
            except urllib.error.HTTPError as e:
                detail = e.read()[:600].decode("utf-8", "replace").strip()
                if e.code in _RETRY_STATUSES and attempt < self.max_retries:
                    time.sleep(0.5 * 2**attempt)
                    continue
                raise OpenAIServerError(
                    f"{method} {url} answered HTTP {e.code}: {detail or e.reason}"
                    + _hint_for(e.code, detail)
                ) from None
            except TimeoutError:
                raise OpenAIServerError(
                    f"{method} {url} did not answer within {self.timeout:g} s; raise timeout="
                    " or check the server's load"
                ) from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", e)
                raise OpenAIServerError(
                    f"cannot reach the OpenAI-compatible server at {url} ({reason}). Start it"
                    " (e.g. `vllm serve MODEL --port 8000`) or fix the URL in"
                    " --policy openai:http://HOST:PORT/v1"
                ) from None
        with self._lock:
            self.requests_sent += 1
        try:
            return json.loads(raw)
        except ValueError:
            raise OpenAIServerError(
                f"{method} {url} answered with a body that is not JSON: {raw[:200]!r}"
            ) from None

    def _parse(self, answer: Any) -> Generation:
        try:
            choice = answer["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise OpenAIServerError(
                f"{self.base_url}/completions answered without choices: {str(answer)[:300]}"
            ) from None
        reason = choice.get("finish_reason")
        if reason in ("abort", "error"):
            raise OpenAIServerError(
                f"{self.base_url}/completions ended the completion with finish_reason={reason!r}"
            )
        finish = "length" if reason == "length" else "stop"
        metrics: dict[str, Any] = {"server_finish_reason": reason}
        logprob_block = choice.get("logprobs") or {}
        token_logprobs = logprob_block.get("token_logprobs")
        ids = choice.get("token_ids")
        if ids is None:
            ids = _ids_from_logprob_tokens(logprob_block.get("tokens"))
        if ids is not None:
            ids = [int(t) for t in ids]
            logprobs = None
            if (
                isinstance(token_logprobs, list)
                and len(token_logprobs) == len(ids)
                and all(isinstance(x, (int, float)) for x in token_logprobs)
            ):
                logprobs = [float(x) for x in token_logprobs]
            metrics["tokens_from"] = "server"
            return Generation(ids, logprobs, finish, metrics)
        # Text only: the server's tokens are unknown, so re-tokenize and claim no logprobs.
        ids = list(self.tokenizer.encode(choice.get("text") or "", add_special_tokens=False))
        eos = self.tokenizer.eos_token_id
        if finish == "stop" and eos is not None and (not ids or ids[-1] != eos):
            ids.append(int(eos))
        metrics["tokens_from"] = "text"
        return Generation(ids, None, finish, metrics)


def openai_policy(argument: str | None) -> OpenAIPolicy:
    """``openai:URL``: the OpenAI-compatible server at ``URL`` (``http://HOST:PORT/v1``)."""
    if not argument:
        raise AgentGymError(
            "the openai policy needs the server's URL: --policy openai:http://127.0.0.1:8000/v1"
        )
    return OpenAIPolicy(argument)


# ---- helpers ---------------------------------------------------------------------------------


def _normalize_url(url: str) -> str:
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidArgumentError(
            f"not an http(s) URL: {url!r}; give the API root, e.g. http://127.0.0.1:8000/v1"
        )
    root = url.strip().rstrip("/")
    for suffix in ("/completions", "/chat/completions"):
        root = root.removesuffix(suffix)
    return root


def _opener_for(url: str) -> urllib.request.OpenerDirector:
    # A proxy from the environment must not intercept a server on this machine.
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _hint_for(status: int, detail: str) -> str:
    if status == 400 and ("return_token" in detail or "skip_special_tokens" in detail):
        return ". This server rejects vLLM's fields: pass vllm_extensions=False"
    if status == 404:
        return ". Is the URL the API root (it usually ends in /v1)?"
    if status in (401, 403):
        return ". Set OPENAI_API_KEY or pass api_key="
    return ""


def _ids_from_logprob_tokens(tokens: Any) -> list[int] | None:
    if not isinstance(tokens, list) or not tokens:
        return None
    if not all(isinstance(t, str) and t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
        return None
    try:
        return [int(t[len(_TOKEN_ID_PREFIX) :]) for t in tokens]
    except ValueError:
        return None


def _served_models(policy: OpenAIPolicy) -> list[str]:
    answer = policy._request("GET", "/models")
    try:
        ids = [str(entry["id"]) for entry in answer["data"]]
    except (KeyError, TypeError):
        ids = []
    if not ids:
        raise OpenAIServerError(
            f"{policy.base_url}/models lists no model; pass model= to OpenAIPolicy"
        )
    return ids


def _resolve_tokenizer(policy: OpenAIPolicy, tokenizer: Any) -> Any:
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    source = str(tokenizer) if tokenizer else os.environ.get(TOKENIZER_ENV)
    where = "tokenizer=" if tokenizer else f"${TOKENIZER_ENV}"
    if not source:
        try:
            if policy.model is None:
                policy.model = _served_models(policy)[0]
        except OpenAIServerError as e:
            raise OpenAIServerError(
                f"OpenAIPolicy needs a tokenizer and could not ask the server for its model:"
                f" {e}. Pass tokenizer=FOLDER or set {TOKENIZER_ENV}=FOLDER"
            ) from None
        source, where = policy.model, f"the model {policy.base_url}/models reports"
    folder = local_folder(source, "tokenizer_config.json")
    if folder is None:
        raise AgentGymError(
            f"the tokenizer {source!r} ({where}) is neither a local folder nor in the local"
            f" hub cache. Pass tokenizer= (an object or the served model's folder) or set"
            f" {TOKENIZER_ENV}=FOLDER"
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as e:
        raise AgentGymError(
            f"cannot load the tokenizer {source!r} ({where}): {e}. Pass tokenizer= or set"
            f" {TOKENIZER_ENV}=FOLDER"
        ) from None
