"""Passwords encrypted by Alibaba Druid's ``ConfigTools`` (``canal.instance.enableDruid``).

Canal decrypts ``canal.instance.dbPassword`` with ``canal.instance.pwdPublicKey`` when
``enableDruid`` is true. The text was made by ``java -cp druid.jar
com.alibaba.druid.filter.config.ConfigTools <password>``: the password "encrypted" with an RSA
private key (PKCS#1 v1.5, block type 1: a signature's padding), Base64; the public key is the
Base64 of its X.509 SubjectPublicKeyInfo. Decrypting is the public-key operation and the removal
of that padding. ``cryptography`` verifies such blocks but does not hand back what they hold, so
the few lines of arithmetic are written here.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["DruidPasswordError", "decrypt_password"]


class DruidPasswordError(ValueError):
    """The public key or the encrypted password cannot be used (the message says which)."""


def decrypt_password(public_key: str, cipher_text: str) -> str:
    """The password Druid's ``ConfigTools`` encrypted as ``cipher_text`` (both Base64)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    if not public_key.strip():
        raise DruidPasswordError("no public key to decrypt the password with")
    try:
        key = load_der_public_key(base64.b64decode(public_key.strip(), validate=True))
    except (ValueError, binascii.Error) as exc:
        raise DruidPasswordError(f"the public key is not a Base64 X.509 RSA public key ({exc})") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise DruidPasswordError("the public key is not an RSA key")
    numbers = key.public_numbers()
    size = (key.key_size + 7) // 8
    try:
        block = base64.b64decode(cipher_text.strip(), validate=True)
    except binascii.Error:
        raise DruidPasswordError("the encrypted password is not Base64") from None
    c = int.from_bytes(block, "big")
    if len(block) != size or c >= numbers.n:
        raise DruidPasswordError(f"the encrypted password is not a {key.key_size}-bit RSA block")
    em = pow(c, numbers.e, numbers.n).to_bytes(size, "big")
    # 00 01 FF..FF (at least 8) 00 message
    end = em.find(b"\x00", 2)
    if em[:2] != b"\x00\x01" or end < 10 or em[2:end].strip(b"\xff"):
        raise DruidPasswordError("the encrypted password was not made with this public key")
    try:
        return em[end + 1 :].decode("utf-8")
    except UnicodeDecodeError:
        raise DruidPasswordError("the decrypted password is not UTF-8 text") from None
