"""Flatten a goal env's dict observation into one vector, and back.

A goal env observes ``{"observation", "achieved_goal", "desired_goal"}``; a policy that takes one flat
vector (stable-baselines3's ``MlpPolicy``) sees the three parts concatenated, always in the order
``observation, achieved_goal, desired_goal`` (:data:`GOAL_KEYS`), whatever order the env's dict uses.

:class:`GoalObservationLayout` is the plain, picklable, JSON-able description of that layout: a model can
save it and flatten dict observations in ``predict`` after a load, without the env.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from her_wrap.envs.checks import GOAL_KEYS, check_goal_env

SubspaceKind = Literal["box", "multi_binary", "discrete"]


@dataclass(frozen=True)
class GoalKeyLayout:
    """Where and how one key of the goal dict sits in the flat vector.

    :param name: the dict key
    :param kind: ``"box"`` and ``"multi_binary"`` are flattened as they are; ``"discrete"`` is one-hot
        encoded (``size`` entries) and decoded with ``argmax``
    :param shape: shape of one value of the key (``()`` for a Discrete)
    :param dtype: numpy dtype name of the key's values (``"float32"``, ``"int8"``, ``"int64"``...)
    :param size: number of entries the key takes in the flat vector
    :param discrete_start: ``start`` of a ``spaces.Discrete`` (its values are ``start .. start + n - 1``)
    """

    name: str
    kind: SubspaceKind
    shape: tuple[int, ...]
    dtype: str
    size: int
    discrete_start: int = 0

    @classmethod
    def from_space(cls, name: str, space: spaces.Space[Any]) -> GoalKeyLayout:
        """Describe one sub-space of the goal dict.

        :param name: the dict key
        :param space: a ``Box`` (any shape), ``MultiBinary`` or ``Discrete``
        :return: its layout
        :raises TypeError: for any other space, naming the fix
        """
        dtype = np.dtype(space.dtype).name
        if isinstance(space, spaces.Box):
            return cls(name, "box", space.shape, dtype, int(np.prod(space.shape)))
        if isinstance(space, spaces.MultiBinary):
            return cls(name, "multi_binary", space.shape, dtype, int(np.prod(space.shape)))
        if isinstance(space, spaces.Discrete):
            return cls(name, "discrete", (), dtype, int(space.n), int(space.start))
        raise TypeError(
            f"observation_space[{name!r}] is a {type(space).__name__}; HERGoalEnvWrapper flattens only Box, "
            "MultiBinary and Discrete sub-spaces. Fix: give that key a Box space "
            "(or keep the dict and use a policy that takes dicts, such as MultiInputPolicy)."
        )

    def encode(self, value: npt.NDArray[Any], batch_shape: tuple[int, ...], dtype: str) -> npt.NDArray[Any]:
        """Turn values of this key into flat rows.

        :param value: values of shape ``batch_shape + self.shape``
        :param batch_shape: leading batch dimensions (``()`` for a single observation)
        :param dtype: dtype of the flat vector
        :return: array of shape ``batch_shape + (self.size,)``
        """
        if self.kind == "discrete":
            index = value.astype(np.int64) - self.discrete_start
            if np.any((index < 0) | (index >= self.size)):
                raise ValueError(
                    f"observation[{self.name!r}] holds values outside the Discrete range "
                    f"[{self.discrete_start}, {self.discrete_start + self.size})."
                )
            return np.eye(self.size, dtype=dtype)[index]
        return value.reshape((*batch_shape, self.size)).astype(dtype)

    def decode(self, part: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Turn flat rows back into values of this key (inverse of :meth:`encode`).

        :param part: this key's slice of the flat vector, shape ``batch_shape + (self.size,)``
        :return: values of shape ``batch_shape + self.shape`` and dtype ``self.dtype``
        """
        if self.kind == "discrete":
            return (np.argmax(part, axis=-1) + self.discrete_start).astype(self.dtype)
        return part.reshape(part.shape[:-1] + self.shape).astype(self.dtype)


