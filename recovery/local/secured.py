"""A real Kafka broker that checks who connects (for the access tests), with Kafka's KRaft
``StandardAuthorizer`` and no access without an ACL (``allow.everyone.if.no.acl.found=false``).
Its listeners:

* ``SASL_PLAINTEXT`` and ``SASL_SSL``: SCRAM-SHA-512 users (``add_user``);
* ``SSL`` with client certificates required (mTLS): the principal is the certificate's CN
  (``ssl.principal.mapping.rules``), so ``CN=carol`` is ``User:carol``;
* the plain listener the rig itself uses: its principal, ANONYMOUS, is the super user that creates
  topics, users and ACLs.

The TLS listeners use certificates from a certificate authority made for this broker
(recovery.local.certs): ``broker.ca`` issues client certificates, ``broker.ca.ca_pem`` is what
clients trust.

    with SecuredKafkaBroker() as broker:
        broker.add_user("alice", "alice-secret")
        broker.allow("alice", "TOPIC", "orders", "DESCRIBE")
        broker.sasl_servers                      # where the commands under test connect
        broker.sasl_settings("alice", "alice-secret")   # their client properties
        broker.sasl_ssl_settings("alice", "alice-secret")   # the same over TLS (sasl_ssl_servers)
        broker.mtls_settings("carol")            # a client certificate for User:carol (mtls_servers)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recovery.errors import RigError
from recovery.local.broker import LocalKafkaBroker, free_port
from recovery.local.certs import CertificateAuthority

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

MECHANISM = "SCRAM-SHA-512"
# The broker's keystore password: a throw-away key in the broker's temp dir.
_KEYSTORE_PASSWORD = "rig-keystore"


class SecuredKafkaBroker(LocalKafkaBroker):
    sasl_port = 0
    sasl_ssl_port = 0
    mtls_port = 0
    _ca: CertificateAuthority | None = None
    _admin_client: AdminClient | None = None

    @property
    def sasl_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def sasl_ssl_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def mtls_servers(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def ca(self) -> CertificateAuthority:
        assert self._ca is not None, "the broker is not started"
        return self._ca

    def sasl_ssl_settings(self, user: str, password: str) -> dict[str, str]:
        return {
            **self.sasl_settings(user, password),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca.ca_pem),
        }

    def mtls_settings(self, common_name: str) -> dict[str, str]:
        """Client properties with a new certificate for ``CN=common_name`` (``User:common_name``)."""
        cert, key = self.ca.issue(common_name)
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.ca_pem),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }

    @staticmethod
    def sasl_settings(user: str, password: str) -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
        }

    def add_user(self, user: str, password: str) -> None:
        """A SCRAM-SHA-512 user, once the broker (not only the controller) knows it."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upsert = UserScramCredentialUpsertion(user, info, password.encode())
        for future in self._admin().alter_user_scram_credentials([upsert]).values():
            future.result(60)

        # The controller commits the credential; the broker applies it a moment later.
        def known() -> bool:
            from confluent_kafka import KafkaException

            futures = self._admin().describe_user_scram_credentials([user])
            assert isinstance(futures, dict)
            try:
                return bool(futures[user].result(10))
            except KafkaException:  # RESOURCE_NOT_FOUND until the broker has applied it
                return False

        self._until(known)

        def logs_in() -> bool:
            # The SCRAM credential cache the authenticator reads is another metadata publisher than
            # the one DescribeUserScramCredentials reads: a login proves the broker has applied it.
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            refused: list[object] = []
            settings: dict[str, Any] = {"bootstrap.servers": self.sasl_servers, "log_level": 0}
            settings.update(self.sasl_settings(user, password))
            settings["error_cb"] = refused.append
            client = AdminClient(settings)
            try:
                client.list_topics(timeout=5)
            except KafkaException:
                return False
            return not refused

        self._until(logs_in)

    def allow(self, user: str, resource: str, name: str, operation: str) -> None:
        """An ALLOW ACL for ``User:user``: ``operation`` (DESCRIBE, READ, DESCRIBE_CONFIGS ...) on
        the ``resource`` (TOPIC, GROUP, BROKER for the cluster) called ``name``, from any host; once
        the broker's authorizer has it (it applies the controller's record a moment later)."""
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        fields = (ResourceType[resource], name, ResourcePatternType.LITERAL, f"User:{user}", "*")
        rights = (AclOperation[operation], AclPermissionType.ALLOW)
        for future in self._admin().create_acls([AclBinding(*fields, *rights)]).values():
            future.result(60)
        wanted = AclBindingFilter(*fields, *rights)
        self._until(lambda: bool(self._admin().describe_acls(wanted).result(10)))

    def _admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        if self._admin_client is None:
            # The plain listener: its principal, ANONYMOUS, is the super user.
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        return self._admin_client

    @staticmethod
    def _until(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise RigError(f"the secured broker did not apply the change within {timeout_s:g}s")
            time.sleep(0.02)

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        assert self._workdir is not None
        for name in ("sasl_port", "sasl_ssl_port", "mtls_port"):
            if not getattr(self, name):
                setattr(self, name, free_port())
        pki = Path(self._workdir, "pki")
        if self._ca is None or self._ca.directory != pki:
            self._ca = CertificateAuthority(pki)
        keystore = self._ca.keystore("broker", _KEYSTORE_PASSWORD, server=True)
        ours = {
            "PLAINTEXT": self.port,
            "SASL_PLAINTEXT": self.sasl_port,
            "SASL_SSL": self.sasl_ssl_port,
            "SSL": self.mtls_port,
        }
        advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ours.items())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        settings.update(
            {
                "listeners": f"{advertised},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": advertised,
                "listener.security.protocol.map": ",".join(
                    ["CONTROLLER:PLAINTEXT", *(f"{name}:{name}" for name in ours)]
                ),
                "sasl.enabled.mechanisms": MECHANISM,
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(keystore),
                "ssl.keystore.password": _KEYSTORE_PASSWORD,
                "ssl.key.password": _KEYSTORE_PASSWORD,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self._ca.ca_pem),
                "listener.name.ssl.ssl.client.auth": "required",
                # User:carol for CN=carol, not User:CN=carol.
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
        return settings
