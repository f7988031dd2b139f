"""The benchmarks behind the docs' ``bench_*`` pages, each run as ``python scripts/bench_NAME.py``.

Each times her_wrap and its reference side by side in one run and prints the ratio, on the harness of
:mod:`lab.bench`: :mod:`~lab.benchmarks.replay` (replay buffers against SB3's and cpprb's),
:mod:`~lab.benchmarks.learning` (bit flipping against SB3's DQN + ``HerReplayBuffer``),
:mod:`~lab.benchmarks.end_to_end` (FetchReach against SB3's SAC + ``HerReplayBuffer``),
:mod:`~lab.benchmarks.env_phase` (env step and exploration action against the stock path),
:mod:`~lab.benchmarks.updates` (update cost against the CPU's matmul peak, 1 against 2 threads),
:mod:`~lab.benchmarks.laber` (sampling options against uniform sampling) and
:mod:`~lab.benchmarks.torch_vs_jax` (PyTorch learners against SBX's JAX ones).
"""
