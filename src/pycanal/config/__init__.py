"""Canal's configuration: ``conf/canal.properties`` + ``conf/<destination>/instance.properties``.

* :func:`parse_properties` / :func:`load_properties` -- Java ``.properties`` syntax;
* :class:`CanalConfig` -- a loaded, validated conf dir (``CanalConfig.load("conf")``;
  ``config["canal.port"]``, ``config.destinations``, ``config.instance("example")``);
* :class:`InstanceConfig` -- one destination's typed values with Canal's precedence;
* :class:`ConfigScanner` -- auto-scan: add / remove / reload events;
* :data:`KEYS` -- the schema (types, defaults, docs); see ``docs/configuration.md``.
"""

from .loader import CANAL_PROPERTIES, INSTANCE_PROPERTIES, CanalConfig, ConfigError, InstanceConfig, env_name
from .properties import PropertiesSyntaxError, load_properties, parse_properties
from .scanner import ConfigScanner, ScanEvent
from .schema import KEYS, Key, is_known

__all__ = [
    "CANAL_PROPERTIES",
    "INSTANCE_PROPERTIES",
    "KEYS",
    "CanalConfig",
    "ConfigError",
    "ConfigScanner",
    "InstanceConfig",
    "Key",
    "PropertiesSyntaxError",
    "ScanEvent",
    "env_name",
    "is_known",
    "load_properties",
    "parse_properties",
]
