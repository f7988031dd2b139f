"""stable-baselines3's HER tests (``tests/test_her.py``), ported to her_wrap's two entry points.

Every test that builds a model runs through both:

- ``HER(policy, env, model_class, n_sampled_goal=..., goal_selection_strategy=..., **learner_kwargs)``;
- SB3's own learner with ``replay_buffer_class=her_wrap.sb3.HerReplayBuffer``: SB3's code as it is but
  for the import.

The env is her_wrap's :class:`~her_wrap.envs.BitFlippingEnv` with SB3's observation options; step counts
are SB3's own (a few hundred steps), so each case takes seconds.

.. note:: Where her_wrap differs from SB3 on purpose, a case tests her_wrap's intent and says why:

    - a relabeled transition's ``terminated`` is recomputed for its new goal (``compute_terminated``), not
      copied from the original goal's episode, and a trajectory cut when a buffer is loaded keeps its
      bootstrap (a cut is no terminal state);
    - episodes in progress can be sampled, so a full buffer needs no rule against sampling the current
      episode;
    - ``goal_selection_strategy="random"`` (any stored goal, as stable-baselines v2) exists;
    - the env's goal is random by default (SB3: always all ones); where a result depends on the task, the
      case uses ``fixed_goal=True``, SB3's task.
"""

from __future__ import annotations

import pathlib
import warnings
from collections.abc import Callable, Iterator
from copy import deepcopy
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy as StableBaselinesStrategy

