"""The sweep's configuration, by concern:

- ``schema``: ``SweepConfig``, the structured config Hydra composes ``conf/config.yaml``
  over (every key and its meaning), and where the project's configs are (``CONFIG_DIR``:
  ``conf/``; ``SHIPPED_CLUSTERS``: ``dask_cluster.yaml``);
- ``clusters``: the ``cluster`` group, read from ``dask_cluster.yaml``, and its checks;
- ``errors``: ``ConfigError``, which every check raises;
- ``validation``: the checks every sweep kind's keys go through (each kind checks its own
  section: ``pipeline.sweep.kind.SweepKind.validate``);
- ``checks``: a composed config checked whole for the kind it names (``validate``);
- ``compose``: Hydra's side: registration, replacing overrides, composition;
- ``moved``: the methods kind's top-level keys of the old layout, accepted with one
  deprecation line and moved into its section ``methods``;
- ``specs``: the relational specs of ``conf/relational``.
"""

from pipeline.sweep.config.checks import for_config, validate
from pipeline.sweep.config.compose import OverrideError, compose, register, replaceable
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.schema import CONFIG_DIR, SHIPPED_CLUSTERS, SweepConfig, sweep_config
from pipeline.sweep.config.validation import as_dict, check_list, check_writable

__all__ = [
    "CONFIG_DIR",
    "SHIPPED_CLUSTERS",
    "ConfigError",
    "OverrideError",
    "SweepConfig",
    "as_dict",
    "check_list",
    "check_writable",
    "compose",
    "for_config",
    "register",
    "replaceable",
    "sweep_config",
    "validate",
]
