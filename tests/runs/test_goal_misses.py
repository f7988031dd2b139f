"""``her-wrap enjoy --goal-misses``: where the object ends against its goal, and the episodes it reads."""

from __future__ import annotations

from dataclasses import astuple, fields
from pathlib import Path

import numpy as np
import pytest
from robotics_extra import ROBOTICS

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs import cli
from her_wrap.runs.enjoy import Miss, goal_misses_report, miss_of
from her_wrap.sb3.evaluation import EpisodeGoals, evaluate_agent


def _episode(start: tuple[float, ...], goal: tuple[float, ...], end: tuple[float, ...]) -> EpisodeGoals:
    return EpisodeGoals(np.array(start), np.array(goal), np.array(end))


def test_a_miss_is_measured_along_the_line_to_the_goal_and_across_it() -> None:
    short_and_left = miss_of(_episode((0, 0, 0), (1, 0, 0), (0.5, 0.2, 0)))
    assert astuple(short_and_left) == pytest.approx((np.hypot(0.5, 0.2), -0.5, 0.2))
    past = miss_of(_episode((1, 1, 0), (1, 2, 0), (1, 2.25, 0.1)))
    assert astuple(past) == pytest.approx((np.hypot(0.25, 0.1), 0.25, 0.1))
    # a goal at the start has no line to it: the whole distance is across
    assert astuple(miss_of(_episode((1, 1, 1), (1, 1, 1), (1, 1.3, 1)))) == pytest.approx((0.3, 0.0, 0.3))
    assert [field.name for field in fields(Miss)] == ["distance", "along", "side"]


def test_the_report_splits_the_goals_into_quarters_by_distance_and_sorts_the_misses() -> None:
    episodes = [
        _episode((0, 0, 0), (0.1, 0, 0), (0.1, 0.01, 0)),  # near, reached
        _episode((0, 0, 0), (0.2, 0, 0), (0.2, 0, 0)),  # near, reached
        _episode((0, 0, 0), (0.3, 0, 0), (0.29, 0, 0)),  # reached
        _episode((0, 0, 0), (0.4, 0, 0), (0.4, 0.08, 0)),  # beside
        _episode((0, 0, 0), (0.5, 0, 0), (0.52, 0, 0)),  # reached
        _episode((0, 0, 0), (0.6, 0, 0), (0.75, 0, 0)),  # past
        _episode((0, 0, 0), (0.7, 0, 0), (0.4, 0, 0)),  # short
        _episode((0, 0, 0), (0.8, 0, 0), (0.5, 0.1, 0)),  # short and beside
    ]
    report = goal_misses_report(episodes, threshold=0.05)
    assert "Goals reached (within 0.05 of the goal): 4 of 8 (0.50)" in report
    quarters = [line for line in report.splitlines() if line.startswith("| quarter")]
    assert quarters == [
        "| quarter 1: 0.100-0.200 | 2 | 1.00 |",
        "| quarter 2: 0.300-0.400 | 2 | 0.50 |",
        "| quarter 3: 0.500-0.600 | 2 | 0.50 |",
        "| quarter 4: 0.700-0.800 | 2 | 0.00 |",
    ]
    counts = {
        line.split(" | ")[0]: int(line.split(" | ")[1].rstrip(" |")) for line in report.splitlines()[-6:-2]
    }
    assert list(counts.values()) == [2, 1, 2, 0]  # short, past, beside, neither
    assert "Misses: 4; median distance to the goal" in report


def test_a_report_of_only_successes_says_so_and_bad_input_is_refused() -> None:
    assert goal_misses_report([_episode((0, 0, 0), (0.1, 0, 0), (0.1, 0, 0))], 0.05).endswith("No misses.")
    with pytest.raises(ValueError, match="no episodes to report on: evaluate with record_goals=True"):
        goal_misses_report([], 0.05)
    with pytest.raises(ValueError, match="threshold must be positive, got 0"):
        goal_misses_report([_episode((0,), (1,), (1,))], 0.0)


def test_evaluation_records_each_episodes_start_goal_and_end() -> None:
    env = BitFlippingEnv(n_bits=6, max_steps=6)
    agent = HER("MultiInputPolicy", BitFlippingEnv(n_bits=6, max_steps=6), "dqn", learning_starts=10, seed=0)
    result = evaluate_agent(agent, env, 12, seed=3, record_goals=True)
    assert len(result.goals) == 12
    # the end is the last observation's achieved goal: bit flipping succeeds exactly when it is the goal
    assert [bool(np.array_equal(g.end, g.goal)) for g in result.goals] == result.successes
    first, _ = BitFlippingEnv(n_bits=6, max_steps=6).reset(seed=3)
    assert np.array_equal(result.goals[0].start, first["achieved_goal"])
    assert np.array_equal(result.goals[0].goal, first["desired_goal"])
    assert evaluate_agent(agent, env, 2).goals == []  # only when asked for