from her_wrap import HER
from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.envs import BitFlippingEnv
from her_wrap.sb3 import HerReplayBuffer


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The runs share 2 cores with everything else: keep torch to one thread."""
    threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(threads)


# ---------------------------------------------------------------- the two entry points


class ThroughHER:
    """``HER(policy, env, model_class, n_sampled_goal, goal_selection_strategy, **learner_kwargs)``."""

    def build(
        self,
        model_class: type[OffPolicyAlgorithm],
        env: Any,
        *,
        n_sampled_goal: int = 4,
        goal_selection_strategy: Any = "future",
        copy_info_dict: bool = False,
        **learner_kwargs: Any,
    ) -> Any:
        # SB3's copy_info_dict=True keeps every step's info dict for compute_reward: HER's store_infos=True.
        return HER(
            "MultiInputPolicy",
            env,
            model_class,
            n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            store_infos=True if copy_info_dict else None,
            **learner_kwargs,
        )

    def load(self, model_class: type[OffPolicyAlgorithm], path: pathlib.Path, **kwargs: Any) -> Any:
        return HER.load(path, **kwargs)

    def learner(self, model: Any) -> OffPolicyAlgorithm:
        return model.model


class ThroughDropIn:
    """SB3's learner with ``replay_buffer_class=HerReplayBuffer``, as SB3's tests build it.

    A learner's ``seed`` also seeds the buffer's draws (a her_wrap keyword: SB3's ``seed=`` reaches no
    replay buffer), so that a seeded case is the same run every time through this entry point too.
    """

    def build(
        self,
        model_class: type[OffPolicyAlgorithm],
        env: Any,
        *,
        n_sampled_goal: int = 4,
        goal_selection_strategy: Any = "future",
        copy_info_dict: bool = False,
        **learner_kwargs: Any,
    ) -> Any:
        return model_class(
            "MultiInputPolicy",
            env,
            replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=dict(
                n_sampled_goal=n_sampled_goal,
                goal_selection_strategy=goal_selection_strategy,
                copy_info_dict=copy_info_dict,
                seed=learner_kwargs.get("seed"),
            ),
            **learner_kwargs,
        )

    def load(self, model_class: type[OffPolicyAlgorithm], path: pathlib.Path, **kwargs: Any) -> Any:
        return model_class.load(path, **kwargs)

    def learner(self, model: Any) -> OffPolicyAlgorithm:
        return model


ENTRY_POINTS = [ThroughHER(), ThroughDropIn()]
ENTRY_IDS = ["HER", "drop-in HerReplayBuffer"]
EntryPoint = ThroughHER | ThroughDropIn
through_both = pytest.mark.parametrize("entry", ENTRY_POINTS, ids=ENTRY_IDS)


def stored_transitions(
    buffer: HerReplayBuffer,
) -> tuple[tuple[np.ndarray, np.ndarray], dict]:
    """The slots (ring rows, env columns) of every stored transition, and their values: observations, next
    observations, action, reward, terminated, truncated. SB3's tests compare its arrays up to ``pos``; this
    buffer stores each observation once, so its transitions are compared instead."""
    buffer.flush()
    storage = buffer.replay.storage
    rows, columns = np.meshgrid(np.arange(storage.n_rows), np.arange(storage.n_envs), indexing="ij")
    rows, columns = rows.ravel(), columns.ravel()
    valid = storage.is_transition(rows, columns)
    slots = (rows[valid], columns[valid])
    return slots, transitions_at(buffer, slots)


def transitions_at(buffer: HerReplayBuffer, slots: tuple[np.ndarray, np.ndarray]) -> dict:
    """The values of the transitions at ``slots`` (info dicts left out)."""
    buffer.flush()
    values = buffer.replay.storage.gather(*slots)
    values.pop("infos", None)
    return values


def same_values(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> bool:
    return first.keys() == second.keys() and all(np.array_equal(first[key], second[key]) for key in first)


def rewards_and_env_rewards(
    buffer: Any, env: BitFlippingEnv, batch_size: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """A batch's rewards, and the env's rewards for its next achieved goals against its desired goals."""
    samples = buffer.sample(batch_size)
    observations, next_observations = samples.observations, samples.next_observations
    if buffer.layout is not None:  # a flat policy's batch: the goal dict's keys side by side
        observations = buffer.layout.unflatten(observations.numpy())
        next_observations = buffer.layout.unflatten(next_observations.numpy())
    expected = env.compute_reward(
        np.asarray(next_observations["achieved_goal"]), np.asarray(observations["desired_goal"]), None
    )
    return samples.rewards.numpy().ravel(), expected


#: Smallest share of rewards 0 in a batch of 4-bit episodes relabeled with ``n_sampled_goal=2``, ``future``:
#: 2/3 of the batch is relabeled, and ``future`` picks the transition's own next achieved goal (reward 0)
#: with probability 1/4 or more in episodes of at most 4 steps: 1/6 of the batch on average from that
#: alone (0.37 to 0.41 in all, measured on these runs). Without relabeling, the same runs reach their own
#: goal in 0.05 to 0.10 of their steps.
MIN_RELABELED_SUCCESS_SHARE = 0.15


# ---------------------------------------------------------------- the class SB3 dropped


def test_her_is_the_model_class_sb3_dropped_and_names_what_it_needs() -> None:
    """SB3's ``test_import_error``: ``from stable_baselines3 import HER`` fails, pointing to its docs.

    her_wrap is where that class went: it imports, and a ``HER`` without an env says what to pass.
    """
    with pytest.raises(ValueError, match="HER needs an env"):
        HER("MlpPolicy", None, DQN)  # type: ignore[arg-type]


# ---------------------------------------------------------------- every learner, vector and image goals


@through_both
@pytest.mark.parametrize("model_class", [SAC, TD3, DDPG, DQN])
@pytest.mark.parametrize("image_obs_space", [True, False], ids=["images", "vectors"])
def test_her(entry: EntryPoint, model_class: type[OffPolicyAlgorithm], image_obs_space: bool) -> None:
    n_envs = 1
    n_bits = 4

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(
            n_bits=n_bits, continuous=model_class is not DQN, image_obs_space=image_obs_space
        )

    env = make_vec_env(env_fn, n_envs)
    model = entry.build(
        model_class,
        env,
        n_sampled_goal=2,
        goal_selection_strategy="future",
        copy_info_dict=True,
        train_freq=4,
        gradient_steps=n_envs,
        policy_kwargs=dict(net_arch=[64]),
        learning_starts=100,
        buffer_size=int(2e4),
    )
    model.learn(total_timesteps=150)
    rewards, env_rewards = rewards_and_env_rewards(model.replay_buffer, env_fn())
    assert np.array_equal(rewards, env_rewards)  # each reward is recomputed for the goal it is sampled with
    assert np.mean(rewards == 0.0) >= MIN_RELABELED_SUCCESS_SHARE


@through_both
@pytest.mark.parametrize("model_class", [SAC, DQN])
def test_her_on_discrete_observations(entry: EntryPoint, model_class: type[OffPolicyAlgorithm]) -> None:
    """Beyond SB3's cases: its env has ``discrete_obs_space`` but its HER tests never train on it. Goals
    stored as integers are relabeled and rewarded like the env's own steps."""
    env = make_vec_env(
        lambda: BitFlippingEnv(n_bits=4, continuous=model_class is not DQN, discrete_obs_space=True), 1
    )
    model = entry.build(
        model_class,
        env,
        n_sampled_goal=2,
        learning_starts=100,
        batch_size=64,
        policy_kwargs=dict(net_arch=[64]),
    )
    model.learn(total_timesteps=150)
    samples = model.replay_buffer.sample(64)
    expected = BitFlippingEnv(n_bits=4, discrete_obs_space=True).compute_reward(
        samples.next_observations["achieved_goal"].numpy(), samples.observations["desired_goal"].numpy(), None
    )
    assert np.array_equal(samples.rewards.numpy().ravel(), expected)


