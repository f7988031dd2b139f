"""The bit-flipping task of the HER paper (Andrychowicz et al. 2017, arXiv:1707.01495, section 3.1).

The state is a vector of ``n_bits`` bits; each step flips bits; the episode succeeds when the state equals
the goal. The reward is sparse (``-1`` until the goal is reached), which makes the task unlearnable for
plain DQN beyond about 15 bits and easy with HER: the textbook test of a HER implementation.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

#: What ``compute_reward`` and friends accept as their ``info`` argument; it is ignored.
GoalInfo = dict[str, Any] | list[dict[str, Any]] | npt.NDArray[Any] | None

#: An observation part: a bit vector (default), an integer (``discrete_obs_space``) or an image.
Encoded = npt.NDArray[Any] | np.int64

_IMAGE_SIDE = 36  # the smallest image stable-baselines3's default CNN takes
_MAX_DISCRETE_BITS = 62  # 2 ** n_bits must fit in an int64


class BitFlippingEnv(gymnasium.Env[dict[str, Any], Any]):
    """Flip bits until the state equals the goal: the HER paper's bit-flipping task as a goal env.

    Observations are dicts ``{"observation", "achieved_goal", "desired_goal"}``; ``observation`` and
    ``achieved_goal`` are both the current state, ``desired_goal`` the goal. Each part is, by default, a
    ``spaces.Box(0, 1, (n_bits,), dtype=np.float32)`` holding 0.0 or 1.0 (not ``MultiBinary``), so
    stable-baselines3's ``MultiInputPolicy`` takes the dict directly and ``MlpPolicy`` takes it after
    :class:`~her_wrap.envs.HERGoalEnvWrapper`. Two other encodings, stable-baselines3's options of the same
    names, test learners on other spaces:

    - ``discrete_obs_space=True``: each part is one integer of ``spaces.Discrete(2 ** n_bits)`` whose
      binary digits are the bits, bit ``i`` worth ``2 ** i``;
    - ``image_obs_space=True``: each part is a ``uint8`` image ``spaces.Box(0, 255, (1, 36, 36))``
      (``(36, 36, 1)`` when not ``channel_first``) whose first ``n_bits`` pixels in row-major order are the
      bits (``0`` or ``255``) and whose other pixels are ``0``.

    ``compute_reward``, ``compute_terminated`` and ``compute_truncated`` take goals in the encoding of the
    observations, one goal or a batch.

    Every episode starts from a random state and, unless ``fixed_goal``, a random goal, both drawn from the
    env's seeded ``self.np_random`` (``reset(seed=...)`` makes episodes reproducible); the start is redrawn
    until it differs from the goal, so no episode is solved before its first step.

    - reward: ``0.0`` when the state equals the goal after the step, else ``-1.0``;
    - ``terminated``: the state equals the goal (``info["is_success"]`` says the same);
    - ``truncated``: ``max_steps`` steps were taken. The env enforces this limit itself, so the registered
      ids carry no ``TimeLimit`` wrapper. On a last step that also succeeds both flags are ``True``.

    .. note:: stable-baselines (v2) and stable-baselines3 fix the goal to all ones; here that is the
        ``fixed_goal=True`` option and the default is the paper's random goal.

    :param n_bits: number of bits of the state and the goal
    :param continuous: ``False``: ``Discrete(n_bits)`` actions, action ``i`` flips bit ``i``. ``True``:
        ``Box(-1, 1, (n_bits,), float32)`` actions, every bit whose action component is ``> 0`` flips
    :param max_steps: steps before truncation; ``None`` means ``n_bits`` (enough to solve any episode)
    :param fixed_goal: use the all-ones goal in every episode instead of a random one
    :param discrete_obs_space: encode each part as an integer of ``Discrete(2 ** n_bits)`` (``n_bits <= 62``)
    :param image_obs_space: encode each part as a 36 x 36 one-channel ``uint8`` image (``n_bits <= 1296``)
    :param channel_first: image shape ``(1, 36, 36)`` (default) or ``(36, 36, 1)``; only read with
        ``image_obs_space``
    :param render_mode: ``None``, ``"ansi"`` (``render()`` returns a string), ``"human"`` (the same
        string is printed at every reset and step) or ``"rgb_array"`` (an image: the state's bits on the
        top row, the goal's below, a bit set is white; what SB3's ``make_vec_env`` asks for)
    """

    metadata = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        n_bits: int = 10,
        continuous: bool = False,
        max_steps: int | None = None,
        fixed_goal: bool = False,
        render_mode: str | None = None,
        discrete_obs_space: bool = False,
        image_obs_space: bool = False,
        channel_first: bool = True,
    ) -> None:
        if n_bits < 1:
            raise ValueError(f"n_bits must be at least 1, got {n_bits}.")
        if discrete_obs_space and image_obs_space:
            raise ValueError(
                "discrete_obs_space and image_obs_space exclude each other: choose one encoding."
            )
        if discrete_obs_space and n_bits > _MAX_DISCRETE_BITS:
            raise ValueError(
                f"discrete_obs_space encodes the state as one int64, so n_bits must be at most "
                f"{_MAX_DISCRETE_BITS}, got {n_bits}."
            )
        if image_obs_space and n_bits > _IMAGE_SIDE**2:
            raise ValueError(
                f"image_obs_space holds one bit per pixel of a {_IMAGE_SIDE} x {_IMAGE_SIDE} image, so n_bits "
                f"must be at most {_IMAGE_SIDE**2}, got {n_bits}."
            )
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be at least 1 (or None for n_bits), got {max_steps}.")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}."
            )
        self.n_bits = n_bits
        self.continuous = continuous
        self.max_steps = n_bits if max_steps is None else max_steps
        self.fixed_goal = fixed_goal
        self.render_mode = render_mode
        self.discrete_obs_space = discrete_obs_space
        self.image_obs_space = image_obs_space
        self.channel_first = channel_first
        self.image_shape = (1, _IMAGE_SIDE, _IMAGE_SIDE) if channel_first else (_IMAGE_SIDE, _IMAGE_SIDE, 1)

        part: spaces.Space[Any]
        if discrete_obs_space:
            part = spaces.Discrete(2**n_bits)
        elif image_obs_space:
            part = spaces.Box(0, 255, shape=self.image_shape, dtype=np.uint8)
        else:
            part = spaces.Box(0.0, 1.0, shape=(n_bits,), dtype=np.float32)
        self.observation_space: spaces.Dict = spaces.Dict(
            {"observation": part, "achieved_goal": part, "desired_goal": part}
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, shape=(n_bits,), dtype=np.float32)
            if continuous
            else spaces.Discrete(n_bits)
        )
        self.state = np.zeros(n_bits, dtype=np.float32)
        self.goal = np.ones(n_bits, dtype=np.float32)
        self.current_step = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Encoded], dict[str, Any]]:
        """Draw a new start state and goal (start != goal) and return the first observation.

        :param seed: seeds ``self.np_random`` (only when given, as gymnasium prescribes)
        :param options: unused
        :return: the observation dict and ``{"is_success": False}``
        """
        super().reset(seed=seed)
        self.goal = np.ones(self.n_bits, dtype=np.float32) if self.fixed_goal else self._random_bits()
        self.state = self._random_bits()
        while np.array_equal(self.state, self.goal):
            self.state = self._random_bits()
        self.current_step = 0
        self._render_human()
        return self._observation(), {"is_success": False}

    def step(
        self, action: int | np.integer[Any] | npt.NDArray[Any]
    ) -> tuple[dict[str, Encoded], float, bool, bool, dict[str, Any]]:
        """Flip the bits the action selects.

        :param action: a bit index (discrete) or a vector whose positive components select bits (continuous)
        :return: ``(observation, reward, terminated, truncated, {"is_success": terminated})``
        """
        flip = self._bits_to_flip(action)
        self.state[flip] = 1.0 - self.state[flip]
        self.current_step += 1
        observation = self._observation()
        reward = float(self.compute_reward(observation["achieved_goal"], observation["desired_goal"], None))
        terminated = reward == 0.0
        truncated = self.current_step >= self.max_steps
        self._render_human()
        return observation, reward, terminated, truncated, {"is_success": terminated}

    def compute_reward(
        self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, info: GoalInfo
    ) -> npt.NDArray[np.float32]:
        """Sparse reward, vectorized: ``0.0`` where the goals are equal, ``-1.0`` elsewhere.

        :param achieved_goal: one goal or a batch, in the observations' encoding: shape ``(n_bits,)`` or
            ``(B, n_bits)`` by default; an integer, ``(B,)`` or ``(B, 1)`` (as replay buffers store
            ``Discrete`` parts) with ``discrete_obs_space``; ``image_shape`` or ``(B, *image_shape)`` with
            ``image_obs_space``
        :param desired_goal: same shape as ``achieved_goal`` (or broadcastable to it)
        :param info: ignored (a dict, a list or array of dicts, or ``None``)
        :return: float32 rewards of the batch shape: shape ``()`` for one goal, ``(B,)`` for a batch
        """
        return np.where(self._goals_differ(achieved_goal, desired_goal), -1.0, 0.0).astype(np.float32)

    def compute_terminated(
        self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, info: GoalInfo
    ) -> npt.NDArray[np.bool_]:
        """Success, vectorized: ``True`` where the goals are equal (the episode ends there).

        :param achieved_goal: one goal or a batch, as for :meth:`compute_reward`
        :param desired_goal: same shape as ``achieved_goal`` (or broadcastable to it)
        :param info: ignored
        :return: bools of the batch shape
        """
        return ~self._goals_differ(achieved_goal, desired_goal)

    def compute_truncated(
        self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, info: GoalInfo
    ) -> npt.NDArray[np.bool_]:
        """Truncation never depends on the goal (the step limit does it), as in gymnasium-robotics' GoalEnv.

        :param achieved_goal: one goal or a batch
        :param desired_goal: same shape as ``achieved_goal``
        :param info: ignored
        :return: ``False`` for every goal, bools of the batch shape
        """
        return np.zeros_like(self._goals_differ(achieved_goal, desired_goal))

    def render(self) -> str | npt.NDArray[np.uint8] | None:  # type: ignore[override]
        """Show the state and the goal.

        :return: with ``render_mode="ansi"`` the bit strings; with ``"rgb_array"`` an image of shape
            ``(2 * cell, n_bits * cell, 3)`` (state on top, goal below, set bits white); else ``None``
        """
        if self.render_mode == "ansi":
            return self._describe()
        if self.render_mode == "rgb_array":
            cell = 8
            rows = np.stack([self.state, self.goal]).astype(np.uint8) * 255
            image = np.repeat(np.repeat(rows, cell, axis=0), cell, axis=1)
            return np.repeat(image[:, :, None], 3, axis=2)
        return None

    def _random_bits(self) -> npt.NDArray[np.float32]:
        return self.np_random.integers(0, 2, size=self.n_bits).astype(np.float32)

    def _observation(self) -> dict[str, Encoded]:
        return {
            "observation": self._encode(self.state),
            "achieved_goal": self._encode(self.state),
            "desired_goal": self._encode(self.goal),
        }

    def _encode(self, bits: npt.NDArray[np.float32]) -> Encoded:
        # Always a fresh object: callers keep observations, and the state changes in place at the next step.
        if self.discrete_obs_space:
            return np.int64(bits.astype(np.int64) @ (np.int64(1) << np.arange(self.n_bits, dtype=np.int64)))
        if self.image_obs_space:
            pixels = np.zeros(_IMAGE_SIDE**2, dtype=np.uint8)
            pixels[: self.n_bits] = bits.astype(np.uint8) * 255
            return pixels.reshape(self.image_shape)
        return bits.copy()

    def _bits_to_flip(self, action: int | np.integer[Any] | npt.NDArray[Any]) -> int | npt.NDArray[np.bool_]:
        if self.continuous:
            components = np.asarray(action, dtype=np.float32).reshape(-1)
            if components.shape != (self.n_bits,):
                raise ValueError(
                    f"expected a continuous action of shape ({self.n_bits},), got {components.shape}."
                )
            return components > 0
        index = int(np.asarray(action).item())
        if not 0 <= index < self.n_bits:
            raise ValueError(f"expected a discrete action in [0, {self.n_bits}), got {action!r}.")
        return index

    def _goals_differ(
        self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        achieved = self._comparable("achieved_goal", achieved_goal)
        desired = self._comparable("desired_goal", desired_goal)
        return np.asarray(np.any(achieved != desired, axis=-1))

    def _comparable(self, name: str, goal: npt.ArrayLike) -> npt.NDArray[Any]:
        """Goals in the observations' encoding as arrays of shape ``(*batch, k)``: two goals are equal when
        their last axes are (the bits; the integer, ``k = 1``; the bit pixels of an image)."""
        goal = np.asarray(goal)
        if self.discrete_obs_space:
            if goal.ndim >= 2 and goal.shape[-1] == 1:
                goal = goal[..., 0]  # a batch as replay buffers store Discrete parts: (B, 1)
            if goal.dtype.kind not in "iuf":
                raise ValueError(
                    f"{name} must hold integers of Discrete(2 ** {self.n_bits}), got {goal.dtype}."
                )
            return np.rint(goal)[..., None] if goal.dtype.kind == "f" else goal[..., None]
        if self.image_obs_space:
            if goal.ndim < 3 or goal.shape[-3:] != self.image_shape:
                raise ValueError(
                    f"{name} must have shape {self.image_shape} or (batch, *{self.image_shape}), got {goal.shape}."
                )
            return goal.reshape(*goal.shape[:-3], -1)[..., : self.n_bits]
        if goal.ndim == 0 or goal.shape[-1] != self.n_bits:
            raise ValueError(
                f"{name} must have shape ({self.n_bits},) or (batch, {self.n_bits}), got {goal.shape}."
            )
        return goal

    def _describe(self) -> str:
        def bits(vector: npt.NDArray[np.float32]) -> str:
            return "".join(str(int(bit)) for bit in vector)

        return f"step {self.current_step}/{self.max_steps} state {bits(self.state)} goal {bits(self.goal)}"

    def _render_human(self) -> None:
        if self.render_mode == "human":
            print(self._describe())
