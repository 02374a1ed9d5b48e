"""Canal's ``kafka.*`` settings as librdkafka's configuration: pure functions, no client.

Canal's keys are the Java client's (``kafka.*`` in canal.properties, with the prefix removed, and the
<= 1.1.4 ``canal.mq.*`` names, see :func:`pycanal.mq.settings.kafka_properties`); librdkafka shares
most of them. :func:`producer_config` translates the ones it names differently and drops the
Java-only ones; any other key goes to librdkafka as written, so its own keys work too, and an
unknown one is an error (the producer's, naming the ``kafka.*`` key: :func:`java_key`). A secured
Kafka is configured as Canal's docs do it, with the Java client's ``security.protocol``,
``sasl.mechanism`` and ``sasl.jaas.config``: librdkafka has no JAAS, so :func:`sasl_config` reads
the PLAIN or SCRAM login line into its ``sasl.username`` / ``sasl.password`` (no error message
shows the password: :data:`SECRET_KEYS`). Hand-written: the JAAS line's syntax (Java's
``StreamTokenizer`` rules) has no Python parser. :func:`transactional_config` is the
configuration of ``canal.mq.transaction = true``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CANAL_KAFKA_DEFAULTS",
    "SECRET_KEYS",
    "TRANSACTIONAL_ID_PREFIX",
    "ProducerConfigError",
    "jaas_login",
    "java_key",
    "producer_config",
    "sasl_config",
    "transactional_config",
]

CANAL_KAFKA_DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "acks": "all",
    "compression.type": "none",
    "batch.size": "16384",
    "linger.ms": "1",
    "max.request.size": "1048576",
    "buffer.memory": "33554432",
    "max.in.flight.requests.per.connection": "1",
    "retries": "0",
}
"""The ``kafka.*`` values Canal's shipped canal.properties sets: used where a conf dir omits them."""

# Java client names librdkafka spells differently: name -> (librdkafka name, value converter).
_RENAMED: dict[str, tuple[str, Any]] = {
    "max.request.size": ("message.max.bytes", str),
    "buffer.memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, math.ceil(int(v) / 1024)))),
    "delivery.timeout.ms": ("message.timeout.ms", str),
}
# Java-only keys with no librdkafka meaning: the record values are bytes already, and librdkafka
# never blocks a send on metadata.
_JAVA_ONLY = frozenset(
    {"key.serializer", "value.serializer", "max.block.ms", "kerberos.krb5.file", "kerberos.jaas.file"}
)
# A send that cannot be delivered fails after this long unless kafka.delivery.timeout.ms says
# otherwise: the Java client's delivery.timeout.ms default (librdkafka's own is 5 minutes).
_DELIVERY_TIMEOUT_MS = "120000"


class ProducerConfigError(ValueError):
    """A ``kafka.*`` setting the producer cannot take; the message names the key."""