@through_both
@pytest.mark.parametrize(
    ("model_class", "image_obs_space", "start_method"),
    [
        pytest.param(TD3, True, "fork", id="images-TD3"),
        pytest.param(TD3, False, "fork", id="vectors-TD3"),
        pytest.param(DQN, True, "fork", id="images-DQN"),
        pytest.param(DQN, False, None, id="vectors-DQN-default start method"),
    ],
)
def test_multiprocessing(
    entry: EntryPoint, model_class: type[OffPolicyAlgorithm], image_obs_space: bool, start_method: str | None
) -> None:
    """SB3's cases; the workers are forked (no fresh import of torch in each: seconds, not tens of seconds)
    except in one case per entry point, which keeps SB3's default start method (the factory is pickled)."""

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=4, continuous=model_class is not DQN, image_obs_space=image_obs_space)

    vec_env_kwargs = {} if start_method is None else {"start_method": start_method}
    env = make_vec_env(env_fn, n_envs=2, vec_env_cls=SubprocVecEnv, vec_env_kwargs=vec_env_kwargs)
    try:
        model = entry.build(model_class, env, buffer_size=int(2e4), train_freq=4)
        model.learn(total_timesteps=150)
    finally:
        env.close()
    assert entry.learner(model).num_timesteps >= 150


# ---------------------------------------------------------------- goal selection strategies


@through_both
@pytest.mark.parametrize(
    "goal_selection_strategy",
    [
        "final",
        "episode",
        "future",
        StableBaselinesStrategy.FINAL,
        StableBaselinesStrategy.EPISODE,
        StableBaselinesStrategy.FUTURE,
        # her_wrap's own: its enum, and the strategy SB3 dropped (any stored goal, stable-baselines v2).
        GoalSelectionStrategy.FUTURE,
        "random",
        GoalSelectionStrategy.RANDOM,
    ],
    ids=[
        "final",
        "episode",
        "future",
        "SB3 FINAL",
        "SB3 EPISODE",
        "SB3 FUTURE",
        "her_wrap FUTURE",
        "random",
        "her_wrap RANDOM",
    ],
)
def test_goal_selection_strategy(entry: EntryPoint, goal_selection_strategy: Any) -> None:
    n_envs = 2

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(continuous=True)

    env = make_vec_env(env_fn, n_envs)
    normal_action_noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    model = entry.build(
        SAC,
        env,
        goal_selection_strategy=goal_selection_strategy,
        n_sampled_goal=2,
        train_freq=4,
        gradient_steps=n_envs,
        policy_kwargs=dict(net_arch=[64]),
        learning_starts=100,
        buffer_size=int(1e5),
        action_noise=normal_action_noise,
    )
    assert model.action_noise is not None
    model.learn(total_timesteps=150)
    assert model.replay_buffer.goal_selection_strategy is GoalSelectionStrategy.parse(goal_selection_strategy)


