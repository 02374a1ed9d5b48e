"""The client's login (the connection phase) as a state machine over bytes, with the password
scrambles of each plugin; the packets it reads and writes are :mod:`pycanal.mysql.packets`'."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from .errors import AuthError, ProtocolError, ServerError
from .packets import (
    CACHING_SHA2_PASSWORD,
    CLEAR_PASSWORD,
    CLIENT_SSL,
    NATIVE_PASSWORD,
    UTF8MB4_GENERAL_CI,
    Handshake,
    OkPacket,
    _cstring,
    client_capabilities,
    frame_packet,
    handshake_response,
    parse_err,
    parse_handshake,
    parse_ok,
    ssl_request,
)


# ------------------------------------------------------------------------------------------ scrambles
def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def scramble_native_password(password: bytes, nonce: bytes) -> bytes:
    """``SHA1(password) XOR SHA1(nonce ‖ SHA1(SHA1(password)))``; empty for an empty password."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password).digest()
    stage2 = hashlib.sha1(stage1).digest()
    return _xor(stage1, hashlib.sha1(nonce[:20] + stage2).digest())


def scramble_caching_sha2(password: bytes, nonce: bytes) -> bytes:
    """``SHA256(password) XOR SHA256(SHA256(SHA256(password)) ‖ nonce)``; empty for an empty password."""
    if not password:
        return b""
    stage1 = hashlib.sha256(password).digest()
    stage2 = hashlib.sha256(stage1).digest()
    return _xor(stage1, hashlib.sha256(stage2 + nonce[:20]).digest())


def xor_password(password: bytes, nonce: bytes) -> bytes:
    """``(password ‖ NUL) XOR nonce``, the nonce repeated as needed (what RSA full auth encrypts)."""
    data = password + b"\0"
    nonce = nonce[:20]
    return bytes(c ^ nonce[i % len(nonce)] for i, c in enumerate(data))


