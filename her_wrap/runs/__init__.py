"""Zoo-style runs: YAML configs and the ``her-wrap`` command (``train``, ``enjoy``, ``plot``, ``optimize``).

One job per module:

- configs: :mod:`~her_wrap.runs.yaml_io` (YAML with numbers such as ``1e6``),
  :mod:`~her_wrap.runs.zoo_translation` (the zoo's forms of an entry: ``"dict(...)"`` strings, never
  evaluated, HER's buffer keys, env ids of older versions, ``-params`` items),
  :mod:`~her_wrap.runs.model_classes` (``model_class`` names), :mod:`~her_wrap.runs.config` (files and entries, validated into a
  :class:`~her_wrap.runs.run_config.RunConfig`), :mod:`~her_wrap.runs.presets` (the shipped entries as
  ``HER`` keyword arguments);
- building a run: :mod:`~her_wrap.runs.env_factory` (env ids, checks, monitors),
  :mod:`~her_wrap.runs.model_factory` (a ``HER`` agent from a config);
- files of a run: :mod:`~her_wrap.runs.run_layout` (``logs/her/ENV_ID_N``), :mod:`~her_wrap.runs.atomic`
  (files a kill cannot corrupt), :mod:`~her_wrap.runs.checkpoints`;
- training: :mod:`~her_wrap.runs.callbacks` (greedy evaluations with :mod:`her_wrap.sb3.evaluation`);
- the subcommands: :mod:`~her_wrap.runs.train`, :mod:`~her_wrap.runs.enjoy`, :mod:`~her_wrap.runs.plot`,
  :mod:`~her_wrap.runs.optimize` (with :mod:`~her_wrap.runs.search_spaces`, :mod:`~her_wrap.runs.studies` and
  :mod:`~her_wrap.runs.study_storage`), and
  :mod:`~her_wrap.runs.cli`, which dispatches to them and turns the errors of
  :mod:`~her_wrap.runs.errors` into one line and a documented exit status.

Importing this package imports neither torch nor stable-baselines3; the subcommands do, when they run.
"""
