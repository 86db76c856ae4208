"""Token-level policy backends (hf, openai, vllm)."""
