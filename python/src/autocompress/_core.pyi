"""Type stubs of autocompress._core (python/src/bindings.cpp, bind_compress.cpp)."""
import os
import pathlib
from typing import Any, Callable, Optional, Sequence, Union

_Path = Union[str, os.PathLike[str]]

class Error(RuntimeError):
    """Base of every error the library raises on purpose."""

class FormatError(Error):
    """A file is missing, truncated, corrupt or inconsistent."""

class ConfigError(Error):
    """An invalid request: a bad option, architecture or device."""

class InfeasibleError(Error):
    """No architecture meets the deployment limits."""

class InternalError(Error):
    """An internal invariant failed: a bug in autocompress."""

class Interrupted(Error, KeyboardInterrupt):
    """A signal (Ctrl-C, SIGTERM) stopped a training loop; compress(..., resume=True) continues."""

class Scenario:
    """A deployment: device, engine, workload and limits (scenarios/*.json)."""
    @staticmethod
    def load(name_or_path: _Path) -> Scenario: ...
    @property
    def name(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def notes(self) -> str: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def weight_dtype(self) -> str: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def limits(self) -> dict[str, Any]:
        """ttft_ms / tpot_ms (ms), peak_memory_bytes (bytes), min_throughput_tokens_per_s
        (tokens/s), each a number or {'fraction_of_teacher': x}."""

class Profile:
    """Latency tables of one device (`autocompress profile`)."""
    @staticmethod
    def load(path: _Path) -> Profile: ...
    @property
    def device(self) -> str: ...
    @property
    def cpu_model(self) -> str: ...
    @property
    def cores(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def date(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class Plan:
    """Does a model fit a deployment, and if not, the cheapest changes that make it fit."""
    @property
    def verdict(self) -> str:
        """'fits', 'fits_after_changes' or 'no_fit'."""
    @property
    def fits(self) -> bool: ...
    @property
    def broken(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def limits(self) -> dict[str, Any]: ...
    @property
    def full(self) -> dict[str, Any]: ...
    @property
    def suggestions(self) -> list[dict[str, Any]]: ...
    def to_dict(self) -> dict[str, Any]:
        """As `autocompress plan --json` prints it."""

class Cost:
    """Predicted cost of an architecture in a scenario."""
    @property
    def ttft_ms(self) -> float: ...
    @property
    def tpot_ms(self) -> float: ...
    @property
    def throughput_tokens_per_s(self) -> float: ...
    @property
    def peak_memory_bytes(self) -> int: ...
    @property
    def weight_bytes(self) -> int: ...
    @property
    def kv_cache_bytes(self) -> int: ...
    @property
    def activation_bytes(self) -> int: ...
    @property
    def source(self) -> str:
        """'profile', 'profile+ENGINE' or 'roofline'."""
    @property
    def architecture(self) -> str: ...
    @property
    def limits(self) -> dict[str, Any]: ...
    @property
    def limits_hold(self) -> Optional[bool]: ...
    @property
    def limits_broken(self) -> str: ...
    def to_dict(self) -> dict[str, Any]:
        """As `autocompress cost --json` prints it."""

class ProgressEvent:
    """`done` of `total` `unit` in `stage`; stage 'compress' for each pipeline stage complete."""
    @property
    def stage(self) -> str: ...
    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int:
        """0 when not known in advance."""
    @property
    def unit(self) -> str: ...
    @property
    def message(self) -> str: ...

class RunReport:
    """report.json of a compress run; every field of the file is an attribute."""
    @staticmethod
    def load(run_dir: _Path) -> RunReport: ...
    @property
    def run_dir(self) -> pathlib.Path: ...
    def to_dict(self) -> dict[str, Any]: ...
    def _repr_html_(self) -> str: ...
    scenario: dict[str, Any]
    device: dict[str, Any]
    compute: dict[str, Any]
    date: str
    teacher: dict[str, Any]
    compressed: dict[str, Any]
    search: dict[str, Any]
    comparison: list[dict[str, Any]]
    distill: dict[str, Any]
    data: dict[str, Any]
    export: dict[str, Any]
    fit: dict[str, Any]
    not_measured: str
    tasks: Any
    llama_cpp: Any
    stages: list[dict[str, Any]]
    total_seconds: float

def plan(config: _Path, scenario: Union[Scenario, _Path], profile: Optional[Union[Profile, _Path]] = None,
         *, width_granularity: int = 0, width_steps: int = 32, min_width_fraction: float = 0.25,
         min_depth_fraction: float = 0.5) -> Plan: ...

def cost(config: _Path, scenario: Union[Scenario, _Path],
         profile: Optional[Union[Profile, _Path]] = None,
         teacher: Optional[_Path] = None) -> Cost: ...

def compress(model: Optional[_Path], scenario: Optional[_Path], out: _Path, *,
             progress: Optional[Callable[[ProgressEvent], None]] = None, resume: bool = False,
             method: str = "autocompress", data_text: Optional[_Path] = None,
             data: Optional[_Path] = None, profile: Optional[_Path] = None,
             text_field: str = "text", allow_nonfinite: bool = False, device: str = "cpu",
             precision: str = "auto", seed: int = 1234, seq_len: int = 256,
             calibration_sequences: int = 32, train_sequences: int = 256,
             heldout_sequences: int = 64, task_items: int = 200, distill_tokens: int = 131072,
             distill_batch_size: int = 8, distill_lr: float = 1e-3,
             distill_hidden_loss_weight: float = 0.0, minitron_retrain_top_k: int = 3,
             minitron_retrain_tokens: int = 0, autocompress_retrain_top_k: int = 2,
             autocompress_retrain_tokens: int = 0, distill_bld_tokens: int = -1,
             max_removed_layers: int = -1,
             max_attention_free_layers: Optional[Sequence[int]] = None,
             autocompress_restarts: int = 3, autocompress_judge: str = "halving",
             safety_margin: float = 0.05, fit_attempts: int = 3, fit_margin: float = 0.02,
             measure_rounds: int = ..., max_measure_rounds: int = ...) -> RunReport: ...
