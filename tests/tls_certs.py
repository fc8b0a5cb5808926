"""Throw-away TLS certificates for tests (``cryptography``): CAs, server and client certificates they
sign, including expired ones (for mutual-TLS failure tests)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def make_ca(tmp: Path, name: str) -> tuple[Path, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, key, cert


def _leaf(tmp: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, name: str,
          usage: x509.ObjectIdentifier, expired: bool) -> tuple[Path, Path]:
    """A certificate for ``name`` signed by ``ca``; ``expired``: its validity ended an hour ago."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start, end = ((now - datetime.timedelta(days=2), now - datetime.timedelta(hours=1)) if expired
                  else (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def make_server_cert(tmp: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate,
                     name: str = "switch.test") -> tuple[Path, Path]:
    """(certificate, key) PEM files of a server ``name`` (also valid for 127.0.0.1) signed by ``ca``."""
    return _leaf(tmp, ca_key, ca, name, ExtendedKeyUsageOID.SERVER_AUTH, expired=False)


def make_client_cert(tmp: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate,
                     name: str = "collector.test", *, expired: bool = False) -> tuple[Path, Path]:
    """(certificate, key) PEM files of a TLS client ``name`` signed by ``ca``; ``expired`` for failure tests."""
    return _leaf(tmp, ca_key, ca, name, ExtendedKeyUsageOID.CLIENT_AUTH, expired=expired)
