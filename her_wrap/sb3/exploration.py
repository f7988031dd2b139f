"""How HER's learners explore: random actions now and then, and a lean forward of DDPG's and TD3's actors.

:class:`RandomActionExploration` is mixed into a learner class (by
:func:`~her_wrap.sb3.train_steps.train_from_source_class`): at each exploration step, each env's action is
replaced, with probability :attr:`~her_wrap.sb3.update_options.UpdateOptions.random_action_prob`, by one
drawn uniformly from the action space (the HER paper's DDPG explores this way besides its noise). The
policy's prediction of those few actions runs on one torch thread (:func:`one_torch_thread`), through the
lean forward (:func:`exploration_actions`) where it covers the actor, with the same actions as SB3's
``predict``.

The lean forward: each exploration step asks the actor for one action per env, a forward pass of a few
rows through a 3 x 256 network, about a million floating-point operations. Through SB3's
``policy.predict`` it costs about ten times that compute: ``set_training_mode`` walks every module of the
policy, each observation key becomes a tensor of its own, then a dozen ``nn.Module`` calls run the
extractor and the network. On FetchPush that was 8% of a training run's time (docs/manipulation.md).

:func:`exploration_actions` computes the same actions, bit for bit, from the actor's own weights: the
observation keys are flattened and joined in numpy, then each ``Linear`` layer is one ``torch.addmm``
(what ``nn.Linear`` calls on a CPU) followed by its activation. It covers the actors SB3 builds for DDPG
and TD3 (:class:`~stable_baselines3.td3.policies.TD3Policy`): a flattening extractor over ``Box``
observations (``MlpPolicy``'s, or ``MultiInputPolicy``'s one flattening per key), then ``Linear`` layers
(each optionally followed by a ``LayerNorm``, as :mod:`her_wrap.sb3.policies` builds them) with ReLU, Tanh
or no activation, on the CPU. For anything else (SAC's stochastic actor, another
activation, image observations, a custom extractor or policy, a GPU, a forward hook on the actor) it
returns None and the caller keeps SB3's path.

The policy is left in whatever training mode it has: the covered networks hold no dropout or batch
normalization, so the mode changes nothing.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.policies import BaseModel, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor
from stable_baselines3.td3.policies import Actor, TD3Policy
from torch.nn.modules import module as torch_module

from her_wrap.sb3.policies import AutocastHiddenNetwork, LayerNormPolicy
from her_wrap.sb3.update_options import UpdateOptions

#: The activations the lean forward applies in place, by module class.
_ACTIVATIONS: dict[type, Callable[[th.Tensor], th.Tensor]] = {th.nn.ReLU: th.relu_, th.nn.Tanh: th.tanh_}


@dataclass(frozen=True)
class _Layer:
    weight: th.Tensor
    bias: th.Tensor | None
    activation: Callable[[th.Tensor], th.Tensor] | None
    norm: th.nn.LayerNorm | None = None


@dataclass(frozen=True)
class ActorPlan:
    """What the lean forward of one actor needs.

    :param keys: the observation keys in the extractor's order, or None for a flat ``Box`` observation
    :param shapes: each key's (or the flat observation's) shape in the observation space
    :param layers: the network's ``Linear`` layers, each with the activation that follows it
    :param hooks: the forward hook registries of every module of the actor, then torch's global ones: a
        hook registered later lands in one of them
    :param float32_below: for a network with lower-precision hidden layers
        (:class:`~her_wrap.sb3.policies.AutocastHiddenNetwork`), the batch size from which it autocasts: the
        lean forward (float32) covers smaller batches only; None for a float32 network
    """

    keys: tuple[str, ...] | None
    shapes: tuple[tuple[int, ...], ...]
    layers: tuple[_Layer, ...]
    hooks: tuple[Mapping[Any, Any], ...]
    float32_below: int | None = None

    def hooked(self) -> bool:
        """Whether a forward hook is registered on one of the actor's modules, or on every module."""
        return any(self.hooks)


def _hook_registries(actor: th.nn.Module) -> tuple[Mapping[Any, Any], ...]:
    registries: list[Mapping[Any, Any]] = []
    for module in actor.modules():
        registries += [module._forward_hooks, module._forward_pre_hooks]
    return (*registries, torch_module._global_forward_hooks, torch_module._global_forward_pre_hooks)


#: policy -> (its actor's modules when the plan was made, the plan or None): planning walks the policy's
#: modules, which costs more than the forward itself.
_PLANS: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], ActorPlan | None]] = weakref.WeakKeyDictionary()


def _plain_box(space: spaces.Space, normalize_images: bool) -> bool:
    """Whether SB3's preprocessing of ``space`` is a cast to float32 and nothing else."""
    return isinstance(space, spaces.Box) and not (
        normalize_images and is_image_space(space, check_channels=False)
    )


