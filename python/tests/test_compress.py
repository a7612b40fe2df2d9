"""compress() on stories15M at the smallest sizes: the report equals the CLI's at the same seed,
the progress callback is called, and Ctrl-C leaves a run that resume=True finishes.

The scenario is stories15m-rtx5070 (a GPU costed by its spec): nothing is measured on this CPU,
so two runs give the same numbers (tests/test_compress_gpu_scenario.cpp runs the CLI alike).
"""
import os
import shutil
import signal
import json

import pytest

import autocompress
from conftest import run_cli
from test_stubs import stub_fields

SCENARIO = "stories15m-rtx5070"
# The CLI's flags and compress()'s keywords: one small run (one search, no retraining, a few
# seconds of distillation; about a minute on 2 cores).
OPTIONS = {
    "method": "autocompress", "autocompress_retrain_top_k": 0, "distill_bld_tokens": 0,
    "max_attention_free_layers": [-1], "seed": 7, "seq_len": 32, "calibration_sequences": 8, "train_sequences": 8,
    "heldout_sequences": 8, "distill_tokens": 512, "distill_batch_size": 2, "task_items": 0,
}


def cli_flags(options):
    flags = []
    for name, value in options.items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        flags += ["--" + name.replace("_", "-"), text]
    return flags


def comparable(report: dict) -> dict:
    """The report without what differs between two runs: times, dates, the process's memory
    (as tests/test_compress_gpu_scenario.cpp, CompressResume)."""
    def strip(j):
        if isinstance(j, dict):
            return {k: strip(v) for k, v in j.items()
                    if k not in ("wall_s", "search_seconds", "search_seconds_all_attempts")}
        if isinstance(j, list):
            return [strip(v) for v in j]
        return j
    r = {k: v for k, v in report.items()
         if k not in ("stages", "total_seconds", "date", "llama_cpp")}
    r["compute"] = {k: v for k, v in r["compute"].items()
                    if k not in ("distill_tokens_per_s", "peak_memory_bytes")}
    return strip(r)


def test_compress_equals_cli_and_reports_progress(stories15m, cpu_profile, tmp_path):
    out = tmp_path / "run"
    run_cli("compress", "--model", str(stories15m), "--scenario", SCENARIO, "--out", str(out),
            "--profile", str(cpu_profile), *cli_flags(OPTIONS))
    with open(out / "report.json") as f:
        cli_report = json.load(f)
    shutil.move(out, tmp_path / "cli-run")  # the same output path for both: paths in the report

    events = []
    report = autocompress.compress(str(stories15m), SCENARIO, str(out), progress=events.append,
                                   profile=str(cpu_profile), **OPTIONS)
    assert comparable(report.to_dict()) == comparable(cli_report)
    with open(out / "report.json") as f:
        assert report.to_dict() == json.load(f)
    # report.json's fields as attributes, each in the type stub
    assert stub_fields("RunReport") == set(cli_report)
    assert report.compressed["parameters"] == cli_report["compressed"]["parameters"]
    assert report.scenario["name"] == SCENARIO
    assert report.run_dir == out
    assert "<svg" in report._repr_html_()
    assert autocompress.RunReport.load(out).to_dict() == report.to_dict()

    stages = [e.message for e in events if e.stage == "compress"]
    assert stages[:4] == ["profile", "data", "importance", "search"]
    distill = [e for e in events if e.stage == "distill"]
    assert distill and distill[-1].done == distill[-1].total == OPTIONS["distill_tokens"]
    assert distill[-1].unit == "tok"


def interrupt_at(stage: str):
    """A progress callback that sends this process SIGINT (Ctrl-C) at the first event of
    `stage`."""
    def progress(event):
        if event.stage == stage and not progress.sent:
            progress.sent = True
            os.kill(os.getpid(), signal.SIGINT)
    progress.sent = False
    return progress


def recorded_stages(out):
    with open(out.parent / f".{out.name}.partial" / "stages.json") as f:
        return [s["stage"] for s in json.load(f)["stages"]]


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored (POSIX), and Python then leaves it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_leaves_a_resumable_run(stories15m, cpu_profile, tmp_path, ctrl_c_raises):
    out = tmp_path / "run"
    # Ctrl-C while importance runs: Python's own KeyboardInterrupt, raised at the next event.
    with pytest.raises(KeyboardInterrupt) as e:
        autocompress.compress(str(stories15m), SCENARIO, str(out),
                              progress=interrupt_at("importance"), profile=str(cpu_profile),
                              **OPTIONS)
    assert not isinstance(e.value, autocompress.Interrupted)
    assert not out.exists()
    assert recorded_stages(out) == ["profile", "data"]

    # Ctrl-C while distilling: the loop stops at its next step and saves its state.
    with pytest.raises(autocompress.Interrupted, match="interrupted by a signal") as e:
        autocompress.compress(None, None, str(out), progress=interrupt_at("distill"),
                              resume=True)
    assert isinstance(e.value, KeyboardInterrupt)
    assert recorded_stages(out) == ["profile", "data", "importance", "search"]

    report = autocompress.compress(None, None, str(out), resume=True)
    resumed = [s["stage"] for s in report.stages if s["resumed"]]
    assert resumed == ["profile", "data", "importance", "search"]
    assert (out / "model").is_dir()


def test_resume_refuses_other_options(tmp_path):
    with pytest.raises(autocompress.ConfigError, match="seed cannot be given"):
        autocompress.compress(None, None, str(tmp_path / "run"), resume=True, seed=3)
    with pytest.raises(autocompress.ConfigError, match="no interrupted run"):
        autocompress.compress(None, None, str(tmp_path / "run"), resume=True)
    with pytest.raises(autocompress.ConfigError, match="unknown option 'sequence_length'"):
        autocompress.compress("m", SCENARIO, str(tmp_path / "run"), sequence_length=3)


def test_an_unknown_judge_is_refused_before_any_stage(stories15m, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(autocompress.ConfigError,
                       match="--autocompress-judge: expected halving, blockwise or retraining, found 'best'"):
        autocompress.compress(str(stories15m), SCENARIO, str(out), autocompress_judge="best")
    assert not out.exists()