# sasl.jaas.config: the login module each SASL mechanism takes (the Java client's), whose username and
# password librdkafka takes as sasl.username / sasl.password.
_LOGIN_MODULES: dict[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_LOGIN_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
SECRET_KEYS = re.compile(r"password|secret|jaas", re.I)  # keys whose values no message shows


def _jaas_tokens(text: str, key: str) -> list[tuple[str, str]]:
    """The tokens of a JAAS line, as Kafka's parser (Java's ``StreamTokenizer``) reads them:
    ``("word", w)``, ``("quoted", s)`` (in ``"`` or ``'``, backslash escapes resolved), ``("=", "")``
    and ``(";", "")``; ``//`` and ``/* */`` comments are skipped. No message holds a value."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ProducerConfigError(f"{key}: a /* comment is not closed")
            i = end + 2
        elif c in "=;":
            tokens.append((c, ""))
            i += 1
        elif c in "\"'":
            out: list[str] = []
            i += 1
            while True:
                if i >= n or text[i] == "\n":
                    raise ProducerConfigError(f"{key}: a quoted value is not closed (a {c} is missing)")
                ch = text[i]
                if ch == c:
                    i += 1
                    break
                if ch == "\\" and i + 1 < n:
                    i += 1
                    digits = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", text[i:])
                    if digits:
                        out.append(chr(int(digits.group(), 8)))
                        i += len(digits.group())
                        continue
                    ch = _ESCAPES.get(text[i], text[i])
                out.append(ch)
                i += 1
            tokens.append(("quoted", "".join(out)))
        else:
            word = re.match(r"[\w$.\-\u00a0-\U0010ffff]+", text[i:])
            if not word:  # the character is not shown: it may be part of a password
                raise ProducerConfigError(
                    f"{key}: unexpected character in the login line (a value other than letters, "
                    'digits and . _ - $ goes in double quotes: password="...")'
                )
            tokens.append(("word", word.group()))
            i += len(word.group())
    return tokens


def jaas_login(text: str, key: str = "kafka.sasl.jaas.config") -> tuple[str, str, dict[str, str]]:
    """The login module, its flag and its options from a ``sasl.jaas.config`` value:
    ``<module class> <required|requisite|sufficient|optional> [<option>=<value> ...];`` with values
    quoted or plain words, options in any order (the last of a repeated one wins, as in Java), and
    exactly one module, as the Kafka client requires. A :class:`ProducerConfigError` naming ``key``
    otherwise, which never shows a value."""
    tokens = _jaas_tokens(text, key)
    if not tokens:
        raise ProducerConfigError(f"{key} is empty: give the login module line")
    kinds = [kind for kind, _ in tokens]
    if kinds[:2] != ["word", "word"]:
        raise ProducerConfigError(f"{key}: expected '<LoginModule class> required ...;'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in _LOGIN_FLAGS:
        raise ProducerConfigError(
            f"{key}: {flag!r} after {module} is not a login flag (required, requisite, sufficient, optional)"
        )
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and kinds[i] != ";":
        if kinds[i] != "word" or kinds[i + 1 : i + 2] != ["="]:  # not shown: it may be a value's part
            after = f" after option {list(options)[-1]!r}" if options else f" after {flag}"
            raise ProducerConfigError(
                f'{key}: expected name="value"{after} (a value with spaces or other characters than '
                "letters, digits and . _ - $ goes in double quotes)"
            )
        name = tokens[i][1]
        if kinds[i + 2 : i + 3] not in (["word"], ["quoted"]):
            raise ProducerConfigError(f"{key}: option {name!r} has no value")
        options[name] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ProducerConfigError(f"{key}: the login module's options must end with ';'")
    if i + 1 < len(tokens):
        raise ProducerConfigError(f"{key}: more than one login module (the Kafka client takes one)")
    return module, flag, options


def sasl_config(properties: Mapping[str, Any], prefix: str = "kafka.") -> dict[str, Any]:
    """``properties`` (Kafka client keys) with a PLAIN or SCRAM ``sasl.jaas.config`` read into
    librdkafka's ``sasl.username`` and ``sasl.password``. The line is used only where
    ``security.protocol`` is SASL_PLAINTEXT or SASL_SSL (the Java client ignores it otherwise) and
    its module must be the one of ``sasl.mechanism`` (the Java default: GSSAPI, which librdkafka
    configures with ``sasl.kerberos.*`` instead). Errors name ``<prefix>sasl.jaas.config`` and
    never show the password."""
    out = dict(properties)
    text = out.pop("sasl.jaas.config", None)
    protocol = out.get("security.protocol", "PLAINTEXT").strip().upper()
    if text is None or not protocol.startswith("SASL_"):
        return out
    key = f"{prefix}sasl.jaas.config"
    mechanism = (out.get("sasl.mechanism") or out.get("sasl.mechanisms") or "GSSAPI").strip()
    module, _, options = jaas_login(text, key)
    wanted = _LOGIN_MODULES.get(mechanism)
    if wanted is None:
        raise ProducerConfigError(
            f"{key}: {prefix}sasl.mechanism={mechanism}{' (the default)' if mechanism == 'GSSAPI' else ''}: "
            "only a PLAIN or SCRAM-SHA-256/512 login line is translated for librdkafka; set "
            f"{prefix}sasl.mechanism, or librdkafka's own sasl.* keys for {mechanism} instead of this line"
        )
    if module != wanted:
        raise ProducerConfigError(
            f"{key}: {module} does not go with {prefix}sasl.mechanism={mechanism} (it takes {wanted})"
        )
    both = [name for name in ("sasl.username", "sasl.password") if name in out]
    if both:
        raise ProducerConfigError(f"{key} and {prefix}{both[0]} are both set: give the credentials once")
    unknown = sorted(set(options) - {"username", "password"})
    if unknown:
        raise ProducerConfigError(
            f"{key}: option {unknown[0]!r} of {module.rsplit('.', 1)[-1]} has no librdkafka equivalent "
            "(username and password are translated)"
        )
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise ProducerConfigError(f'{key}: {module.rsplit(".", 1)[-1]} has no {missing[0]}="..." option')
    out["sasl.username"] = options["username"]
    out["sasl.password"] = options["password"]
    return out


def producer_config(properties: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's configuration from Canal's Kafka properties (``kafka.*`` with the prefix removed,
    as :func:`~pycanal.mq.settings.kafka_properties` returns them; Canal's shipped defaults fill the
    gaps). A PLAIN or SCRAM ``sasl.jaas.config`` becomes ``sasl.username`` / ``sasl.password``
    (:func:`sasl_config`). Kerberos through Canal's own ``kerberos.enable`` is refused: librdkafka
    takes ``sasl.mechanism=GSSAPI`` and ``sasl.kerberos.*`` instead."""
    merged = {**CANAL_KAFKA_DEFAULTS, **properties}
    if merged.get("kerberos.enable", "false").strip().lower() == "true":
        raise ProducerConfigError(
            "kafka.kerberos.enable=true: not supported by pycanal's producer; librdkafka takes "
            "kafka.security.protocol, kafka.sasl.mechanism=GSSAPI and kafka.sasl.kerberos.* instead, "
            "where it is built with GSSAPI (confluent-kafka's wheels are not: PLAIN, SCRAM, OAUTHBEARER)"
        )
    out: dict[str, str] = {"message.timeout.ms": _DELIVERY_TIMEOUT_MS}
    for key, value in merged.items():
        if key in _JAVA_ONLY or key == "kerberos.enable":
            continue
        if key in _RENAMED:
            name, convert = _RENAMED[key]
            try:
                out[name] = convert(value.strip())
            except ValueError:
                raise ProducerConfigError(f"kafka.{key}={value!r}: not a number") from None
        else:
            out[key] = value.strip()
    out["max.in.flight.requests.per.connection"] = "1"  # as Canal: a resent batch never overtakes
    return sasl_config(out)  # after the strip: a quoted password keeps its spaces


def java_key(name: str) -> str:
    """The ``kafka.*`` key a librdkafka configuration name came from (for error messages)."""
    for java, (renamed, _) in _RENAMED.items():
        if renamed == name:
            return f"kafka.{java}"
    return f"kafka.{name}"


TRANSACTIONAL_ID_PREFIX = "pycanal"
"""A destination's ``transactional.id`` is ``<prefix>-<destination>``: ``kafka.transactional.id``
sets the prefix."""


def transactional_config(config: Mapping[str, str], destination: str) -> dict[str, str]:
    """A destination's producer configuration with ``canal.mq.transaction = true``: idempotent and
    transactional, ``transactional.id`` ``<kafka.transactional.id>-<destination>`` (stable across
    restarts, so that a restarted server fences the producer it replaces and aborts its open
    transaction). ``retries`` is librdkafka's (Canal's 0 refuses idempotence; an idempotent retry
    neither duplicates nor reorders), and ``transaction.timeout.ms`` defaults to the delivery
    timeout (librdkafka refuses a shorter one)."""
    out = {key: value for key, value in config.items() if key != "retries"}
    out["transactional.id"] = f"{config.get('transactional.id', TRANSACTIONAL_ID_PREFIX)}-{destination}"
    out["enable.idempotence"] = "true"
    out.setdefault("transaction.timeout.ms", out["message.timeout.ms"])
    return out
