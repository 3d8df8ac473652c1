"""Client settings: properties files, -X, JAAS translation and secret redaction (pure, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.errors import ConfigError, InvalidInput
from recovery.kafka.config import KafkaConfig, parse_properties, translate_java_properties

PROPERTIES = """\
# a client.properties as Kafka's tools read it
security.protocol=SASL_SSL
sasl.mechanism = PLAIN
ssl.ca.location: /etc/ssl/ca.pem
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="svc-recovery" \\
    password="s3cr3t-pa55";
! another comment
client.id stream-recovery
"""


def test_properties_file_is_parsed_like_java_properties() -> None:
    assert parse_properties(PROPERTIES) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/etc/ssl/ca.pem",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="svc-recovery" password="s3cr3t-pa55";',
        "client.id": "stream-recovery",
    }


def test_jaas_config_becomes_librdkafka_username_and_password() -> None:
    translated = translate_java_properties(parse_properties(PROPERTIES))
    assert "sasl.jaas.config" not in translated
    assert (translated["sasl.username"], translated["sasl.password"]) == ("svc-recovery", "s3cr3t-pa55")


def test_other_login_modules_are_refused() -> None:
    with pytest.raises(ConfigError, match="only the PLAIN and SCRAM login modules"):
        translate_java_properties(
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}
        )


def test_command_config_then_x_overrides(tmp_path: Path) -> None:
    file = tmp_path / "client.properties"
    file.write_text(PROPERTIES)

    config = KafkaConfig.from_options(
        "b1:9092", command_config=file, overrides=["client.id=other", "sasl.password=override"]
    )

    assert config.properties["client.id"] == "other"
    assert config.properties["sasl.password"] == "override"
    assert config.client_config()["bootstrap.servers"] == "b1:9092"


def test_secrets_never_appear_in_repr_or_messages(tmp_path: Path) -> None:
    file = tmp_path / "client.properties"
    file.write_text(PROPERTIES)
    config = KafkaConfig.from_options("b1:9092", command_config=file)

    assert "s3cr3t-pa55" not in repr(config) and "s3cr3t-pa55" not in str(config)
    assert "'sasl.password': '[redacted]'" in repr(config)
    with pytest.raises(ConfigError) as bad:
        KafkaConfig.from_options("b1:9092", overrides=["ssl.key.password"])
    assert str(bad.value) == "overrides ssl.key.password...: expected prop=val (the value is not shown)"
    with pytest.raises(ConfigError) as typo:  # ':' for '=': the value after it is the secret
        KafkaConfig.from_options("b1:9092", overrides=["sasl.password:hunter2"])
    assert "hunter2" not in str(typo.value) and str(typo.value).startswith("overrides sasl.password...:")


def test_invalid_librdkafka_setting_is_a_config_error_without_the_secret() -> None:
    from recovery.kafka.admin import KafkaAdmin

    config = KafkaConfig(
        "b1:9092", {"sasl.password": "hunter2-secret", "security.protocol": "hunter2-secret"}
    )
    with pytest.raises(ConfigError) as bad:
        KafkaAdmin(config)
    assert "hunter2-secret" not in str(bad.value)
    assert "security.protocol" in str(bad.value)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"bootstrap_servers": " "}, InvalidInput),
        ({"bootstrap_servers": "b:1", "timeout_s": 0}, InvalidInput),
        ({"bootstrap_servers": "b:1", "properties": {"bootstrap.servers": "x:1"}}, ConfigError),
    ],
    ids=["empty-bootstrap", "zero-timeout", "bootstrap-as-property"],
)
def test_invalid_configs(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        KafkaConfig(**kwargs)  # type: ignore[arg-type]


def test_unreadable_properties_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing.properties: cannot read the client properties file"):
        KafkaConfig.from_options("b:1", command_config=tmp_path / "missing.properties")


def test_a_line_without_a_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"client.properties: line 2 is not key=value"):
        parse_properties("a=1\n=2\n", source="client.properties")
    assert parse_properties("lonely\nx : y z\n") == {"lonely": "", "x": "y z"}


@pytest.mark.parametrize(
    "servers",
    [
        "kafka:9092",
        "a:1,b:65535",
        "kafka-1.prod:9093, kafka-2.prod:9093",
        "127.0.0.1:1",
        "[::1]:9092",
        "[fe80::1%eth0]:9092",
        "PLAINTEXT://broker:9092",
        "SASL_SSL://broker_1:9093",
    ],
)
def test_bootstrap_servers_the_java_clients_accept(servers: str) -> None:
    assert KafkaConfig(servers).bootstrap_servers == servers


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ("::garbage::", "bootstrap_servers: '::garbage::' is not HOST:PORT"),
        ("::1:9092", "'::1:9092' is not HOST:PORT (as broker:9092, or [::1]:9092 for IPv6)"),
        ("broker", "bootstrap_servers: 'broker' has no port (HOST:PORT, as broker:9092)"),
        ("[::1]", "'[::1]' has no port"),
        ("broker:", "the port of 'broker:' is not in 1-65535"),
        ("broker:0", "the port of 'broker:0' is not in 1-65535"),
        ("broker:65536", "the port of 'broker:65536' is not in 1-65535"),
        ("broker:9092x", "the port of 'broker:9092x' is not in 1-65535"),
        ("a:1,,b:2", "'' is not HOST:PORT"),
        ("a:1,", "'' is not HOST:PORT"),
        ("my broker:9092", "'my broker:9092' is not HOST:PORT"),
        ("admin:hunter2-secret@broker:9092", "'***@broker:9092' is not HOST:PORT"),
    ],
)
def test_bad_bootstrap_servers_are_bad_input(servers: str, message: str) -> None:
    with pytest.raises(InvalidInput) as bad:
        KafkaConfig(servers)
    assert message in str(bad.value) and "\n" not in str(bad.value)
    assert "hunter2" not in str(bad.value)


@pytest.mark.parametrize("servers", ["::garbage::", "broker", "broker:70000", "u:hunter2-secret@b:1"])
def test_bad_bootstrap_servers_exit_2_at_once_without_io(
    servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No connection is tried: every Kafka command fails in the option parsing, one line, exit 2."""
    from recovery.cli import main

    for argv in (
        ["offsets", "-b", servers],
        ["group", "show", "g", "-b", servers],
        ["repair", "/nowhere", "-b", servers],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        out, err = capsys.readouterr()
        assert (exited.value.code, out) == (2, ""), err
        assert err.startswith("Error: --bootstrap-server: ") and err.count("\n") == 1, err
        assert "hunter2" not in err


def test_first_broker_connection_is_not_held_back_unless_asked() -> None:
    # librdkafka waits reconnect.backoff.ms/2 before its first broker connection after the
    # bootstrap one: our default keeps that at 10 ms; an operator's own value still wins.
    assert KafkaConfig("b1:9092").client_config()["reconnect.backoff.ms"] == 20
    mine = KafkaConfig.from_options("b1:9092", overrides=["reconnect.backoff.ms=250"])
    assert mine.client_config()["reconnect.backoff.ms"] == "250"
    assert KafkaConfig("b1:9092").client_config(**{"reconnect.backoff.ms": 5})["reconnect.backoff.ms"] == 5


def test_librdkafka_accepts_the_default_client_settings() -> None:
    # No broker needed: librdkafka checks the settings when the client is made. Ours leave room
    # for a reconnect.backoff.max.ms of 20-99 ms, which its own default (100) refuses.
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    for props in ([], ["reconnect.backoff.max.ms=50"]):
        settings = KafkaConfig.from_options("127.0.0.1:1", overrides=props).client_config()
        assert isinstance(AdminClient(settings), AdminClient)
    with pytest.raises(KafkaException, match=r"reconnect\.backoff\.max\.ms"):
        AdminClient({**settings, "reconnect.backoff.ms": 100})


@pytest.mark.parametrize(
    ("java", "librdkafka"),
    [
        (
            {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/ca.pem",
                "ssl.truststore.password": "",
            },
            {"ssl.ca.location": "/ca.pem"},
        ),
        (
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "/me.p12",
                "ssl.keystore.password": "pw",
            },
            {"ssl.keystore.location": "/me.p12", "ssl.keystore.password": "pw"},
        ),
        (  # librdkafka's own setting, no Java type: PKCS#12, as librdkafka reads it
            {"ssl.keystore.location": "/me.p12", "ssl.keystore.password": "pw"},
            {"ssl.keystore.location": "/me.p12", "ssl.keystore.password": "pw"},
        ),
        (
            {
                "ssl.keystore.type": "pem",
                "ssl.keystore.location": "/me.pem",
                "ssl.keystore.password": "unused",
                "ssl.key.password": "pw",
            },
            {"ssl.certificate.location": "/me.pem", "ssl.key.location": "/me.pem", "ssl.key.password": "pw"},
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.key": "KEY",
                "ssl.keystore.certificate.chain": "CHAIN",
            },
            {"ssl.key.pem": "KEY", "ssl.certificate.pem": "CHAIN"},
        ),
        ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "CA"}, {"ssl.ca.pem": "CA"}),
        ({"ssl.keystore.type": "JKS"}, {}),  # a type without a store: nothing to read
        ({"ssl.endpoint.identification.algorithm": ""}, {"ssl.endpoint.identification.algorithm": "none"}),
    ],
)
def test_java_tls_stores_become_librdkafka_settings(java: dict[str, str], librdkafka: dict[str, str]) -> None:
    assert translate_java_properties(java) == librdkafka


@pytest.mark.parametrize(
    ("java", "says"),
    [
        (
            {"ssl.truststore.location": "/t.jks", "ssl.truststore.password": "s3cret"},
            "a Java (JKS or PKCS12)",
        ),
        ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"}, "a PKCS12 truststore"),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "keytool -importkeystore"),
        ({"ssl.keystore.location": "JKS-FILE", "ssl.keystore.password": "s3cret"}, "keytool -importkeystore"),
    ],
)
def test_java_stores_librdkafka_cannot_read_are_one_line_with_the_way_out(
    java: dict[str, str], says: str, tmp_path: Path
) -> None:
    jks = tmp_path / "client.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")  # a Java KeyStore's first bytes
    java = {k: str(jks) if v == "JKS-FILE" else v for k, v in java.items()}
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_options("broker:9092", overrides=[f"{k}={v}" for k, v in java.items()])
    message = str(caught.value)
    assert says in message and "\n" not in message and "s3cret" not in message
