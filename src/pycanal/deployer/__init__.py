"""Canal's deployer: a conf dir made into a running server (``pycanal server``).

* :class:`Deployer` (:mod:`pycanal.deployer.controller`, Canal's ``CanalController``): the
  destinations of a conf dir built into instances of an embedded server, deployed through
  ZooKeeper HA when ``canal.zkServers`` is set, redeployed on conf changes (auto-scan);
* :class:`CanalLauncher` (:mod:`pycanal.deployer.launcher`): the deployer plus Canal's TCP protocol
  (or, with ``canal.serverMode = kafka`` or ``rabbitMQ``, the MQ workers of :mod:`pycanal.mq.starter`, settings from
  :mod:`pycanal.deployer.mq`) and the metrics endpoint, until SIGTERM.

It sits above everything it assembles (server, ha, instance, parse, meta, config).
"""

from pycanal._lazy import lazy_names

__all__ = ["CanalLauncher", "Deployer", "LauncherError", "build_instance"]

__getattr__ = lazy_names(
    __name__,
    {
        "CanalLauncher": "launcher",
        "Deployer": "controller",
        "LauncherError": "launcher",
        "build_instance": "controller",
    },
)