def _flattens_rows(module: th.nn.Module) -> bool:
    """Whether ``module`` is an ``nn.Flatten`` that keeps the first axis (one row per observation)."""
    return type(module) is th.nn.Flatten and (module.start_dim, module.end_dim) == (1, -1)


def _layers(network: th.nn.Module) -> tuple[_Layer, ...] | None:
    """The ``Linear`` layers of a ``Sequential`` of ``Linear``, LayerNorm and ReLU / Tanh modules, or None.

    Each ``Linear`` may be followed by one ``LayerNorm``, then by one activation, in that order. An
    :class:`~her_wrap.sb3.policies.AutocastHiddenNetwork` is read as the ``Sequential`` it runs for small
    batches.
    """
    if not isinstance(network, th.nn.Sequential) or type(network) not in (
        th.nn.Sequential,
        AutocastHiddenNetwork,
    ):
        return None
    layers: list[_Layer] = []
    for module in network:
        last = layers[-1] if layers else None
        if type(module) is th.nn.Linear:
            layers.append(_Layer(module.weight, module.bias, None))
        elif type(module) in _ACTIVATIONS and last is not None and last.activation is None:
            layers[-1] = _Layer(last.weight, last.bias, _ACTIVATIONS[type(module)], last.norm)
        elif (
            type(module) is th.nn.LayerNorm
            and last is not None
            and last.norm is None
            and last.activation is None
        ):
            layers[-1] = _Layer(last.weight, last.bias, None, module)
        else:
            return None
    return tuple(layers) if layers else None


def _child(module: Any, name: str) -> Any:
    # A module's submodules sit in its _modules dict; reading it skips nn.Module.__getattr__'s slow path.
    children = getattr(module, "_modules", None)
    return children.get(name) if isinstance(children, dict) else getattr(module, name, None)


def _modules(policy: Any) -> tuple[Any, ...]:
    """What a plan reads from ``policy``: replacing any of them makes it plan again."""
    actor = _child(policy, "actor")
    return (actor, _child(actor, "mu"), _child(actor, "features_extractor"))


def actor_plan(policy: Any) -> ActorPlan | None:
    """The lean forward's plan for ``policy``'s actor, or None when the lean forward does not cover it.

    The plan is made once per policy, and made again when its actor, network or extractor is replaced.

    :param policy: a learner's policy (``model.policy``)
    """
    if not isinstance(policy, th.nn.Module):  # every SB3 policy is one (and weakly referable)
        return None
    modules = _modules(policy)
    cached = _PLANS.get(policy)
    if cached is not None and all(a is b for a, b in zip(cached[0], modules, strict=True)):
        plan = cached[1]
    else:
        plan = _make_plan(policy)
        _PLANS[policy] = (modules, plan)
    # A policy moved to a GPU keeps its modules; its weights change device. A hook expects its call.
    if plan is not None and (plan.layers[0].weight.device.type != "cpu" or plan.hooked()):
        return None
    return plan


def _make_plan(policy: Any) -> ActorPlan | None:
    if not isinstance(policy, TD3Policy) or type(policy).predict is not BasePolicy.predict:
        return None
    # LayerNormPolicy's _predict differs only for greedy actions (its actor average); exploration is not.
    if (
        type(policy)._predict not in (TD3Policy._predict, LayerNormPolicy._predict)
        or not policy.squash_output
    ):
        return None
    actor = policy.actor
    if (
        type(actor).forward is not Actor.forward
        or type(actor).extract_features is not BaseModel.extract_features
    ):
        return None
    if not isinstance(policy.action_space, spaces.Box):  # the device is checked at every call
        return None
    layers = _layers(actor.mu)
    if layers is None:
        return None
    extractor = actor.features_extractor
    space = actor.observation_space
    keys: tuple[str, ...] | None
    shapes: tuple[tuple[int, ...], ...]
    if type(extractor) is FlattenExtractor and _flattens_rows(extractor.flatten):
        if not _plain_box(space, actor.normalize_images):
            return None
        keys, shapes = None, (tuple(space.shape or ()),)
    elif type(extractor) is CombinedExtractor and isinstance(space, spaces.Dict):
        keys = tuple(extractor.extractors.keys())
        for key in keys:
            if not _flattens_rows(extractor.extractors[key]):
                return None
            if not _plain_box(space[key], actor.normalize_images):
                return None
        shapes = tuple(tuple(space[key].shape or ()) for key in keys)
    else:
        return None
    float32_below = actor.mu.float32_below if type(actor.mu) is AutocastHiddenNetwork else None
    return ActorPlan(keys, shapes, layers, _hook_registries(actor), float32_below)


