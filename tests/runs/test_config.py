"""Hyperparameter files: her_wrap's YAML, rl-baselines3-zoo's files, ``-params`` overrides, and bad input."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.runs.arguments import torch_threads
from her_wrap.runs.config import load_run_config, validate_file
from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_factory import learner_kwargs, resolve_learning_rate, resolve_policy_kwargs
from her_wrap.runs.run_config import RunConfig, hindsight_settings
from her_wrap.runs.yaml_io import parse_yaml, write_yaml_file
from her_wrap.runs.zoo_translation import HER_SETTINGS, parse_python_literal

REPO = Path(__file__).resolve().parents[2]
ZOO_FILE = Path(__file__).resolve().parents[1] / "data" / "tqc.yml"


def write_config(tmp_path: Path, text: str, name: str = "her.yml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- YAML numbers


class ScalarCase(NamedTuple):
    name: str
    text: str
    expected: Any


SCALAR_CASES = [
    ScalarCase("exponent without dot is a float", "1e6", 1e6),
    ScalarCase("negative exponent", "3e-4", 3e-4),
    ScalarCase("dot and unsigned exponent", "1.0e6", 1e6),
    ScalarCase("YAML 1.1 float still works", "7.3e-4", 7.3e-4),
    ScalarCase("underscored integer stays an integer", "1_000", 1000),
    ScalarCase("quoted exponent stays a string", "'1e6'", "1e6"),
    ScalarCase("zoo's !!float tag", "!!float 2e4", 2e4),
    ScalarCase("no mantissa is a string", "e6", "e6"),
    ScalarCase("zoo's linear schedule is a string", "lin_7.3e-4", "lin_7.3e-4"),
]


@pytest.mark.parametrize("case", SCALAR_CASES, ids=lambda case: case.name)
def test_yaml_scalar(case: ScalarCase) -> None:
    value = parse_yaml(f"value: {case.text}")["value"]
    assert (type(value), value) == (type(case.expected), case.expected)


# --------------------------------------------------------------------------- loader table


class LoaderCase(NamedTuple):
    """A config file, the entry to read and the ``-params`` items; what the config must hold."""

    name: str
    text: str
    expected: dict[str, Any]
    env_id: str = "BitFlipping-v0"
    overrides: tuple[str, ...] = ()
    algo: str | None = None


BASE = textwrap.dedent(
    """
    default:
      policy: MultiInputPolicy
      her: {n_sampled_goal: 4, goal_selection_strategy: future, online: true}
    BitFlipping-v0:
      model_class: dqn
      n_timesteps: 1e4
    """
)

LOADER_CASES = [
    LoaderCase("number written 1e4 is an int n_timesteps", BASE, {"n_timesteps": 10_000}),
    LoaderCase(
        "default entry merged under the entry",
        BASE,
        {
            "policy": "MultiInputPolicy",
            "her": {"n_sampled_goal": 4, "goal_selection_strategy": "future", "online": True},
        },
    ),
    LoaderCase(
        "entry's her section merged key by key over the default's",
        BASE + "  her: {n_sampled_goal: 8}\n",
        {"her": {"n_sampled_goal": 8, "goal_selection_strategy": "future", "online": True}},
    ),
    LoaderCase(
        "YAML anchor and merge key",
        """
        base: &base
          model_class: sac
          n_timesteps: 2e4
          gamma: 0.95
        BitFlippingContinuous-v0:
          <<: *base
          gamma: 0.9
        """,
        {"model_class": "sac", "n_timesteps": 20_000, "learner_kwargs": {"gamma": 0.9}},
        env_id="BitFlippingContinuous-v0",
    ),
    LoaderCase(
        "integral float for an int learner argument becomes an int",
        BASE + "  buffer_size: 1e5\n  learning_rate: 1e-3\n",
        {"learner_kwargs": {"buffer_size": 100_000, "learning_rate": 1e-3}},
    ),
    LoaderCase(
        "zoo replay_buffer_kwargs string becomes the her section",
        """
        BitFlipping-v0:
          model_class: dqn
          n_timesteps: 100
          replay_buffer_class: HerReplayBuffer
          replay_buffer_kwargs: "dict(goal_selection_strategy='final', n_sampled_goal=2, online_sampling=False)"
        """,
        {"her": {"goal_selection_strategy": "final", "n_sampled_goal": 2, "online": False}},
    ),
    LoaderCase(
        "zoo top-level HER keys (old her.yml) become the her section",
        """
        BitFlipping-v0:
          model_class: 'dqn'
          n_timesteps: 100
          n_sampled_goal: 6
          online_sampling: True
          max_episode_length: 10
        """,
        {"her": {"n_sampled_goal": 6, "online": True}},
    ),
    LoaderCase(
        "zoo dict string parsed as a literal, torch names kept as strings",
        BASE + '  policy_kwargs: "dict(net_arch=[64, 64], activation_fn=nn.Tanh)"\n',
        {"learner_kwargs": {"policy_kwargs": {"net_arch": [64, 64], "activation_fn": "nn.Tanh"}}},
    ),
    LoaderCase(
        "normalize: true is HER's default normalization", BASE + "  normalize: true\n", {"normalize": True}
    ),
    LoaderCase(
        "normalize mapping keeps its settings",
        BASE + "  normalize: {norm_reward: true, clip_obs: 10.0}\n",
        {"normalize": {"norm_reward": True, "clip_obs": 10.0}},
    ),
    LoaderCase("no normalize key means no normalization", BASE, {"normalize": False}),
    LoaderCase("num_threads of the run", BASE + "  num_threads: 2\n", {"num_threads": 2}),
    LoaderCase("no num_threads key leaves the command's default", BASE, {"num_threads": None}),
    LoaderCase("workers of the run", BASE + "  workers: 4\n", {"workers": 4}),
    LoaderCase("no workers key leaves the command's default", BASE, {"workers": None}),
    LoaderCase(
        "dotted override into her",
        BASE,
        {"her": {"n_sampled_goal": 8, "goal_selection_strategy": "future", "online": True}},
        overrides=("her.n_sampled_goal:8",),
    ),
    LoaderCase(
        "bare HER key override goes into her, zoo name renamed",
        BASE,
        {"her": {"n_sampled_goal": 2, "goal_selection_strategy": "future", "online": False}},
        overrides=("n_sampled_goal:2", "online_sampling:false"),
    ),
    LoaderCase(
        "override value read as YAML",
        BASE,
        {"learner_kwargs": {"learning_rate": 5e-4, "batch_size": 64}},
        overrides=("learning_rate:5e-4", "batch_size:64"),
    ),
    LoaderCase(
        "override with a dict literal",
        BASE,
        {"learner_kwargs": {"policy_kwargs": {"net_arch": [8]}}},
        overrides=("policy_kwargs:dict(net_arch=[8])",),
    ),
    LoaderCase(
        "override into env_kwargs", BASE, {"env_kwargs": {"n_bits": 12}}, overrides=("env_kwargs.n_bits:12",)
    ),
    LoaderCase(
        "--algo supplies the learner of an entry without model_class",
        "BitFlipping-v0: {n_timesteps: 100}\n",
        {"model_class": "qrdqn"},
        algo="qrdqn",
    ),
    LoaderCase(
        "model_class in any case",
        "BitFlipping-v0: {model_class: DQN, n_timesteps: 100}\n",
        {"model_class": "dqn"},
    ),
    LoaderCase(
        "action noise of a continuous learner",
        "BitFlippingContinuous-v0: {model_class: td3, n_timesteps: 100, noise_type: normal, noise_std: 0.2}\n",
        {"noise_type": "normal", "noise_std": 0.2},
        env_id="BitFlippingContinuous-v0",
    ),
]


@pytest.mark.parametrize("case", LOADER_CASES, ids=lambda case: case.name)
def test_loader(case: LoaderCase, tmp_path: Path) -> None:
    config = load_run_config(
        write_config(tmp_path, case.text), case.env_id, overrides=case.overrides, algo=case.algo
    )
    actual = {key: getattr(config, key) for key in case.expected if key != "her"}
    expected = dict(case.expected)
    if "her" in expected:
        # The her section is held as what it means: its settings and HER's other options.
        section = expected["her"]
        expected["her"] = (
            hindsight_settings(section),
            {key: value for key, value in section.items() if key not in SETTING_NAMES},
        )
        actual["her"] = (config.hindsight, config.her_options)
    if "learner_kwargs" in case.expected:
        actual["learner_kwargs"] = {
            key: config.learner_kwargs.get(key) for key in case.expected["learner_kwargs"]
        }
    assert actual == expected


class BadConfigCase(NamedTuple):
    """A config problem and the fragments its one-line error must contain."""

    name: str
    text: str
    fragments: tuple[str, ...]
    env_id: str = "BitFlipping-v0"
    overrides: tuple[str, ...] = ()


BAD_CONFIG_CASES = [
    BadConfigCase(
        "unknown hyperparameter lists the valid ones",
        BASE + "  learnin_rate: 1e-3\n",
        (
            "unknown hyperparameter 'learnin_rate' for dqn",
            "did you mean 'learning_rate'",
            "valid: ",
            "exploration_fraction",
        ),
    ),
    BadConfigCase(
        "unknown hyperparameter from -params",
        BASE,
        ("unknown hyperparameter 'gama'",),
        overrides=("gama:0.9",),
    ),
    BadConfigCase(
        "entry missing: the file's entries listed",
        BASE,
        ("has no entry for 'Nope-v0'", "its entries: BitFlipping-v0"),
        env_id="Nope-v0",
    ),
    BadConfigCase("the default entry is not an env", BASE, ("has no entry for 'default'",), env_id="default"),
    BadConfigCase(
        "malformed YAML names the line",
        "BitFlipping-v0:\n  model_class: dqn\n  n_timesteps: [1,\n",
        ("malformed YAML", "line 4"),
    ),
    BadConfigCase(
        "unknown HER setting",
        BASE + "  her: {n_sampled_goals: 2}\n",
        ("unknown HER setting 'n_sampled_goals'", "valid: n_sampled_goal"),
    ),
    BadConfigCase(
        "unknown goal strategy",
        BASE + "  her: {goal_selection_strategy: futur}\n",
        ("Unknown goal_selection_strategy 'futur'",),
    ),
    BadConfigCase("no model_class", "BitFlipping-v0: {n_timesteps: 100}\n", ("no model_class",)),
    BadConfigCase("no n_timesteps", "BitFlipping-v0: {model_class: dqn}\n", ("no n_timesteps",)),
    BadConfigCase(
        "unknown model_class",
        "BitFlipping-v0: {model_class: ppo, n_timesteps: 100}\n",
        ("unknown model_class 'ppo'", "dqn, qrdqn, sac"),
    ),
    BadConfigCase(
        "another replay buffer",
        BASE + "  replay_buffer_class: ReplayBuffer\n",
        ("replay_buffer_class 'ReplayBuffer' is not supported",),
    ),
    BadConfigCase(
        "zoo wrapper key names code",
        BASE + "  env_wrapper: utils.wrappers.TimeFeatureWrapper\n",
        ("'env_wrapper' is not supported",),
    ),
    BadConfigCase(
        "a literal string that would run code is refused",
        BASE + "  policy_kwargs: \"dict(net_arch=__import__('os').getcwd())\"\n",
        ("only literals, dict(...) and torch names", "nothing is evaluated"),
    ),
    BadConfigCase(
        "HER setting given twice",
        BASE + "  her: {n_sampled_goal: 4}\n  n_sampled_goal: 2\n",
        ("'n_sampled_goal' is given twice",),
    ),
    BadConfigCase(
        "noise on a discrete learner",
        BASE + "  noise_type: normal\n  noise_std: 0.1\n",
        ("apply to continuous actions",),
    ),
    BadConfigCase(
        "policy name", BASE + "  policy: CnnPolicy\n", ("policy must be one of MultiInputPolicy, MlpPolicy",)
    ),
    BadConfigCase(
        "override without a colon", BASE, ("-params expects key:value",), overrides=("learning_rate",)
    ),
    BadConfigCase("entry is not a mapping", "BitFlipping-v0: 3\n", ("must be a mapping",)),
    BadConfigCase(
        "num_threads below 1", BASE + "  num_threads: 0\n", ("num_threads must be at least 1, got 0",)
    ),
    BadConfigCase(
        "num_threads not a count", BASE + "  num_threads: two\n", ("num_threads must be an integer",)
    ),
    BadConfigCase("workers below 1", BASE + "  workers: 0\n", ("workers must be at least 1, got 0",)),
    BadConfigCase("workers not a count", BASE + "  workers: 2.5\n", ("workers must be an integer",)),
    BadConfigCase(
        "max_minutes not positive",
        BASE + "  max_minutes: 0\n",
        ("max_minutes must be a positive number of minutes, got 0", "set it to null"),
    ),
    BadConfigCase(
        "max_minutes not a number",
        BASE,
        ("max_minutes must be a positive number of minutes, got 'soon'",),
        overrides=("max_minutes:soon",),
    ),
]


@pytest.mark.parametrize("case", BAD_CONFIG_CASES, ids=lambda case: case.name)
def test_bad_config(case: BadConfigCase, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        load_run_config(write_config(tmp_path, case.text), case.env_id, overrides=case.overrides)
    message = str(caught.value)
    assert "\n" not in message and all(fragment in message for fragment in case.fragments), message


@pytest.mark.parametrize(
    ("requested", "entry", "expected"), [(3, 2, 3), (None, 2, 2), (None, None, 1), (1, None, 1)]
)
def test_torch_threads_flag_then_entry_then_one(
    requested: int | None, entry: int | None, expected: int
) -> None:
    assert torch_threads(requested, entry) == expected


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        load_run_config(tmp_path / "absent.yml", "BitFlipping-v0")


# --------------------------------------------------------------------------- a zoo file


def test_zoo_file_entry_with_her_replay_buffer() -> None:
    config = load_run_config(ZOO_FILE, "FetchReach-v4")
    assert config == RunConfig(
        env_id="FetchReach-v4",
        model_class="tqc",  # from the file name
        n_timesteps=20_000,
        policy="MultiInputPolicy",
        n_envs=1,
        hindsight=HindsightSettings(goal_selection_strategy="future", n_sampled_goal=4, online=True),
        learner_kwargs={
            "buffer_size": 1_000_000,
            "ent_coef": "auto",
            "batch_size": 256,
            "gamma": 0.95,
            "learning_rate": "lin_7.3e-4",
            "learning_starts": 1000,
            "policy_kwargs": {"net_arch": [64, 64], "n_critics": 1, "activation_fn": "nn.ReLU"},
        },
        env_kwargs={},
        normalize={"norm_obs": True, "norm_reward": False},
    )


def test_zoo_file_anchor_entry() -> None:
    config = load_run_config(ZOO_FILE, "FetchSlide-v4")
    assert (
        config.n_timesteps,
        config.her,
        config.learner_kwargs["train_freq"],
        config.learner_kwargs["policy_kwargs"],
    ) == (
        3_000_000,
        {"goal_selection_strategy": "episode", "n_sampled_goal": 8},
        [1, "episode"],
        {"net_arch": {"pi": [256, 256], "qf": [512, 512]}, "n_critics": 2},
    )


def test_zoo_file_legacy_entry() -> None:
    config = load_run_config(ZOO_FILE, "BitFlippingContinuous-v0")
    assert (config.model_class, config.policy, config.env_kwargs, config.her) == (
        "sac",
        "MlpPolicy",
        {"n_bits": 4},
        {"n_sampled_goal": 2, "goal_selection_strategy": "final", "online": False},
    )


def test_zoo_file_every_entry_validates() -> None:
    assert [config.env_id for config in validate_file(ZOO_FILE)] == [
        "FetchReach-v4",
        "FetchPush-v4",
        "FetchSlide-v4",
        "BitFlippingContinuous-v0",
    ]


# --------------------------------------------------------------------------- configs/her.yml


def test_shipped_config_has_the_promised_entries() -> None:
    learners = {config.env_id: config.model_class for config in validate_file(REPO / "configs" / "her.yml")}
    assert learners == {
        "BitFlipping-v0": "dqn",
        "BitFlippingContinuous-v0": "sac",
        "FetchReach-v4": "sac",
        "FetchPush-v4": "ddpg",
        "FetchSlide-v4": "ddpg",
        "FetchPickAndPlace-v4": "ddpg",
        "PandaReach-v3": "sac",
        "PandaPush-v3": "ddpg",
        "PandaPickAndPlace-v3": "ddpg",
    }


MANIPULATION_MERGERS = ("FetchPickAndPlace-v4", "PandaPush-v3", "PandaPickAndPlace-v3")


def test_fetch_slides_own_keys_reach_no_entry_that_merges_the_manipulation_settings(tmp_path: Path) -> None:
    """FetchSlide's mapping holds the shared ``&manipulation`` settings and its own keys beside them: a key
    added to its own (here the discount) changes FetchSlide only, not the entries that merge the anchor; nor
    do its own workers and schedule (two workers, 40 gradient steps per cycle)."""
    text = (REPO / "configs" / "her.yml").read_text(encoding="utf-8")
    own = "FetchSlide-v4:\n"
    assert text.count(own) == 1
    edited = write_config(tmp_path, text.replace(own, own + "  gamma: 0.77\n"))
    assert load_run_config(edited, "FetchSlide-v4").learner_kwargs["gamma"] == 0.77
    for env_id in MANIPULATION_MERGERS:
        shipped = load_run_config(REPO / "configs" / "her.yml", env_id)
        assert load_run_config(edited, env_id).to_entry() == shipped.to_entry()
        assert shipped.learner_kwargs["gamma"] == 0.98
        assert (shipped.workers or 1, shipped.learner_kwargs["gradient_steps"], shipped.max_minutes) == (
            1,
            20,
            None,
        )


def test_shipped_jax_config_names_sbx_learners_only() -> None:
    pytest.importorskip("sbx", reason="the SBX entries need the jax extra (pip install her_wrap[jax])")
    learners = {
        config.env_id: config.model_class for config in validate_file(REPO / "configs" / "her_jax.yml")
    }
    assert learners == {"FetchReach-v4": "sbx.sac", "FetchPush-v4": "sbx.crossq"}


def test_config_yml_round_trip(tmp_path: Path) -> None:
    original = load_run_config(ZOO_FILE, "FetchReach-v4", overrides=("her.online:false", "workers:2"))
    write_yaml_file(tmp_path / "config.yml", {original.env_id: original.to_entry()})
    assert load_run_config(tmp_path / "config.yml", original.env_id) == original


def test_her_settings_and_normalize_are_the_her_constructor_keywords() -> None:
    from her_wrap import HER

    parameters = inspect.signature(HER.__init__).parameters
    keywords = {
        name
        for name, parameter in parameters.items()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD and not name.startswith("_")
    } - {"self", "policy", "env", "model_class"}
    assert {*HER_SETTINGS, "normalize"} == keywords  # normalize is a top-level key, as in the zoo


# --------------------------------------------------------------------------- literals and objects


class LiteralCase(NamedTuple):
    name: str
    source: str
    expected: Any


LITERAL_CASES = [
    LiteralCase(
        "nested dict calls",
        "dict(net_arch=dict(pi=[64], qf=[400, 300]))",
        {"net_arch": {"pi": [64], "qf": [400, 300]}},
    ),
    LiteralCase("negative number", "dict(log_std_init=-3.67)", {"log_std_init": -3.67}),
    LiteralCase("tuple read as a list", "dict(train_freq=(1, 'episode'))", {"train_freq": [1, "episode"]}),
    LiteralCase(
        "braces form", "{'norm_obs': True, 'norm_reward': False}", {"norm_obs": True, "norm_reward": False}
    ),
    LiteralCase(
        "torch names",
        "dict(activation_fn=th.nn.ReLU, optimizer_class=th.optim.AdamW)",
        {"activation_fn": "th.nn.ReLU", "optimizer_class": "th.optim.AdamW"},
    ),
    LiteralCase("multi-line", "dict(\n  a=1,\n  b=None\n)", {"a": 1, "b": None}),
]


@pytest.mark.parametrize("case", LITERAL_CASES, ids=lambda case: case.name)
def test_parse_python_literal(case: LiteralCase) -> None:
    assert parse_python_literal(case.source) == case.expected


@pytest.mark.parametrize(
    "source", ["dict(a=os.system('ls'))", "dict(a=1 + 2)", "dict(**other)", "dict(a=lambda: 1)", "dict(a="]
)
def test_parse_python_literal_refuses(source: str) -> None:
    with pytest.raises(UsageError):
        parse_python_literal(source)


def test_policy_kwargs_names_become_torch_classes() -> None:
    import torch

    resolved = resolve_policy_kwargs(
        {"activation_fn": "nn.ReLU", "optimizer_class": "adamw", "net_arch": [8]}
    )
    assert resolved == {"activation_fn": torch.nn.ReLU, "optimizer_class": torch.optim.AdamW, "net_arch": [8]}


def test_linear_learning_rate_decays_to_zero() -> None:
    schedule = resolve_learning_rate("lin_7.3e-4")
    assert (schedule(1.0), schedule(0.5), schedule(0.0)) == pytest.approx((7.3e-4, 3.65e-4, 0.0))


def test_learner_kwargs_make_train_freq_a_tuple_and_noise_an_object() -> None:
    from gymnasium import spaces
    from stable_baselines3.common.noise import NormalActionNoise

    config = RunConfig(
        "BitFlippingContinuous-v0",
        "td3",
        100,
        learner_kwargs={"train_freq": [1, "episode"]},
        noise_type="normal",
        noise_std=0.3,
    )
    kwargs = learner_kwargs(config, spaces.Box(-1, 1, (3,)))
    assert (kwargs["train_freq"], type(kwargs["action_noise"])) == ((1, "episode"), NormalActionNoise)


def test_a_config_holds_its_hindsight_settings_built_once() -> None:
    config = load_run_config(ZOO_FILE, "BitFlippingContinuous-v0")
    assert config.hindsight == HindsightSettings(
        n_sampled_goal=2, goal_selection_strategy="final", online=False
    )


def test_to_entry_writes_the_her_section_that_loads_into_the_same_config(tmp_path: Path) -> None:
    config = load_run_config(ZOO_FILE, "FetchSlide-v4")
    write_yaml_file(tmp_path / "config.yml", {config.env_id: config.to_entry()})
    assert load_run_config(tmp_path / "config.yml", config.env_id) == config


def test_max_minutes_is_a_run_key_that_round_trips_and_null_removes(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE + "  max_minutes: 115\n")
    config = load_run_config(path, "BitFlipping-v0")
    assert config.max_minutes == 115.0 and "max_minutes" not in config.learner_kwargs
    assert config.to_entry()["max_minutes"] == 115.0
    assert load_run_config(path, "BitFlipping-v0", overrides=("max_minutes:null",)).max_minutes is None
