"""A real Kafka broker that checks who connects (for the access tests): a SASL_PLAINTEXT listener
with SCRAM-SHA-512, Kafka's KRaft ``StandardAuthorizer`` and no access without an ACL
(``allow.everyone.if.no.acl.found=false``), beside the plain listener the rig itself uses (its
principal, ANONYMOUS, is the super user that creates topics, users and ACLs).

    with SecuredKafkaBroker() as broker:
        broker.add_user("alice", "alice-secret")
        broker.allow("alice", "TOPIC", "orders", "DESCRIBE")
        broker.sasl_servers                      # where the commands under test connect
        broker.sasl_settings("alice", "alice-secret")   # their client properties
"""

from __future__ import annotations

from recovery.local.broker import LocalKafkaBroker, free_port

MECHANISM = "SCRAM-SHA-512"


class SecuredKafkaBroker(LocalKafkaBroker):
    sasl_port = 0

    @property
    def sasl_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @staticmethod
    def sasl_settings(user: str, password: str) -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
        }

    def add_user(self, user: str, password: str) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upsert = UserScramCredentialUpsertion(user, info, password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(60)

    def allow(self, user: str, resource: str, name: str, operation: str) -> None:
        """An ALLOW ACL for ``User:user``: ``operation`` (DESCRIBE, READ, DESCRIBE_CONFIGS ...) on
        the ``resource`` (TOPIC, GROUP, CLUSTER) called ``name``, from any host."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            AdminClient,
            ResourcePatternType,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        binding = AclBinding(
            ResourceType[resource],
            name,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(60)

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        if not self.sasl_port:
            self.sasl_port = free_port()
        plain = f"PLAINTEXT://127.0.0.1:{self.port}"
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        settings.update(
            {
                "listeners": f"{plain},{sasl},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"{plain},{sasl}",
                "listener.security.protocol.map": (
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
                ),
                "sasl.enabled.mechanisms": MECHANISM,
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
        return settings
