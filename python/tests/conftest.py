"""Shared set-up of the Python package's tests: the CLI they compare with, stories15M.

The CLI is $AC_BIN, else the repository's build/autocompress (scripts/build.sh). Both sides use
oneDNN's GEMMs and OpenBLAS's own kernel choice, so that the CLI and the package compute the
same numbers in one process each (README, "Environment": AC_GEMM, AC_KEEP_BLAS_CORE).
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("AC_GEMM", "onednn")
os.environ.setdefault("AC_KEEP_BLAS_CORE", "1")
os.environ.setdefault("AC_QUIET", "1")

REPO = Path(__file__).resolve().parents[2]
FIXTURE_CONFIGS = sorted((REPO / "tests/fixtures/configs").glob("*.json"))


def cli_bin() -> str:
    return os.environ.get("AC_BIN", str(REPO / "build/autocompress"))


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The CLI with `args`; its stdout and stderr as text."""
    return subprocess.run([cli_bin(), *args], capture_output=True, text=True, check=check)


def cli_json(*args: str):
    return json.loads(run_cli(*args).stdout)


def stories15m_dir() -> Path:
    if "AC_STORIES15M_DIR" in os.environ:
        return Path(os.environ["AC_STORIES15M_DIR"])
    cache = os.environ.get("AC_CACHE_DIR", str(Path.home() / ".cache/autocompress"))
    return Path(cache) / "stories15m"


@pytest.fixture(scope="session")
def stories15m(tmp_path_factory) -> Path:
    """stories15M imported by the CLI (`import llama2c`) into a temporary folder."""
    src = stories15m_dir()
    if not (src / "model.bin").exists():
        pytest.fail(f"{src}/model.bin is missing: run scripts/fetch_stories15m.sh")
    model = tmp_path_factory.mktemp("model") / "stories15m"
    run_cli("import", "llama2c", str(src / "model.bin"), str(src / "tokenizer.bin"),
            "--out", str(model))
    return model


@pytest.fixture(scope="session")
def cpu_profile(tmp_path_factory, stories15m) -> Path:
    """A profile of this CPU that every compress run of the session reuses (its profile stage
    would take a minute each time): one timed call per shape."""
    out = tmp_path_factory.mktemp("profile") / "profile.json"
    run_cli("profile", "--device", "cpu", "--scenario", "cpu-local", "--model", str(stories15m),
            "--min-repeats", "1", "--out", str(out))
    return out
