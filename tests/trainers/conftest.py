"""The tiny local model every trainer test shares (built once per session)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentgym.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.getbasetemp() / "tiny-model")
