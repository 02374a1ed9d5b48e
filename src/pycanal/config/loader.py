"""Loading a Canal conf dir: ``canal.properties`` + ``<destination>/instance.properties``.

Precedence (highest first), as in Canal (``CanalController.getProperty`` and the instance XML's
``PropertyPlaceholderConfigurer`` in ``SYSTEM_PROPERTIES_MODE_OVERRIDE``, whose system lookup is
``System.getProperty`` then ``System.getenv``):

1. ``overrides`` -- system-style overrides (Java's ``-Dkey=value``);
2. the environment: the exact key (``canal.instance.master.address=...``, as ``docker -e`` passes
   it), then, a pycanal extension for shells, the upper-case form with ``.`` as ``_``
   (``CANAL_INSTANCE_MASTER_ADDRESS``);
3. ``<destination>/instance.properties`` (instance configs only);
4. ``canal.properties``;
5. the schema default (Canal's XML ``${key:default}``).

Values may use ``${key}`` and ``${key:default}`` placeholders, resolved through the same chain
(recursively; a cycle or an unresolvable placeholder without default is an error).
``canal.instance.destination`` is the destination's name.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .properties import PropertiesSyntaxError, load_properties
from .schema import KEYS, is_known

__all__ = [
    "CANAL_PROPERTIES",
    "INSTANCE_PROPERTIES",
    "CanalConfig",
    "ConfigError",
    "InstanceConfig",
    "ResolvedConfig",
    "env_name",
]

log = logging.getLogger("pycanal.config")

CANAL_PROPERTIES = "canal.properties"
INSTANCE_PROPERTIES = "instance.properties"
_PLACEHOLDER = re.compile(r"\$\{([^${}:]+)(?::([^${}]*))?\}")


class ConfigError(ValueError):
    """A bad configuration value; ``key`` and ``source`` (the file or override) name it."""

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.source = source


def env_name(key: str) -> str:
    """``canal.instance.master.address`` -> ``CANAL_INSTANCE_MASTER_ADDRESS``."""
    return re.sub(r"[^0-9A-Za-z]", "_", key).upper()


@dataclass
class _Layer:
    name: str  # the file path, "override" or "environment"
    values: Mapping[str, str]


@dataclass
class ResolvedConfig:
    """Raw layers plus typed, validated access. ``get(key)`` returns the typed value."""

    layers: list[_Layer]
    base_dir: Path
    environ: Mapping[str, str]
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ raw lookup
    def lookup(self, key: str) -> tuple[str, str] | None:
        """``(raw value, source)`` of ``key`` before placeholders, or None when unset everywhere
        (the schema default is not consulted)."""
        for layer in self.layers:
            if layer.name == "environment":
                for name in (key, env_name(key)):
                    if name in self.environ:
                        return self.environ[name], f"environment variable {name}"
                continue
            if key in layer.values:
                return layer.values[key], layer.name
        return None

    def raw(self, key: str) -> str | None:
        """The value after placeholders (the schema default when unset)."""
        found = self.lookup(key)
        if found is None:
            spec = KEYS.get(key)
            if spec is None or spec.default is None:
                return None
            return self._substitute(spec.default, key, "default", (key,))
        return self._substitute(found[0], key, found[1], (key,))

    def source(self, key: str) -> str:
        found = self.lookup(key)
        return "default" if found is None else found[1]

    def _substitute(self, value: str, key: str, source: str, stack: tuple[str, ...]) -> str:
        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1).strip(), m.group(2)
            if name in stack:
                raise ConfigError(
                    f"{source}: {key}: placeholder cycle {' -> '.join((*stack, name))}",
                    key=key,
                    source=source,
                )
            found = self.lookup(name)
            if found is not None:
                return self._substitute(found[0], name, found[1], (*stack, name))
            spec = KEYS.get(name)  # a schema key's own default beats the inline one
            if spec is not None and spec.default is not None:
                return self._substitute(spec.default, name, "default", (*stack, name))
            if default is not None:
                return self._substitute(default, key, source, stack)
            raise ConfigError(
                f"{source}: {key}: cannot resolve placeholder ${{{name}}}", key=key, source=source
            )

        for _ in range(32):
            new = _PLACEHOLDER.sub(repl, value)
            if new == value:
                return new
            value = new
        return value

    # ------------------------------------------------------------------ typed access
    def get(self, key: str) -> Any:
        if key in self._cache:
            return self._cache[key]
        raw = self.raw(key)
        spec = KEYS.get(key)
        if spec is None or raw is None:
            value: Any = raw
        else:
            try:
                value = spec.convert(raw)
            except ValueError as exc:
                where = self.source(key)
                raise ConfigError(f"{where}: {key}={raw!r}: {exc}", key=key, source=where) from None
        if spec is not None and key.endswith(".dir") and isinstance(value, str) and value:
            path = Path(value)
            value = str(path if path.is_absolute() else (self.base_dir / path).resolve())
        self._cache[key] = value
        return value

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def keys_set(self) -> set[str]:
        """Every key set in a file or override layer."""
        out: set[str] = set()
        for layer in self.layers:
            if layer.name != "environment":
                out.update(layer.values)
        return out

    def validate(self, keys: list[str]) -> None:
        for key in keys:
            self.get(key)


def _read(path: Path) -> dict[str, str]:
    try:
        return load_properties(path)
    except PropertiesSyntaxError as exc:
        raise ConfigError(str(exc), source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", source=str(path)) from None


def _warn_unknown(values: Mapping[str, str], path: Path) -> None:
    for key in values:
        if not is_known(key):
            log.warning("unknown configuration key %r in %s (ignored)", key, path)


def _scope_keys(scope: str) -> list[str]:
    return [k for k, spec in KEYS.items() if spec.scope == scope]


@dataclass
class InstanceConfig:
    """One destination's resolved configuration (``config["canal.instance.master.address"]``)."""

    destination: str
    path: Path
    resolved: ResolvedConfig

    def get(self, key: str) -> Any:
        return self.resolved.get(key)

    def __getitem__(self, key: str) -> Any:
        return self.resolved.get(key)

    def source(self, key: str) -> str:
        return self.resolved.source(key)

    def as_dict(self) -> dict[str, Any]:
        """Every schema key (server and instance) with its typed value."""
        return {k: self.resolved.get(k) for k in KEYS}


