"""Certificates for TLS tests: a CA, a server certificate for 127.0.0.1 and a client certificate
signed by it (PEM files), and PKCS12 keystores of them as Canal's trust and client stores."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_PEM = serialization.Encoding.PEM


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate (PEM)
    cert: Path  # the server's certificate and key (PEM), for --ssl-cert / --ssl-key
    key: Path
    client: Path  # the client's certificate and key in one PEM file
    ca_cert: x509.Certificate
    client_cert: x509.Certificate
    client_key: ec.EllipticCurvePrivateKey

    def server_args(self) -> list[str]:
        return [f"--ssl-cert={self.cert}", f"--ssl-key={self.key}", f"--ssl-ca={self.ca}"]


def make_certs(directory: Path, name: str = "pycanal test CA") -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: x509.ObjectIdentifier, san: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        b = _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]), ca_name, key.public_key(), now
        )
        b = b.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        if san:
            b = b.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
            )
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        return b.sign(ca_key, hashes.SHA256()), key

    cert, key = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH, san=True)
    client_cert, client_key = leaf("pycanal client", ExtendedKeyUsageOID.CLIENT_AUTH, san=False)
    out = Certs(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem",
                directory / "client.pem", ca_cert, client_cert, client_key)  # fmt: skip
    out.ca.write_bytes(ca_cert.public_bytes(_PEM))
    out.cert.write_bytes(cert.public_bytes(_PEM))
    out.key.write_bytes(_private(key))
    out.client.write_bytes(client_cert.public_bytes(_PEM) + _private(client_key))
    return out


def trust_store(certs: Certs, path: Path, password: str) -> Path:
    """A PKCS12 keystore holding the CA certificate alone."""
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"ca", None, None, [certs.ca_cert], serialization.BestAvailableEncryption(password.encode())
    ))  # fmt: skip
    return path


def client_store(certs: Certs, path: Path, password: str) -> Path:
    """A PKCS12 keystore holding the client's key and certificate."""
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", certs.client_key, certs.client_cert, None,
        serialization.BestAvailableEncryption(password.encode()),
    ))  # fmt: skip
    return path


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object, now: datetime.datetime) -> x509.CertificateBuilder:  # fmt: skip
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _private(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