def rsa_encrypt_password(password: bytes, nonce: bytes, public_key_pem: bytes) -> bytes:
    """caching_sha2_password full auth without TLS: RSA-OAEP (SHA-1, MGF1-SHA-1) of the XORed password."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        key = serialization.load_pem_public_key(public_key_pem)
    except ValueError as exc:
        raise AuthError(f"server sent an unusable RSA public key: {exc}") from None
    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    return key.encrypt(xor_password(password, nonce), oaep)  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------ login
class Authenticator:
    """The client side of the connection phase as a state machine (sans-I/O).

    Feed it each server payload with :meth:`receive` (the first one is the handshake); it returns
    the framed bytes to send (possibly empty). After the handshake, if TLS was asked for, it returns
    the SSL request and :attr:`tls_pending` becomes true: start TLS on the socket, then call
    :meth:`tls_established` and send what it returns. :attr:`done` becomes true with the final OK
    packet (kept in :attr:`ok`); an ERR packet raises :class:`AuthError` with the server's errno.

    Plugins: ``mysql_native_password``, ``caching_sha2_password`` (fast path; full auth with the
    cleartext password over TLS, or RSA-OAEP with ``server_public_key`` or the key fetched from the
    server) and ``mysql_clear_password`` (TLS only, unless ``allow_cleartext``), with auth switch.
    ``auth_plugin`` overrides the plugin of the first response (the server switches if it disagrees).
    ``tls_preferred``: with ``tls``, a server that does not offer TLS gets a plain login instead
    of an error (MySQL's ``ssl-mode=PREFERRED``).
    """

    def __init__(
        self,
        user: str,
        password: str | bytes = b"",
        *,
        database: str | None = None,
        tls: bool = False,
        charset: int = UTF8MB4_GENERAL_CI,
        max_packet: int = 1 << 30,
        server_public_key: bytes | None = None,
        auth_plugin: str | None = None,
        allow_cleartext: bool = False,
        tls_preferred: bool = False,
    ) -> None:
        self.user = user
        self.password = password.encode("utf-8") if isinstance(password, str) else bytes(password)
        self.database = database
        self.tls = tls
        self.tls_preferred = tls_preferred
        self.charset = charset
        self.max_packet = max_packet
        self.server_public_key = server_public_key
        self.auth_plugin_override = auth_plugin
        self.allow_cleartext = allow_cleartext
        self.handshake: Handshake | None = None
        self.capabilities = 0
        self.plugin = ""
        self.nonce = b""
        self.state = "handshake"  # handshake, tls, auth, awaiting-key, done
        self.ok: OkPacket | None = None
        self.plugins_used: list[str] = []
        self._seq = 0

    @property
    def done(self) -> bool:
        return self.state == "done"

    @property
    def tls_pending(self) -> bool:
        return self.state == "tls"

    @property
    def secure(self) -> bool:
        return self.tls

    @property
    def next_seq(self) -> int:
        """The sequence id the server's next packet must carry."""
        return self._seq

    def _send(self, payload: bytes) -> bytes:
        data, self._seq = frame_packet(payload, self._seq)
        return data

    def receive(self, payload: bytes, seq: int | None = None) -> bytes:
        """Process one server payload; returns the bytes to send (framed)."""
        if seq is not None:
            if self.state != "handshake" and seq != self._seq:
                raise ProtocolError(f"login packet sequence id {seq}, expected {self._seq}")
            self._seq = (seq + 1) & 0xFF
        else:
            self._seq = (self._seq + 1) & 0xFF
        if self.state == "handshake":
            return self._on_handshake(payload)
        if self.state in ("auth", "awaiting-key"):
            return self._on_auth(payload)
        raise ProtocolError(f"unexpected packet in login state {self.state!r}")

    def _on_handshake(self, payload: bytes) -> bytes:
        try:
            hs = parse_handshake(payload)
        except ServerError as exc:
            raise AuthError(exc.message, exc.errno, exc.sqlstate) from None
        self.handshake = hs
        if self.tls and self.tls_preferred and not hs.capabilities & CLIENT_SSL:
            self.tls = False
        self.capabilities = client_capabilities(hs.capabilities, tls=self.tls, database=bool(self.database))
        self.nonce = hs.auth_data
        self.plugin = self.auth_plugin_override or hs.auth_plugin
        if self.plugin not in _PLUGINS:
            # Answer with native password; the server switches us to the user's plugin if needed.
            self.plugin = NATIVE_PASSWORD
        if self.tls:
            self.state = "tls"
            return self._send(ssl_request(self.capabilities, self.charset, self.max_packet))
        return self._send_response()

    def tls_established(self) -> bytes:
        """TLS is up: the handshake response to send over it."""
        if self.state != "tls":
            raise ProtocolError("tls_established() without a pending SSL request")
        return self._send_response()

    def _send_response(self) -> bytes:
        self.state = "auth"
        self.plugins_used.append(self.plugin)
        auth = self._first_response(self.plugin)
        return self._send(
            handshake_response(
                self.capabilities,
                self.user,
                auth,
                self.plugin,
                database=self.database,
                charset=self.charset,
                max_packet=self.max_packet,
            )
        )

    def _first_response(self, plugin: str) -> bytes:
        return _PLUGINS[plugin](self)

    def _on_auth(self, payload: bytes) -> bytes:
        if not payload:
            raise ProtocolError("empty packet during authentication")
        head = payload[0]
        if head == 0x00:
            self.ok = parse_ok(payload)
            self.state = "done"
            return b""
        if head == 0xFF:
            err = parse_err(payload)
            raise AuthError(err.message, err.errno, err.sqlstate)
        if head == 0xFE:
            return self._on_switch(payload)
        if head == 0x01:
            return self._on_more_data(bytes(payload[1:]))
        raise ProtocolError(f"unexpected packet 0x{head:02x} during authentication")

    def _on_switch(self, payload: bytes) -> bytes:
        if len(payload) == 1:
            raise AuthError("server asks for the pre-4.1 password scramble (mysql_old_password): unsupported")
        name, p = _cstring(payload, 1)
        plugin = bytes(name).decode("ascii", "replace")
        data = bytes(payload[p:])
        if data.endswith(b"\0"):
            data = data[:-1]
        if plugin not in _PLUGINS:
            raise AuthError(f"server asks for auth plugin {plugin!r}, which pycanal does not support")
        self.plugin = plugin
        self.nonce = data
        self.state = "auth"
        self.plugins_used.append(plugin)
        return self._send(self._first_response(plugin))

    def _on_more_data(self, data: bytes) -> bytes:
        if self.plugin != CACHING_SHA2_PASSWORD:
            raise ProtocolError(f"unexpected auth-more-data for plugin {self.plugin}")
        if self.state == "awaiting-key":
            self.server_public_key = data
            self.state = "auth"
            return self._send(rsa_encrypt_password(self.password, self.nonce, data))
        if data == b"\x03":  # fast auth succeeded; the OK packet follows
            return b""
        if data == b"\x04":  # full authentication
            if self.secure:
                return self._send(self.password + b"\0")
            if self.server_public_key:
                return self._send(rsa_encrypt_password(self.password, self.nonce, self.server_public_key))
            self.state = "awaiting-key"
            return self._send(b"\x02")
        raise ProtocolError(f"unexpected caching_sha2_password data {data[:8].hex()}")


def _native(auth: Authenticator) -> bytes:
    return scramble_native_password(auth.password, auth.nonce)


def _sha2(auth: Authenticator) -> bytes:
    return scramble_caching_sha2(auth.password, auth.nonce)


def _clear(auth: Authenticator) -> bytes:
    if not (auth.secure or auth.allow_cleartext):
        raise AuthError("server asks for mysql_clear_password on a connection without TLS: refused")
    return auth.password + b"\0"


_PLUGINS: dict[str, Callable[[Authenticator], bytes]] = {
    NATIVE_PASSWORD: _native,
    CACHING_SHA2_PASSWORD: _sha2,
    CLEAR_PASSWORD: _clear,
}
