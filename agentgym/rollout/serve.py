"""``agentgym serve POLICY``: any token policy behind an OpenAI-compatible HTTP API.

A Starlette app (run by :class:`~agentgym.core.serving.LocalServer`, loopback only) with

* ``GET /v1/models``: the one model served; its id is the model's folder when the policy
  has one (``hf:PATH``), so a client can load the tokenizer from it (the ``openai:``
  policy does);
* ``POST /v1/completions``: a prompt as text or token ids;
* ``POST /v1/chat/completions``: messages and ``tools``, rendered with the tokenizer's
  chat template; the completion's tool calls are parsed into the message's ``tool_calls``,
  with ``finish_reason="tool_calls"``, by the parser of the model's format: ``hermes``
  ``<tool_call>`` blocks by default (the Qwen and SmolLM templates), ``llama3-json``,
  ``mistral``, ``xml``, or any a plugin registers (``agentgym list parsers``);
* with a :class:`~agentgym.rollout.capture.CaptureStore`, the same three under each open
  episode's own base URL, ``/episodes/KEY/v1``: every call made there is recorded token
  for token into that episode's calls (:mod:`agentgym.rollout.capture`); a key that is
  unknown, or whose episode has ended, gets HTTP 404.

Both take ``max_tokens`` (or ``max_completion_tokens``), ``temperature``, ``top_p``,
``seed`` and ``logprobs``, and vLLM's extensions, the field's convention for token-exact
clients: ``return_token_ids`` adds ``prompt_token_ids`` and ``token_ids`` to each choice
(and ``prompt_token_ids`` to a chat response), ``return_tokens_as_token_ids`` writes each
logprob's token as ``"token_id:ID"``, ``skip_special_tokens`` (default true) says whether
the text keeps special tokens. ``stream=true`` answers with OpenAI's chunks as server-sent
events, all at once when the completion is done (the policy returns it whole). One choice
per request (``n=1``): another ``n`` gets HTTP 400 saying so, as does any request the
policy refuses (a prompt too long, a token outside the vocabulary). Errors are OpenAI's
``{"error": {...}}`` bodies.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.parsers import ToolCallParser
from agentgym.core.policies import Generation, Sampling, TokenPolicy
from agentgym.core.registry import build
from agentgym.rollout.capture import CapturedCall, CaptureStore, UnknownEpisodeKeyError
from agentgym.rollout.chat import with_decoded_arguments

__all__ = ["openai_app"]

_PREFIX = "token_id:"


class BadRequest(AgentGymError):
    """A request the server cannot serve (HTTP 400)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


#: Records one call (under an episode's key): its prompt ids, generation, the request's
#: messages (chat) and the answer's text; or nothing.
Recorder = Callable[[list[int], Generation, "list[dict[str, Any]] | None", str], None] | None