# ---------------------------------------------------------------- saving and loading the model


@through_both
@pytest.mark.parametrize(
    ("model_class", "use_sde"),
    [(SAC, False), (TD3, False), (DDPG, False), (DQN, False), (SAC, True)],  # only SAC has gSDE
    ids=["SAC-no-sde", "TD3-no-sde", "DDPG-no-sde", "DQN-no-sde", "SAC-sde"],
)
def test_save_load(
    entry: EntryPoint, tmp_path: pathlib.Path, model_class: type[OffPolicyAlgorithm], use_sde: bool
) -> None:
    n_envs = 2
    n_bits = 4

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=n_bits, continuous=model_class is not DQN)

    env = make_vec_env(env_fn, n_envs)
    kwargs = dict(use_sde=True) if use_sde else {}
    model = entry.build(
        model_class,
        env,
        n_sampled_goal=2,
        goal_selection_strategy="future",
        verbose=0,
        tau=0.05,
        batch_size=128,
        learning_rate=0.001,
        policy_kwargs=dict(net_arch=[64]),
        buffer_size=int(1e5),
        gamma=0.98,
        gradient_steps=n_envs,
        train_freq=4,
        learning_starts=100,
        **kwargs,
    )
    model.learn(total_timesteps=150)

    env.reset()
    action = np.array([env.action_space.sample() for _ in range(n_envs)])
    observations = env.step(action)[0]

    # Random parameters, all different from the trained ones.
    params = deepcopy(model.policy.state_dict())
    model.policy.load_state_dict({name: th.rand_like(param) for name, param in params.items()})
    new_params = model.policy.state_dict()
    for name in params:
        assert not th.allclose(params[name], new_params[name]), "Parameters did not change as expected."
    params = new_params
    selected_actions, _ = model.predict(observations, deterministic=True)

    model.save(tmp_path / "test_save.zip")
    del model

    # Custom objects replace attributes the model has, and only those.
    custom_objects = dict(learning_rate=2e-5, dummy=1.0)
    model_ = entry.load(
        model_class, tmp_path / "test_save.zip", env=env, custom_objects=custom_objects, verbose=2
    )
    assert model_.verbose == 2
    assert model_.learning_rate == custom_objects["learning_rate"]
    assert not hasattr(entry.learner(model_), "dummy")

    model = entry.load(model_class, tmp_path / "test_save.zip", env=env)
    new_params = model.policy.state_dict()
    for name in params:
        assert th.allclose(params[name], new_params[name]), (
            "Model parameters not the same after save and load."
        )
    new_selected_actions, _ = model.predict(observations, deterministic=True)
    assert np.allclose(selected_actions, new_selected_actions, 1e-4)

    model.learn(total_timesteps=150)

    model = entry.load(model_class, tmp_path / "test_save.zip", env=env, verbose=3, learning_rate=2.0)
    assert model.learning_rate == 2.0
    assert model.verbose == 3


# ---------------------------------------------------------------- saving and loading the replay buffer


