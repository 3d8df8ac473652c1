"""A throw-away certificate authority for the secured rig broker (recovery.local.secured): the CA, a
broker certificate for 127.0.0.1 and client certificates, made with ``cryptography`` in a directory
of their own, valid for a day.

    ca = CertificateAuthority(tmp / "pki")
    ca.ca_pem                                  # what clients trust (librdkafka's ssl.ca.location)
    ca.keystore("broker", "pw", server=True)   # a PKCS12 keystore for the broker's JVM
    ca.issue("carol")                          # a client's (certificate, key) PEM files, CN=carol

Nothing here is a secret worth keeping: every key dies with the test's temp dir.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "stream-recovery test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = self._builder(subject, self._key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True
        )
        self._cert = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).sign(self._key, hashes.SHA256())
        self.ca_pem = directory / "ca.pem"
        self.ca_pem.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, server: bool = False) -> tuple[Path, Path]:
        """A certificate for ``CN=common_name`` signed by this CA, and its unencrypted key: two PEM
        files. A server certificate names 127.0.0.1 and localhost (librdkafka checks the host)."""

        key, cert = self._make(common_name, server=server)
        # A new name each time: a client that read an earlier pair keeps a pair that still matches.
        stem = f"{common_name}-{cert.serial_number:x}"[:64]
        cert_path = self.directory / f"{stem}.pem"
        key_path = self.directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)
        return cert_path, key_path

    def keystore(self, common_name: str, password: str, *, server: bool = False) -> Path:
        """A PKCS12 keystore (key, certificate, CA) for a JVM: ``ssl.keystore.type=PKCS12``."""

        key, cert = self._make(common_name, server=server)
        path = self.directory / f"{common_name}.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                common_name.encode(), key, cert, [self._cert], BestAvailableEncryption(password.encode())
            )
        )
        return path

    def _make(self, common_name: str, *, server: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = self._builder(subject, key.public_key(), issuer=self._cert.subject).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if server:
            names: list[x509.GeneralName] = [
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.DNSName("localhost"),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self._key, hashes.SHA256())

    @staticmethod
    def _builder(
        subject: x509.Name, public_key: ec.EllipticCurvePublicKey, issuer: x509.Name | None = None
    ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer or subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