@dataclass(frozen=True)
class GoalObservationLayout:
    """The layout of a flattened goal observation: which key sits where, and how to get it back.

    Keys appear in the order of :data:`GOAL_KEYS`: ``observation``, ``achieved_goal``, ``desired_goal``.
    The flat dtype is ``float64`` when every part is a ``float64`` Box, else ``float32``.

    :param keys: one :class:`GoalKeyLayout` per key, in flat order
    :param flat_dtype: numpy dtype name of the flat vector
    """

    keys: tuple[GoalKeyLayout, ...]
    flat_dtype: str

    @classmethod
    def from_space(cls, space: spaces.Dict) -> GoalObservationLayout:
        """Describe how a goal env's dict observation space flattens.

        :param space: a ``spaces.Dict`` with exactly the keys of :data:`GOAL_KEYS`
        :return: the layout
        :raises ValueError: when the dict has keys beyond the three goal keys (they would be lost)
        :raises TypeError: for a sub-space that cannot be flattened
        """
        extra = sorted(set(space.spaces) - set(GOAL_KEYS))
        if extra:
            raise ValueError(
                f"observation_space has keys {extra} beyond {list(GOAL_KEYS)}; flattening would drop them. "
                "Fix: fold them into 'observation', or keep the dict and use MultiInputPolicy."
            )
        keys = tuple(GoalKeyLayout.from_space(name, space[name]) for name in GOAL_KEYS)
        all_float64 = all(key.kind == "box" and key.dtype == "float64" for key in keys)
        return cls(keys, "float64" if all_float64 else "float32")

    @property
    def key_order(self) -> tuple[str, ...]:
        """The key names in flat order."""
        return tuple(key.name for key in self.keys)

    @property
    def key_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of one value of each key (``()`` for a Discrete)."""
        return {key.name: key.shape for key in self.keys}

    @property
    def key_slices(self) -> dict[str, slice]:
        """Where each key sits in the last axis of the flat vector."""
        ends = np.cumsum([key.size for key in self.keys])
        return {
            key.name: slice(int(end) - key.size, int(end)) for key, end in zip(self.keys, ends, strict=True)
        }

    @property
    def flat_size(self) -> int:
        """Length of the flat vector."""
        return sum(key.size for key in self.keys)

    def flatten(self, obs_dict: dict[str, Any]) -> npt.NDArray[Any]:
        """Concatenate a goal observation dict into flat vectors.

        :param obs_dict: one observation (each value of its key's shape) or a batch (each value with the
            same leading batch dimensions, e.g. ``(B, n)`` for a ``(n,)`` key and ``(B,)`` for a Discrete)
        :return: array of shape ``batch_shape + (flat_size,)``, keys in :attr:`key_order`
        :raises ValueError: when a value's trailing shape or the keys' batch shapes do not match
        """
        values = [np.asarray(obs_dict[key.name]) for key in self.keys]
        batch_shapes = {self._batch_shape(key, value) for key, value in zip(self.keys, values, strict=True)}
        if len(batch_shapes) != 1:
            raise ValueError(
                f"the keys of the observation dict have different batch shapes {sorted(batch_shapes)}."
            )
        (batch_shape,) = batch_shapes
        parts = [
            key.encode(value, batch_shape, self.flat_dtype)
            for key, value in zip(self.keys, values, strict=True)
        ]
        return np.concatenate(parts, axis=-1)

    def unflatten(self, flat: npt.ArrayLike) -> dict[str, npt.NDArray[Any]]:
        """Split flat vectors back into a goal observation dict (inverse of :meth:`flatten`).

        :param flat: shape ``(flat_size,)`` or ``batch_shape + (flat_size,)``
        :return: ``{key: values of shape batch_shape + key shape, in the key's own dtype}``
        """
        array = np.asarray(flat)
        if array.ndim == 0 or array.shape[-1] != self.flat_size:
            raise ValueError(
                f"expected flat observations with last dimension {self.flat_size}, got {array.shape}."
            )
        slices = self.key_slices
        return {key.name: key.decode(array[..., slices[key.name]]) for key in self.keys}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable description (lists, strings and ints only).

        :return: the layout as a plain dict; :meth:`from_dict` rebuilds it
        """
        return {
            "keys": [{**asdict(key), "shape": list(key.shape)} for key in self.keys],
            "flat_dtype": self.flat_dtype,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GoalObservationLayout:
        """Rebuild a layout from :meth:`to_dict`'s output (also after a JSON round trip).

        :param data: the dict
        :return: the layout
        """
        keys = tuple(GoalKeyLayout(**{**key, "shape": tuple(key["shape"])}) for key in data["keys"])
        return cls(keys, data["flat_dtype"])

    @staticmethod
    def _batch_shape(key: GoalKeyLayout, value: npt.NDArray[Any]) -> tuple[int, ...]:
        batch_ndim = value.ndim - len(key.shape)
        if batch_ndim < 0 or value.shape[batch_ndim:] != key.shape:
            raise ValueError(
                f"observation[{key.name!r}] has shape {value.shape}; expected {key.shape} "
                f"or (batch..., {', '.join(map(str, key.shape))})."
            )
        return value.shape[:batch_ndim]


class HERGoalEnvWrapper(gymnasium.ObservationWrapper[npt.NDArray[Any], Any, dict[str, Any]]):
    """Present a goal env's dict observation as one flat ``Box``, for policies that take vectors.

    The flat vector is ``observation``, ``achieved_goal``, ``desired_goal`` concatenated in that order
    (:attr:`key_order`, :attr:`key_slices`). Box parts are flattened, MultiBinary parts cast, Discrete parts
    one-hot encoded. The flat bounds are the parts' bounds concatenated; the dtype is ``float32`` unless
    every part is a ``float64`` Box.

    ``compute_reward`` (and ``compute_terminated`` when the env has one) go to the wrapped env's
    ``unwrapped`` methods and take goals, not flat observations: split with :meth:`convert_obs_to_dict`.

    :param env: a goal env (see :func:`~her_wrap.envs.check_goal_env`)
    """

    def __init__(self, env: gymnasium.Env[dict[str, Any], Any]) -> None:
        super().__init__(env)
        check_goal_env(env)
        dict_space = env.observation_space
        assert isinstance(dict_space, spaces.Dict)  # check_goal_env has raised otherwise
        self.layout = GoalObservationLayout.from_space(dict_space)
        self.observation_space = flat_observation_space(dict_space)

    @property
    def key_order(self) -> tuple[str, ...]:
        """The key names in flat order: ``("observation", "achieved_goal", "desired_goal")``."""
        return self.layout.key_order

    @property
    def key_slices(self) -> dict[str, slice]:
        """Where each key sits in the last axis of a flat observation."""
        return self.layout.key_slices

    @property
    def key_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of one value of each key in the env's dict (``()`` for a Discrete)."""
        return self.layout.key_shapes

    def observation(self, observation: dict[str, Any]) -> npt.NDArray[Any]:
        """Flatten the wrapped env's observation (called by ``reset`` and ``step``).

        :param observation: the env's dict observation
        :return: the flat observation
        """
        return self.convert_dict_to_obs(observation)

    def convert_dict_to_obs(self, obs_dict: dict[str, Any]) -> npt.NDArray[Any]:
        """Flatten one goal observation dict or a batch of them (see :meth:`GoalObservationLayout.flatten`).

        :param obs_dict: the dict; values may carry leading batch dimensions
        :return: shape ``batch_shape + (flat_size,)``
        """
        return self.layout.flatten(obs_dict)

    def convert_obs_to_dict(self, flat: npt.ArrayLike) -> dict[str, npt.NDArray[Any]]:
        """Split flat observations back into a dict (see :meth:`GoalObservationLayout.unflatten`).

        :param flat: shape ``(flat_size,)`` or ``batch_shape + (flat_size,)``
        :return: the dict, each value in its key's shape and dtype
        """
        return self.layout.unflatten(flat)

    def compute_reward(self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, info: Any) -> Any:
        """The wrapped env's ``unwrapped.compute_reward``, unchanged.

        :param achieved_goal: achieved goals, as the env takes them (not flat observations)
        :param desired_goal: desired goals
        :param info: info dict(s), passed on
        :return: what the env returns
        """
        return self.env.unwrapped.compute_reward(achieved_goal, desired_goal, info)  # type: ignore[attr-defined]

    @property
    def compute_terminated(self) -> Any:
        """The wrapped env's ``unwrapped.compute_terminated``, when it has one.

        A property, so that ``hasattr(wrapper, "compute_terminated")`` is ``False`` when the env has none
        and callers can fall back to their own termination rule.

        :raises AttributeError: when the env has no ``compute_terminated``
        """
        unwrapped = self.env.unwrapped
        if not hasattr(unwrapped, "compute_terminated"):
            raise AttributeError(f"{type(unwrapped).__name__} has no compute_terminated.")
        return unwrapped.compute_terminated


def flat_observation_space(dict_space: spaces.Dict) -> spaces.Box:
    """The flat ``Box`` of a goal dict space: sub-space bounds concatenated in :attr:`key_order`.

    :param dict_space: goal observation space (see :meth:`GoalObservationLayout.from_space`)
    :return: a Box of :attr:`GoalObservationLayout.flat_size` entries in the layout's flat dtype
    """
    layout = GoalObservationLayout.from_space(dict_space)
    low, high = zip(*(_flat_bounds(dict_space[key.name], key.size) for key in layout.keys), strict=True)
    flat_dtype = np.dtype(layout.flat_dtype)
    return spaces.Box(
        np.concatenate(low).astype(flat_dtype), np.concatenate(high).astype(flat_dtype), dtype=flat_dtype
    )


def layout_space(layout: GoalObservationLayout) -> spaces.Dict:
    """The dict observation space a flat layout was made from (bounds aside: boxes span their dtype).

    :param layout: the key layout of flat observations
    :return: a Dict space with one sub-space per key, of the key's shape and dtype; a float box is
        unbounded, an integer box (images: ``uint8``) spans its dtype's range, a boolean one [0, 1]
    """
    parts: dict[str, spaces.Space[Any]] = {}
    for key in layout.keys:
        if key.kind == "discrete":
            parts[key.name] = spaces.Discrete(key.size, start=key.discrete_start)
        else:
            dtype = np.dtype(key.dtype)
            parts[key.name] = spaces.Box(*_dtype_range(dtype), key.shape, dtype=dtype)
    return spaces.Dict(parts)


def _dtype_range(dtype: np.dtype[Any]) -> tuple[Any, Any]:
    """The widest bounds a box of ``dtype`` takes."""
    if np.issubdtype(dtype, np.bool_):
        return 0, 1
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return limits.min, limits.max
    return -np.inf, np.inf


def _flat_bounds(
    space: spaces.Space[Any], size: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Flat lower and upper bounds of one sub-space of ``size`` flat entries (binary and one-hot: [0, 1])."""
    if isinstance(space, spaces.Box):
        return space.low.reshape(-1).astype(np.float64), space.high.reshape(-1).astype(np.float64)
    return np.zeros(size), np.ones(size)