@through_both
@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("truncate_last_trajectory", [False, True], ids=["continue", "truncate"])
def test_save_load_replay_buffer(
    entry: EntryPoint,
    n_envs: int,
    tmp_path: pathlib.Path,
    recwarn: pytest.WarningsRecorder,
    truncate_last_trajectory: bool,
) -> None:
    warnings.filterwarnings(action="ignore", category=DeprecationWarning)
    path = tmp_path / "replay_buffer.pkl"

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=4, continuous=True)

    env = make_vec_env(env_fn, n_envs)
    model = entry.build(
        SAC,
        env,
        n_sampled_goal=2,
        goal_selection_strategy="future",
        gradient_steps=n_envs,
        train_freq=4,
        buffer_size=int(2e4),
        policy_kwargs=dict(net_arch=[64]),
        seed=0,
    )
    model.learn(200)
    old_slots, old_transitions = stored_transitions(model.replay_buffer)
    episode_in_progress = model.replay_buffer.has_open_episodes()

    model.save_replay_buffer(path)
    del entry.learner(model).replay_buffer
    with pytest.raises(AttributeError):
        model.replay_buffer  # noqa: B018
    assert len(recwarn) == 0

    model.load_replay_buffer(path, truncate_last_traj=truncate_last_trajectory)
    if truncate_last_trajectory and episode_in_progress:
        assert len(recwarn) == 1
        warning = recwarn.pop(UserWarning)
        assert "The last trajectory in the replay buffer will be truncated" in str(warning.message)
    else:
        assert len(recwarn) == 0

    slots, transitions = stored_transitions(model.replay_buffer)
    assert all(np.array_equal(old, new) for old, new in zip(old_slots, slots, strict=True))
    assert same_values(old_transitions, transitions)

    model.learn(200, reset_num_timesteps=truncate_last_trajectory)


def test_full_replay_buffer_wraps_and_keeps_sampling() -> None:
    """SB3's ``test_full_replay_buffer``: training on a buffer far smaller than the run.

    SB3 must not sample the episode in progress there; her_wrap samples episodes in progress on purpose
    (goals come from their stored steps), so the case checks that the ring has wrapped and still gives
    relabeled batches whose rewards are the env's for their goals.
    """
    n_bits = 4
    n_envs = 2

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=n_bits, continuous=True)

    env = make_vec_env(env_fn, n_envs)
    model = ThroughDropIn().build(
        SAC,
        env,
        n_sampled_goal=2,
        goal_selection_strategy="future",
        gradient_steps=1,
        train_freq=4,
        policy_kwargs=dict(net_arch=[64]),
        learning_starts=n_bits * n_envs,
        buffer_size=20 * n_envs,
        verbose=1,
        seed=757,
    )
    model.learn(total_timesteps=100)
    storage = model.replay_buffer.replay.storage
    rewards, env_rewards = rewards_and_env_rewards(model.replay_buffer, env_fn())
    assert (storage.written > storage.n_rows).all()
    assert np.array_equal(rewards, env_rewards) and np.mean(rewards == 0.0) >= MIN_RELABELED_SUCCESS_SHARE


@pytest.mark.parametrize("n_envs", [1, 2])
def test_full_replay_buffer_through_her(n_envs: int) -> None:
    """The same run of SB3's ``test_full_replay_buffer`` through ``HER``: the ring wraps, training goes on."""
    model = ThroughHER().build(
        SAC,
        make_vec_env(lambda: BitFlippingEnv(n_bits=4, continuous=True), n_envs),
        n_sampled_goal=2,
        gradient_steps=1,
        train_freq=4,
        policy_kwargs=dict(net_arch=[64]),
        learning_starts=4 * n_envs,
        buffer_size=20 * n_envs,
        seed=757,
    )
    model.learn(total_timesteps=100)
    storage = model.replay_buffer.replay.storage
    assert (storage.written > storage.n_rows).all() and model.model._n_updates > 0


# ---------------------------------------------------------------- truncating the last trajectory


