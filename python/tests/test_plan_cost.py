"""plan() and cost() equal the CLI's `plan --json` and `cost --json`; errors arrive as their
Python classes with the CLI's message."""
import pytest

import autocompress
from conftest import FIXTURE_CONFIGS, cli_json, run_cli

# GPU scenarios: costed from the device spec, no profile needed.
SCENARIOS = ["rtx5070-coding", "h100-serving"]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("config", FIXTURE_CONFIGS, ids=lambda p: p.stem)
def test_plan_equals_cli(config, scenario):
    plan = autocompress.plan(str(config), scenario)
    assert plan.to_dict() == cli_json("plan", "--config", str(config), "--scenario", scenario,
                                      "--json")
    assert plan.verdict in ("fits", "fits_after_changes", "no_fit")
    assert str(plan) == run_cli("plan", "--config", str(config), "--scenario", scenario).stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("config", FIXTURE_CONFIGS, ids=lambda p: p.stem)
def test_cost_equals_cli(config, scenario):
    cost = autocompress.cost(str(config), autocompress.Scenario.load(scenario))
    expected = cli_json("cost", "--config", str(config), "--scenario", scenario, "--json")
    assert cost.to_dict() == expected
    assert cost.tpot_ms == expected["tpot_ms"]
    assert cost.peak_memory_bytes == expected["peak_memory_bytes"]


def test_scenario_attributes():
    s = autocompress.Scenario.load("rtx5070-coding")
    assert (s.name, s.engine) == ("rtx5070-coding", "llama.cpp")
    assert s.prompt_tokens > 0 and s.batch_size >= 1
    assert isinstance(s.limits, dict)


def cli_error(*args: str) -> str:
    """The message the CLI prints for a failing command ("error: MESSAGE")."""
    r = run_cli(*args, check=False)
    assert r.returncode == 1, r
    return r.stderr.strip().removeprefix("error: ")


def test_unknown_scenario_is_config_error_with_the_cli_message():
    config = str(FIXTURE_CONFIGS[0])
    with pytest.raises(autocompress.ConfigError) as e:
        autocompress.plan(config, "no-such-scenario")
    assert str(e.value) == cli_error("plan", "--config", config, "--scenario", "no-such-scenario")
    assert isinstance(e.value, autocompress.Error) and isinstance(e.value, RuntimeError)


def test_malformed_config_is_format_error_with_the_cli_message(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": ')
    with pytest.raises(autocompress.FormatError) as e:
        autocompress.cost(str(bad), "rtx5070-coding")
    assert str(e.value) == cli_error("cost", "--config", str(bad), "--scenario", "rtx5070-coding")


def test_cpu_scenario_without_profile_is_config_error():
    with pytest.raises(autocompress.ConfigError, match="profile"):
        autocompress.cost(str(FIXTURE_CONFIGS[0]), "cpu-local")