class CanalConfig:
    """A loaded conf dir. ``CanalConfig.load(conf_dir)`` reads and validates ``canal.properties``;
    ``instance(dest)`` reads and validates ``<conf.dir>/<dest>/instance.properties``."""

    def __init__(
        self,
        conf_dir: str | os.PathLike[str],
        *,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(conf_dir).resolve()
        self.path = self.root / CANAL_PROPERTIES
        self.overrides = dict(overrides or {})
        self.environ = dict(os.environ if environ is None else environ)
        if not self.path.is_file():
            raise ConfigError(f"{self.path}: no such file", source=str(self.path))
        self.properties = _read(self.path)
        _warn_unknown(self.properties, self.path)
        _warn_unknown(self.overrides, Path("overrides"))
        self.server = ResolvedConfig(self._layers(), self.root, self.environ)
        self.server.validate(_scope_keys("server"))
        self._check_server()

    @classmethod
    def load(
        cls,
        conf_dir: str | os.PathLike[str],
        *,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> CanalConfig:
        return cls(conf_dir, overrides=overrides, environ=environ)

    def _layers(self, instance: _Layer | None = None) -> list[_Layer]:
        layers = [_Layer("override", self.overrides), _Layer("environment", {})]
        if instance is not None:
            layers.append(instance)
        layers.append(_Layer(str(self.path), self.properties))
        return layers

    def _check_server(self) -> None:
        if self.server.get("canal.user") and not self.server.get("canal.passwd"):
            src = self.server.source("canal.user")
            raise ConfigError(
                f"{src}: canal.user is set without canal.passwd", key="canal.passwd", source=src
            )

    def get(self, key: str) -> Any:
        return self.server.get(key)

    def __getitem__(self, key: str) -> Any:
        return self.server.get(key)

    @property
    def conf_dir(self) -> Path:
        """``canal.conf.dir`` (relative to the directory of canal.properties)."""
        return Path(self.server.get("canal.conf.dir"))

    @property
    def destinations(self) -> list[str]:
        return list(self.server.get("canal.destinations"))

    def instance_path(self, destination: str) -> Path:
        return self.conf_dir / destination / INSTANCE_PROPERTIES

    def instance(self, destination: str) -> InstanceConfig:
        path = self.instance_path(destination)
        values: dict[str, str] = {}
        if path.is_file():
            values = _read(path)
            _warn_unknown(values, path)
        elif not path.parent.is_dir():
            raise ConfigError(f"{path.parent}: no such destination directory", source=str(path.parent))
        layer = _Layer(str(path), {**values, "canal.instance.destination": destination})
        resolved = ResolvedConfig(self._layers(layer), self.root, self.environ)
        resolved.validate(_scope_keys("instance"))
        self._check_instance(resolved)
        return InstanceConfig(destination, path, resolved)

    def instances(self) -> dict[str, InstanceConfig]:
        return {d: self.instance(d) for d in self.destinations}

    @staticmethod
    def _check_instance(r: ResolvedConfig) -> None:
        tx, size = r.get("canal.instance.transaction.size"), r.get("canal.instance.memory.buffer.size")
        if tx > size:
            src = r.source("canal.instance.transaction.size")
            raise ConfigError(
                f"{src}: canal.instance.transaction.size={tx} is larger than "
                f"canal.instance.memory.buffer.size={size}: the store could never take a full transaction buffer",
                key="canal.instance.transaction.size",
                source=src,
            )