def filled_drop_in(
    n_envs: int, n_steps: int, handle_timeout_termination: bool, seed: int = 0
) -> tuple[HerReplayBuffer, Any, Any, np.ndarray, Callable[[int], None]]:
    """SB3's buffer setup of ``test_truncate_last_trajectory``: the drop-in built with SB3's constructor,
    ``n_steps`` random steps of each env added as SB3's test adds them.

    :return: the buffer, the VecEnv, the last observations, the last ``dones``, and ``add_steps(n)``
    """
    n_bits = 4
    venv = make_vec_env(lambda: BitFlippingEnv(n_bits=n_bits, continuous=True), n_envs, seed=seed)
    replay_buffer = HerReplayBuffer(
        buffer_size=int(1e4),
        observation_space=venv.observation_space,
        action_space=venv.action_space,
        env=venv,
        n_envs=n_envs,
        n_sampled_goal=2,
        goal_selection_strategy="future",
        handle_timeout_termination=handle_timeout_termination,
    )
    rng = np.random.default_rng(seed)
    state: dict[str, Any] = {"observations": venv.reset(), "dones": np.zeros(n_envs, dtype=bool)}

    def add_steps(count: int) -> None:
        for _ in range(count):
            actions = rng.random((n_envs, n_bits)).astype(np.float32)
            next_observations, rewards, dones, infos = venv.step(actions)
            replay_buffer.add(state["observations"], next_observations, actions, rewards, dones, infos)
            state["observations"], state["dones"] = next_observations, dones

    add_steps(n_steps)
    return replay_buffer, venv, state["observations"], state["dones"], add_steps


TRUNCATION_CASES = pytest.mark.parametrize(
    ("n_envs", "n_steps", "handle_timeout_termination"),
    [(n_envs, n_steps, handle) for n_envs in (1, 2) for n_steps in (4, 5) for handle in (False, True)],
)


@TRUNCATION_CASES
def test_truncate_last_trajectory_warns_exactly_when_an_episode_is_open(
    recwarn: pytest.WarningsRecorder, n_envs: int, n_steps: int, handle_timeout_termination: bool
) -> None:
    warnings.filterwarnings(action="ignore", category=DeprecationWarning)
    replay_buffer, _, _, dones, _ = filled_drop_in(n_envs, n_steps, handle_timeout_termination)
    assert len(recwarn) == 0
    replay_buffer.truncate_last_trajectory()
    if not dones.all():
        assert len(recwarn) == 1
        warning = recwarn.pop(UserWarning)
        assert "The last trajectory in the replay buffer will be truncated" in str(warning.message)
    else:
        assert len(recwarn) == 0


@TRUNCATION_CASES
def test_truncate_last_trajectory_ends_every_episode_so_each_can_be_sampled(
    n_envs: int, n_steps: int, handle_timeout_termination: bool
) -> None:
    """SB3: the next episode starts at ``pos``, ``dones[pos - 1]`` is set and ``ep_length`` is not 0.

    Here: no episode is left in progress, and every stored transition belongs to a finished episode.
    """
    replay_buffer, *_ = filled_drop_in(n_envs, n_steps, handle_timeout_termination)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        replay_buffer.truncate_last_trajectory()
    (rows, columns), _ = stored_transitions(replay_buffer)
    storage = replay_buffer.replay.storage
    assert (
        not replay_buffer.has_open_episodes()
        and storage.is_transition(rows, columns, finished_only=True).all()
    )