def test_enjoy_refuses_goal_misses_for_an_env_without_a_distance_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    HER("MultiInputPolicy", BitFlippingEnv(n_bits=15), "dqn").save(tmp_path / "agent.zip")
    status = cli.main(
        ["enjoy", "--env", "BitFlipping-v0", "-i", str(tmp_path / "agent.zip"), "--goal-misses"]
    )
    assert status == 2
    assert "--goal-misses needs an env whose goals are positions" in capsys.readouterr().err


@ROBOTICS[0]
@ROBOTICS[1]
def test_enjoy_reports_the_goal_misses_of_a_fetch_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from her_wrap.envs import make_goal_env

    HER("MultiInputPolicy", make_goal_env("FetchReach-v4"), "ddpg").save(tmp_path / "agent.zip")
    status = cli.main(
        ["enjoy", "--env", "FetchReach-v4", "-i", str(tmp_path / "agent.zip"), "-n", "8", "--goal-misses"]
    )
    out = capsys.readouterr().out
    assert status == 0
    reached = int(out.split("Goals reached (within 0.05 of the goal): ")[1].split(" of 8")[0])
    assert f"success rate {reached / 8:.3f} ({reached}/8 episodes)" in out  # the env's own verdict agrees
    assert sum(line.startswith("| quarter") for line in out.splitlines()) == 4


def _core_buffer_with_episodes(episodes: int):
    """A numpy-core buffer too small for all of ``episodes`` 3-step episodes: episode ``e`` starts at
    ``(e, 0)``, ends at ``(e, 3)`` and was given the goal ``(e, 9)``."""
    from her_wrap import HindsightReplayBuffer

    buffer = HindsightReplayBuffer(
        size=10,
        env_dict={"obs": {"shape": 2}, "act": {"shape": 1}, "next_obs": {"shape": 2}},
        max_episode_len=5,
        reward_func=lambda state, action, goal: -(np.linalg.norm(state - goal, axis=-1) > 0.1),
    )
    step = np.array([0.0, 1.0])
    for episode in range(episodes):
        state = np.array([episode, 0.0])
        for _ in range(3):
            buffer.add(obs=state, act=np.zeros(1), next_obs=state + step)
            state = state + step
        buffer.on_episode_end(np.array([episode, 9.0]))
    buffer.add(obs=np.array([99.0, 0.0]), act=np.zeros(1), next_obs=np.array([99.0, 1.0]))  # in progress
    return buffer


def test_stored_episode_goals_reads_the_ended_episodes_a_buffer_still_holds_oldest_first() -> None:
    from her_wrap.runs.enjoy import stored_episode_goals

    stored = stored_episode_goals(_core_buffer_with_episodes(6).replay)
    assert 1 <= len(stored) < 6  # the ring dropped the oldest
    kept = range(6 - len(stored), 6)
    assert [episode.start.tolist() for episode in stored] == [[e, 0.0] for e in kept]
    assert [episode.end.tolist() for episode in stored] == [[e, 3.0] for e in kept]
    assert [episode.goal.tolist() for episode in stored] == [[e, 9.0] for e in kept]


def test_replay_goals_script_reports_a_saved_buffer_and_refuses_other_pickles(tmp_path: Path) -> None:
    import pickle
    import subprocess
    import sys
    from types import SimpleNamespace

    script = Path(__file__).resolve().parents[2] / "scripts" / "replay_goals.py"
    replay = _core_buffer_with_episodes(2).replay
    replay.reward_fn = None  # as HER.save_replay_buffer leaves the goal functions out (this one is a lambda)
    with (tmp_path / "buffer.pkl").open("wb") as file:
        pickle.dump(SimpleNamespace(replay=replay), file)
    with (tmp_path / "other.pkl").open("wb") as file:
        pickle.dump({"not": "a buffer"}, file)
    run = [sys.executable, str(script), "--threshold", "0.5"]
    completed = subprocess.run(
        [*run, str(tmp_path / "buffer.pkl")], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    # two episodes that ended 6 from their goals: none reached, each 6 short along the line to it
    assert (
        "2 episodes of" in completed.stdout
        and "Goals reached (within 0.5 of the goal): 0 of 2" in completed.stdout
    )
    assert "| short of the goal by more than 0.5 | 2 |" in completed.stdout
    refused = subprocess.run([*run, str(tmp_path / "other.pkl")], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "holds a dict, not one of her_wrap's replay buffers" in refused.stderr