def _rows(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """A vectorized observation (or key) as a 2-D array of one flat row per env, or None if not vectorized."""
    array = np.asarray(value)
    if array.ndim != len(shape) + 1 or array.shape[1:] != shape:
        return None
    return array.reshape(array.shape[0], -1)


def exploration_actions(policy: Any, observation: np.ndarray | Mapping[str, np.ndarray]) -> np.ndarray | None:
    """``policy.predict(observation)[0]`` for a vectorized observation (one row per env), by the lean forward.

    :param policy: a learner's policy
    :param observation: a VecEnv's observation: an array, or a dict of arrays, with the envs along axis 0
    :return: the actions, in the action space's bounds (as SB3's ``predict`` returns them), or None when
        :func:`actor_plan` does not cover the policy or the observation is not vectorized: then the caller
        predicts the SB3 way
    """
    plan = actor_plan(policy)
    if plan is None:
        return None
    if plan.keys is None:
        if isinstance(observation, Mapping):
            return None
        parts = [_rows(observation, plan.shapes[0])]
    else:
        if not isinstance(observation, Mapping) or any(key not in observation for key in plan.keys):
            return None
        parts = [_rows(observation[key], shape) for key, shape in zip(plan.keys, plan.shapes, strict=True)]
    if any(part is None for part in parts) or len({part.shape[0] for part in parts}) != 1:  # type: ignore[union-attr]
        return None
    if plan.float32_below is not None and parts[0].shape[0] >= plan.float32_below:  # type: ignore[union-attr]
        return None  # the network autocasts a batch this large
    # float32 as SB3's preprocessing casts it (one rounding from float64, the same in numpy and torch).
    rows = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)  # type: ignore[arg-type]
    features = th.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
    with th.no_grad():
        for layer in plan.layers:
            if layer.bias is None:
                features = features @ layer.weight.t()
            else:
                features = th.addmm(layer.bias, features, layer.weight.t())
            if layer.norm is not None:  # what nn.LayerNorm.forward calls
                norm = layer.norm
                features = F.layer_norm(features, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
            if layer.activation is not None:
                features = layer.activation(features)
    actions = features.numpy().reshape((-1, *policy.action_space.shape))
    return policy.unscale_action(actions)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch intra-op thread, then give torch back its thread count.

    A forward pass of a few observations (one row per env) is too small to split. On a loaded machine two
    threads made it 2-3x slower than one, waiting for a second thread that had lost its core; on an idle
    machine the two ran alike (docs/manipulation.md, "Using both cores"). The gradient steps, on batches of
    thousands, keep every thread.
    """
    threads = th.get_num_threads()
    if threads == 1:
        yield
        return
    th.set_num_threads(1)
    try:
        yield
    finally:
        th.set_num_threads(threads)


class RandomActionExploration:
    """Makes a continuous-action learner's exploration take uniformly random actions now and then.

    The learner's own ``_sample_action`` (policy, action noise, ``learning_starts``) picks the actions
    first, predicting on one torch thread (:func:`one_torch_thread`) and, for the actors it covers, by
    :func:`exploration_actions`; then each env's action is replaced with
    probability ``update_options.random_action_prob``. The draws come from a generator seeded with the
    learner's ``seed``, so a seeded run repeats.
    """

    update_options: UpdateOptions = UpdateOptions()
    _random_action_rng: np.random.Generator | None = None
    _exploring: bool = False

    def _sample_action(
        self, learning_starts: int, action_noise: Any = None, n_envs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        self._exploring = True
        try:
            with one_torch_thread():
                actions, buffer_actions = super()._sample_action(learning_starts, action_noise, n_envs)  # type: ignore[misc]
        finally:
            self._exploring = False
        probability = self.update_options.random_action_prob
        if probability > 0:
            if self._random_action_rng is None:
                self._random_action_rng = np.random.default_rng(self.seed)  # type: ignore[attr-defined]
            rng = self._random_action_rng
            replaced = rng.random(n_envs) < probability
            if replaced.any():
                # Uniform in the policy's [-1, 1] scale (what the buffer stores), then in the env's bounds.
                random_scaled = rng.uniform(-1.0, 1.0, size=(int(replaced.sum()), *buffer_actions.shape[1:]))
                buffer_actions = buffer_actions.copy()
                buffer_actions[replaced] = random_scaled.astype(buffer_actions.dtype)
                actions = self.policy.unscale_action(buffer_actions)  # type: ignore[attr-defined]
        return actions, buffer_actions

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[Any, Any]:
        """The learner's ``predict``; while exploring, the lean forward where it covers the actor."""
        if self._exploring and state is None:
            actions = exploration_actions(self.policy, observation)  # type: ignore[attr-defined]
            if actions is not None:
                return actions, None
        return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]

    def _excluded_save_params(self) -> list[str]:
        # The generator is seeded again after a load: never pickle it into the model zip.
        return [*super()._excluded_save_params(), "_random_action_rng", "_exploring"]  # type: ignore[misc]