@TRUNCATION_CASES
def test_truncate_last_trajectory_leaves_the_stored_transitions_as_they_were(
    n_envs: int, n_steps: int, handle_timeout_termination: bool
) -> None:
    """SB3 changes only ``dones[pos - 1]`` (and ``timeouts`` with timeout handling).

    her_wrap changes no stored value, ``terminated`` included, whatever ``handle_timeout_termination``:
    a trajectory cut when a buffer is loaded did not end in a terminal state, so it keeps its bootstrap
    (SB3 without timeout handling would count the cut as terminal).
    """
    replay_buffer, *_ = filled_drop_in(n_envs, n_steps, handle_timeout_termination)
    _, before = stored_transitions(replay_buffer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        replay_buffer.truncate_last_trajectory()
    _, after = stored_transitions(replay_buffer)
    assert same_values(before, after)


@TRUNCATION_CASES
def test_steps_added_after_truncation_change_no_old_transition(
    n_envs: int, n_steps: int, handle_timeout_termination: bool
) -> None:
    replay_buffer, _, _, _, add_steps = filled_drop_in(n_envs, n_steps, handle_timeout_termination)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        replay_buffer.truncate_last_trajectory()
    old_slots, old_transitions = stored_transitions(replay_buffer)
    add_steps(10)
    assert same_values(old_transitions, transitions_at(replay_buffer, old_slots))


@TRUNCATION_CASES
def test_steps_added_after_truncation_are_stored_as_new_transitions(
    n_envs: int, n_steps: int, handle_timeout_termination: bool
) -> None:
    """SB3: the rows from ``pos`` on hold new values, the rows after the new ``pos`` none. Here each step
    added becomes one more stored transition, of an episode started after the truncation."""
    replay_buffer, _, _, _, add_steps = filled_drop_in(n_envs, n_steps, handle_timeout_termination)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        replay_buffer.truncate_last_trajectory()
    (old_rows, _), _ = stored_transitions(replay_buffer)
    add_steps(10)
    (rows, _), _ = stored_transitions(replay_buffer)
    assert rows.size == old_rows.size + 10 * n_envs


# ---------------------------------------------------------------- learning


@through_both
def test_performance_her(entry: EntryPoint) -> None:
    """DQN with HER solves 10-bit flipping within 1,500 steps: more than 90% success while training.

    SB3's env has one fixed goal (all ones); her_wrap's draws a random one unless ``fixed_goal=True``,
    which keeps SB3's task and so SB3's bar.
    """
    n_bits = 10
    n_envs = 2

    def env_fn() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=n_bits, continuous=False, fixed_goal=True)

    env = make_vec_env(env_fn, n_envs)
    model = entry.build(
        DQN,
        env,
        n_sampled_goal=5,
        goal_selection_strategy="future",
        verbose=1,
        learning_rate=2e-3,
        train_freq=1,
        gradient_steps=n_envs,
        learning_starts=20,
        exploration_final_eps=0.02,
        target_update_interval=100,
        seed=0,
        batch_size=32,
        buffer_size=int(1e5),
        stats_window_size=50,
    )
    model.learn(total_timesteps=1500, log_interval=50)
    assert np.mean(model.ep_success_buffer) > 0.90


@through_both
def test_eval_success_logging(entry: EntryPoint, tmp_path: pathlib.Path) -> None:
    """SB3's ``test_eval_success_logging`` (``tests/test_callbacks.py``): an ``EvalCallback`` on a HER
    learner records the evaluation episodes' ``is_success``, more than half of them successes.

    SB3's task (``fixed_goal=True``: its env's goal is always all ones), and a seeded evaluation env: the
    bar is met by the last evaluation's five episodes alone, which unseeded random goals make a draw.
    """
    n_bits = 2
    n_envs = 2
    env = BitFlippingEnv(n_bits=n_bits, fixed_goal=True)
    eval_env = DummyVecEnv([lambda: BitFlippingEnv(n_bits=n_bits, fixed_goal=True)] * n_envs)
    eval_env.seed(0)
    eval_callback = EvalCallback(eval_env, eval_freq=250, log_path=str(tmp_path), warn=False)
    model = entry.build(DQN, env, learning_starts=100, seed=0)
    model.learn(500, callback=eval_callback)
    assert len(eval_callback._is_success_buffer) > 0
    assert np.mean(eval_callback._is_success_buffer) > 0.5