def openai_app(policy: TokenPolicy, model_name: str,
               tool_parser: str | ToolCallParser = "hermes",
               capture: CaptureStore | None = None, sampling: Sampling | None = None) -> Any:
    """The Starlette app serving ``policy`` as ``model_name``; with ``capture``, also under
    each of its episodes' base URLs (module docstring). ``sampling``: what every call
    samples with whatever the request asks (a trainer's temperature and top-p; its
    ``max_tokens`` caps the request's), so that an agent program cannot change how the
    policy being trained samples."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    parser = build("parsers", tool_parser) if isinstance(tool_parser, str) else tool_parser
    tokenizer = policy.tokenizer

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": model_name, "object": "model", "owned_by": "agentgym", "root": model_name,
             "created": 0}]})

    async def completions(request: Request) -> JSONResponse:
        return await _answer(request, complete)

    async def chat_completions(request: Request) -> JSONResponse:
        return await _answer(request, chat)

    async def complete(body: dict[str, Any], record: Recorder = None) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_ids = list(prompt)
        elif (isinstance(prompt, list) and len(prompt) == 1
              and isinstance(prompt[0], (str, list))):
            return await complete({**body, "prompt": prompt[0]}, record)
        else:
            raise BadRequest("prompt must be a string or a list of token ids", "prompt")
        generation = await _generate(policy, prompt_ids, body, sampling)
        text = _text(tokenizer, generation, body)
        if record is not None:
            record(prompt_ids, generation, None, text)
        choice: dict[str, Any] = {"index": 0, "text": text,
                                  "finish_reason": generation.finish_reason,
                                  "logprobs": None}
        if body.get("logprobs") is not None:
            tokens = _token_texts(tokenizer, generation.token_ids, body)
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": generation.logprobs,
                                  "top_logprobs": None, "text_offset": None}
        if body.get("return_token_ids"):
            choice.update(prompt_token_ids=prompt_ids, token_ids=generation.token_ids)
        return _response("text_completion", "cmpl", model_name, choice, prompt_ids,
                         generation)

    async def chat(body: dict[str, Any], record: Recorder = None) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list of chat messages",
                             "messages")
        tools = body.get("tools") or None
        if body.get("tool_choice") == "none":
            tools = None
        try:
            prompt_ids = tokenizer.apply_chat_template(
                [with_decoded_arguments(m) for m in messages], tools=tools,
                add_generation_prompt=True, tokenize=True, return_dict=False)
        except Exception as e:  # a template that cannot render these messages
            raise BadRequest(f"the chat template cannot render these messages: {e}",
                             "messages") from None
        generation = await _generate(policy, list(prompt_ids), body, sampling)
        text = tokenizer.decode(_without_stop(generation), skip_special_tokens=False)
        if record is not None:
            record(list(prompt_ids), generation, messages, text)
        turn = parser.parse(text) if tools else None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = generation.finish_reason
        if turn is not None and turn.tool_calls:
            message = {"role": "assistant", "content": turn.content.strip() or None,
                       "tool_calls": [_openai_call(call, parser) for call in turn.tool_calls]}
            finish = "tool_calls"
        if body.get("skip_special_tokens", True) and isinstance(message["content"], str):
            message["content"] = tokenizer.decode(
                tokenizer.encode(message["content"], add_special_tokens=False),
                skip_special_tokens=True)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish,
                                  "logprobs": None}
        if body.get("logprobs"):
            tokens = _token_texts(tokenizer, generation.token_ids, body)
            choice["logprobs"] = {"content": [
                {"token": token, "logprob": logprob, "bytes": list(token.encode()),
                 "top_logprobs": []}
                for token, logprob in zip(tokens, generation.logprobs or [], strict=False)]}
        if body.get("return_token_ids"):
            choice.update(prompt_token_ids=list(prompt_ids), token_ids=generation.token_ids)
        response = _response("chat.completion", "chatcmpl", model_name, choice,
                              list(prompt_ids), generation)
        if body.get("return_token_ids"):
            response["prompt_token_ids"] = list(prompt_ids)
        return response

    def episode(handle: Any) -> Any:
        """``handle`` under ``/episodes/{key}/v1``, recording each call into that key's."""

        async def route(request: Request) -> JSONResponse:
            assert capture is not None
            key = request.path_params["key"]
            try:
                capture.check(key)
            except UnknownEpisodeKeyError as e:
                return _error(404, str(e), None, "not_found_error")
            if handle is None:
                return await models(request)

            def record(prompt_ids: list[int], generation: Generation,
                       messages: list[dict[str, Any]] | None, text: str) -> None:
                capture.record(key, CapturedCall(
                    list(prompt_ids), list(generation.token_ids),
                    None if generation.logprobs is None else list(generation.logprobs),
                    None if generation.versions is None else list(generation.versions),
                    generation.finish_reason, messages, text))

            return await _answer(request, lambda body: handle(body, record))

        return route

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    if capture is not None:
        routes += [
            Route("/episodes/{key}/v1/models", episode(None), methods=["GET"]),
            Route("/episodes/{key}/v1/completions", episode(complete), methods=["POST"]),
            Route("/episodes/{key}/v1/chat/completions", episode(chat), methods=["POST"]),
        ]
    return Starlette(routes=routes)


async def _answer(request: Any, handle: Any) -> Any:
    from starlette.responses import JSONResponse

    try:
        body = json.loads(await request.body())
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if body.get("n", 1) != 1:
            raise BadRequest("one choice per request: send n=1", "n")
        response = await handle(body)
        if body.get("stream"):
            return _stream(response, body)
        return JSONResponse(response)
    except json.JSONDecodeError as e:
        return _error(400, f"the request body is not JSON: {e}", None)
    except BadRequest as e:
        return _error(400, str(e), e.param)
    except UnknownEpisodeKeyError as e:  # the episode ended while its call ran
        return _error(404, str(e), None, "not_found_error")
    except InvalidArgumentError as e:  # what the policy refused: this request alone
        return _error(400, str(e), None)
    except AgentGymError as e:
        return _error(503, f"{type(e).__name__}: {e}", None, "server_error")


