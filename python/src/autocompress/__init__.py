"""autocompress: compress an LLM so that it fits a deployment (docs/python.md).

Bindings over the C++ library the `autocompress` CLI uses; every function calls the library
function of the CLI command of the same name.
"""
import os as _os

# The scenarios and the device and engine specs they name, shipped in the package, unless
# AC_DATA_DIR names another copy (the repository's own, for tools/llamacpp).
_os.environ.setdefault("AC_DATA_DIR", _os.path.join(_os.path.dirname(__file__), "data"))

from ._core import (  # noqa: E402
    ConfigError,
    Cost,
    Error,
    FormatError,
    InfeasibleError,
    InternalError,
    Interrupted,
    Plan,
    Profile,
    ProgressEvent,
    RunReport,
    Scenario,
    compress,
    cost,
    plan,
)

__all__ = [
    "ConfigError", "Cost", "Error", "FormatError", "InfeasibleError", "InternalError",
    "Interrupted", "Plan", "Profile", "ProgressEvent", "RunReport", "Scenario", "compress",
    "cost", "plan",
]
