"""One update of each learner on a CPU: PyTorch (stable-baselines3) against JAX (SBX).

What is measured and the options: ``lab/benchmarks/torch_vs_jax.py`` (``--help`` prints it).
"""

import _repository  # noqa: F401 (lab/ beside scripts/, on the path)

from lab.benchmarks.torch_vs_jax import main

if __name__ == "__main__":
    main()
