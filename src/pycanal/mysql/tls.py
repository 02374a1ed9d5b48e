"""TLS to the source: Canal's ``sslMode`` and its keystores turned into one ``ssl.SSLContext``.

Canal 1.1.8 (``SslInfo``, ``canal.instance.master.sslMode`` and the keys beside it) has MySQL
Connector/J's modes: ``DISABLED`` (the default: plain TCP), ``PREFERRED``, ``REQUIRED`` (encrypted,
the certificate not checked), ``VERIFY_CA`` (checked against the trust store) and
``VERIFY_IDENTITY`` (and the host name). ``tlsVersions`` lists the protocols (default TLSv1.2 and
TLSv1.3); the trust store and the client certificate come as keystores (``...KeyStoreUrl``,
``...KeyStoreType``, ``...KeyStorePassword``).

What pycanal does differently, and why: a keystore is ``PKCS12`` (Canal's other type; ``keytool
-importkeystore -deststoretype PKCS12`` converts a JKS one) or ``PEM`` (certificates, and for the
client its key, in one file); Java's own ``JKS`` format has no reader outside the JVM and is
refused with that advice rather than ignored. ``PREFERRED`` is MySQL's: TLS when the server offers
it, plain TCP when it does not (Canal refuses a server without TLS in every mode but
``DISABLED``). Without a trust store, ``VERIFY_CA`` checks against the system's CAs, as Canal falls
back to the JVM's.

The context is built once per source (a context costs ~15 ms of CPU, PyMySQL builds one per
connection unless handed one) and serves both the replication connection and the control
connections (:func:`pycanal.mysql.control.connect`), so the mode holds for every connection to the
source; ``DISABLED`` means no TLS on any of them.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import MysqlError

__all__ = ["SSL_MODES", "TLSConfigError", "TlsSettings", "pymysql_tls", "tls_context"]

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_STORE_TYPES = ("PKCS12", "PEM")


class TLSConfigError(MysqlError, ValueError):
    """A TLS setting that cannot be used (unknown mode or version, unreadable keystore); ``key``
    is the setting at fault, and the message names it and the file."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


def tls_context(
    verify: bool = False, cafile: str | None = None, check_hostname: bool | None = None
) -> ssl.SSLContext:
    """A client TLS context. ``verify=False`` (MySQL's ``ssl-mode=REQUIRED``): encrypted, the
    certificate not checked. ``verify=True`` checks it against ``cafile`` (or the system CAs) and,
    unless ``check_hostname=False``, the host name (``VERIFY_IDENTITY``)."""
    if not verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx = ssl.create_default_context(cafile=cafile)
    if check_hostname is not None:
        ctx.check_hostname = check_hostname
    return ctx


def pymysql_tls(ctx: ssl.SSLContext | bool | None, preferred: bool = False) -> dict[str, Any]:
    """``pymysql.connect``'s TLS arguments for a control connection: TLS off without a context
    (PyMySQL >= 2.2 would otherwise try TLS on its own, with a new context each time), the
    context (``True``: one that checks nothing) with TLS required, or PyMySQL's own
    TLS-if-offered for ``preferred``."""
    if not ctx:
        return {"ssl_disabled": True}
    if preferred:
        return {}
    return {"ssl": tls_context() if ctx is True else ctx}


