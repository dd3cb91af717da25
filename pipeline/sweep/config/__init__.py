"""The sweep's configuration, by concern:

- ``schema``: ``SweepConfig``, the structured config Hydra composes ``conf/config.yaml``
  over (every key and its meaning), and where the project's configs are (``CONFIG_DIR``:
  ``conf/``; ``SHIPPED_CLUSTERS``: ``dask_cluster.yaml``);
- ``clusters``: the ``cluster`` group, read from ``dask_cluster.yaml``, and its checks;
- ``validation``: ``ConfigError`` and the checks every sweep kind's keys go through (each
  kind checks its own section: ``pipeline.sweep.kinds``);
- ``compose``: Hydra's side: registration, replacing overrides, composition;
- ``specs``: the relational specs of ``conf/relational``.
"""

from pipeline.sweep.config.compose import OverrideError, compose, register, replaceable
from pipeline.sweep.config.schema import CONFIG_DIR, SHIPPED_CLUSTERS, SweepConfig, sweep_config
from pipeline.sweep.config.validation import ConfigError, as_dict, check_list, check_writable

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
    "register",
    "replaceable",
    "sweep_config",
]