def _stream(response: dict[str, Any], body: dict[str, Any]) -> Any:
    """``response`` as server-sent events of OpenAI's chunks (``stream=true``). The policy
    returns a completion whole, so the chunks come at once when it is done: the content
    (and its log-probs and token ids), each tool call, then the finish reason, the usage
    when ``stream_options.include_usage`` asks for it, and ``[DONE]``."""
    from starlette.responses import StreamingResponse

    choice = response["choices"][0]
    chat = response["object"] == "chat.completion"
    kind = "chat.completion.chunk" if chat else "text_completion"
    extras = {k: choice[k] for k in ("prompt_token_ids", "token_ids") if k in choice}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        part = ({"index": 0, "delta": delta} if chat else {"index": 0, **delta})
        part.update(finish_reason=finish, logprobs=more.pop("logprobs", None), **more)
        event = {"id": response["id"], "object": kind, "created": response["created"],
                 "model": response["model"], "choices": [part]}
        return f"data: {json.dumps(event)}\n\n"

    events = []
    if chat:
        message = choice["message"]
        events.append(chunk({"role": "assistant", "content": message.get("content") or ""},
                            logprobs=choice.get("logprobs"), **extras))
        for index, call in enumerate(message.get("tool_calls") or []):
            events.append(chunk({"tool_calls": [{"index": index, **call}]}))
        events.append(chunk({}, choice["finish_reason"]))
    else:
        events.append(chunk({"text": choice["text"]}, logprobs=choice.get("logprobs"),
                            **extras))
        events.append(chunk({"text": ""}, choice["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append("data: " + json.dumps(
            {"id": response["id"], "object": kind, "created": response["created"],
             "model": response["model"], "choices": [], "usage": response["usage"]}) + "\n\n")
    events.append("data: [DONE]\n\n")
    return StreamingResponse(iter(events), media_type="text/event-stream")


def _error(status: int, message: str, param: str | None,
           kind: str = "invalid_request_error") -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": None}}, status_code=status)


async def _generate(policy: TokenPolicy, prompt_ids: list[int], body: dict[str, Any],
                    fixed: Sampling | None = None) -> Generation:
    budget = body.get("max_completion_tokens", body.get("max_tokens"))
    try:
        sampling = Sampling(max_tokens=int(budget) if budget is not None else 256,
                            temperature=float(body.get("temperature", 1.0)),
                            top_p=float(body.get("top_p", 1.0)),
                            seed=None if body.get("seed") is None else int(body["seed"]))
    except (TypeError, ValueError) as e:
        raise BadRequest(f"bad sampling parameters: {e}") from None
    if fixed is not None:
        sampling = dataclasses.replace(
            fixed, max_tokens=min(fixed.max_tokens, sampling.max_tokens if budget is not None
                                  else fixed.max_tokens))
    return await policy.generate(prompt_ids, sampling)


def _without_stop(generation: Generation) -> list[int]:
    ids = generation.token_ids
    return ids[:-1] if generation.finish_reason == "stop" and ids else ids


def _text(tokenizer: Any, generation: Generation, body: dict[str, Any]) -> str:
    return tokenizer.decode(_without_stop(generation),
                            skip_special_tokens=bool(body.get("skip_special_tokens", True)))


def _token_texts(tokenizer: Any, ids: list[int], body: dict[str, Any]) -> list[str]:
    if body.get("return_tokens_as_token_ids"):
        return [f"{_PREFIX}{i}" for i in ids]
    return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def _openai_call(call: Any, parser: ToolCallParser) -> dict[str, Any]:
    return {"id": call.id or parser.call_id(), "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}


def _response(kind: str, prefix: str, model: str, choice: dict[str, Any],
              prompt_ids: list[int], generation: Generation) -> dict[str, Any]:
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
            "model": model, "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids),
                      "completion_tokens": len(generation.token_ids),
                      "total_tokens": len(prompt_ids) + len(generation.token_ids)}}