@dataclass(frozen=True)
class TlsSettings:
    """One source's TLS settings, Canal's ``SslInfo`` (see the module notes). ``prefix`` names the
    keys in error messages (``canal.instance.master.``)."""

    mode: str = "DISABLED"
    tls_versions: str = ""
    trust_store_type: str = ""
    trust_store_url: str = ""
    trust_store_password: str = ""
    client_store_type: str = ""
    client_store_url: str = ""
    client_store_password: str = ""
    prefix: str = ""

    def __post_init__(self) -> None:
        mode = self.mode.strip().upper() or "DISABLED"
        if mode not in SSL_MODES:
            raise TLSConfigError(
                f"{self.prefix}sslMode {self.mode!r}: not one of {', '.join(SSL_MODES)}",
                f"{self.prefix}sslMode",
            )
        object.__setattr__(self, "mode", mode)

    @property
    def enabled(self) -> bool:
        return self.mode != "DISABLED"

    @property
    def preferred(self) -> bool:
        """TLS only where the server offers it (PREFERRED); every other enabled mode requires it."""
        return self.mode == "PREFERRED"

    @cached_property
    def context(self) -> ssl.SSLContext | None:
        """The client context of these settings (None when DISABLED), built on first use and then
        shared by every connection; raises :class:`TLSConfigError` naming the setting at fault."""
        if not self.enabled:
            return None
        verify = self.mode in ("VERIFY_CA", "VERIFY_IDENTITY")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = self.mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
        self._versions(ctx)
        if verify:
            if self.trust_store_url:
                pem = self._store("trustCertificateKeyStore", self.trust_store_url, self.trust_store_type,
                                  self.trust_store_password, key=False)  # fmt: skip
                ctx.load_verify_locations(cadata=pem.decode("ascii"))
            else:
                ctx.load_default_certs()
        if self.client_store_url:
            pem = self._store("clientCertificateKeyStore", self.client_store_url, self.client_store_type,
                              self.client_store_password, key=True)  # fmt: skip
            self._load_client(ctx, pem)
        return ctx

    # ------------------------------------------------------------------ parts
    def _versions(self, ctx: ssl.SSLContext) -> None:
        names = [v.strip() for v in self.tls_versions.split(",") if v.strip()] or ["TLSv1.2", "TLSv1.3"]
        unknown = [n for n in names if n not in _VERSIONS]
        if unknown:
            raise TLSConfigError(
                f"{self.prefix}tlsVersions {self.tls_versions!r}: {', '.join(unknown)} is not one of "
                f"{', '.join(_VERSIONS)}",
                f"{self.prefix}tlsVersions",
            )
        versions = sorted(_VERSIONS[n] for n in names)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]

    def _store(self, what: str, url: str, kind: str, password: str, *, key: bool) -> bytes:
        """A keystore's certificates (and with ``key`` its private key) as PEM."""
        name = f"{self.prefix}{what}Url"
        path = _path(url, name)
        given = kind.strip().upper()
        kind = given or _kind_of(path)
        if kind not in _STORE_TYPES:
            hint = " (convert it: keytool -importkeystore -deststoretype PKCS12)" if kind == "JKS" else ""
            at = (
                f"{self.prefix}{what}Type {given!r}"
                if given
                else f"{name} {url!r} (no type: Canal's default JKS)"
            )
            raise TLSConfigError(
                f"{at}: pycanal reads {' or '.join(_STORE_TYPES)} keystores{hint}",
                f"{self.prefix}{what}Type" if given else name,
            )
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TLSConfigError(f"{name} {url!r}: {exc.strerror or exc}", name) from None
        if kind == "PEM":
            return data
        try:
            return _pkcs12_pem(data, password, key=key)
        except ValueError as exc:
            raise TLSConfigError(f"{name} {url!r}: {exc}", name) from None

    def _load_client(self, ctx: ssl.SSLContext, pem: bytes) -> None:
        # load_cert_chain reads files only: the PEM goes through a private temporary file.
        with tempfile.NamedTemporaryFile(suffix=".pem") as f:
            f.write(pem)
            f.flush()
            try:
                ctx.load_cert_chain(f.name)
            except (ssl.SSLError, ValueError) as exc:
                name = f"{self.prefix}clientCertificateKeyStoreUrl"
                raise TLSConfigError(
                    f"{name} {self.client_store_url!r}: no usable certificate and private key ({exc})", name
                ) from None


def _path(url: str, name: str) -> Path:
    """A keystore's file from Canal's URL form (``file:/x``, ``file:///x``) or a plain path."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url).expanduser()
    raise TLSConfigError(f"{name} {url!r}: only file: URLs and paths are read (not {parsed.scheme}:)", name)


def _kind_of(path: Path) -> str:
    """Canal's default type is JKS; a name ending .pem/.crt is taken for PEM, .p12/.pfx for PKCS12."""
    suffix = path.suffix.lower()
    if suffix in (".pem", ".crt", ".cer"):
        return "PEM"
    if suffix in (".p12", ".pfx"):
        return "PKCS12"
    return "JKS"


def _pkcs12_pem(data: bytes, password: str, *, key: bool) -> bytes:
    """A PKCS12 keystore's certificates (and with ``key`` its private key) as PEM; ValueError."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store: Any = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ValueError(f"not a PKCS12 keystore or a wrong password ({exc})") from None
    pem = serialization.Encoding.PEM
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.insert(0, store.cert.certificate)
    if not certs:
        raise ValueError("the keystore holds no certificate")
    out = b"".join(c.public_bytes(pem) for c in certs)
    if key:
        if store.key is None:
            raise ValueError("the keystore holds no private key")
        out = (
            store.key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            + out
        )
    return out
