"""Client settings for Kafka: a typed :class:`KafkaConfig`, read from flags and a properties file.

``--command-config FILE`` takes a Kafka-style properties file (as ``kafka-get-offsets`` and
``kafka-consumer-groups`` do) and ``-X prop=val`` sets one property (as kcat does). librdkafka
understands most Java client property names unchanged (``security.protocol``, ``sasl.mechanism``,
``ssl.ca.location`` …); the one common Java-only setting, ``sasl.jaas.config`` with the PLAIN or SCRAM
login module, is translated into librdkafka's ``sasl.username`` / ``sasl.password``.

Secrets never leave this module in clear text: ``repr()``, ``str()`` and every message redact the
values of sensitive keys (passwords, secrets, JAAS configs, tokens, private keys).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recovery.errors import ConfigError, InvalidInput

DEFAULT_TIMEOUT_S = 30.0
REDACTED = "[redacted]"

# Keys whose values are secret (Java and librdkafka spellings).
_SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|(^|\.)key($|\.pem)|private", re.IGNORECASE)

# Settings we own: a user must not be able to turn them off through -X or the properties file.
_RESERVED = frozenset({"bootstrap.servers"})

# sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(required|requisite|sufficient|optional)\s+(?P<options>.*?);?\s*$", re.DOTALL
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"|(\w+)\s*=\s*(\S+)')

# One bootstrap server: [PROTOCOL://]HOST:PORT, HOST a name or an IPv4 address, or an IPv6 address
# in brackets. The Java clients' rule (clients/.../common/utils/Utils.java HOST_PORT_PATTERN, used by
# ClientUtils.parseAndValidateAddresses): a port is required. librdkafka would default it to 9092,
# but a command line the Java tools reject is a typo here too.
_SERVER = re.compile(
    r"^(?:[A-Za-z][A-Za-z0-9+.\-_]*://)?(?:\[(?P<v6>[0-9A-Fa-f:.%a-z]+)\]|(?P<host>[0-9A-Za-z\-._%]+))"
    r"(?::(?P<port>[^:]*))?$"
)
_USERINFO = re.compile(r"[^,/@\s]*@")


def is_secret(key: str) -> bool:
    """Whether the value of client property ``key`` must never be shown."""
    return bool(_SECRET_KEY.search(key))


def redact(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` with the values of secret keys replaced by ``[redacted]``."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in properties.items()}


@dataclass(frozen=True)
class KafkaConfig:
    """How to reach a Kafka cluster.

    ``properties`` are extra client settings (librdkafka names; Java names librdkafka shares work
    too). ``timeout_s`` bounds every request, retries included: a cluster that does not answer
    within it is reported as unreachable (exit 3).

    Example::

        KafkaConfig("broker:9092", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    """

    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        check_bootstrap_servers(self.bootstrap_servers)
        if self.timeout_s <= 0:
            raise InvalidInput(f"the Kafka timeout must be positive, not {self.timeout_s}")
        clash = _RESERVED & set(self.properties)
        if clash:
            raise ConfigError(
                f"{', '.join(sorted(clash))}: not taken as a client property (the bootstrap servers are "
                "given on their own); remove it from the properties"
            )
        # A plain dict copy: frozen means the caller cannot change it under us.
        object.__setattr__(self, "properties", dict(self.properties))

    def __repr__(self) -> str:
        return (
            f"KafkaConfig(bootstrap_servers={self.bootstrap_servers!r}, "
            f"properties={redact(self.properties)!r}, timeout_s={self.timeout_s!r})"
        )

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash((self.bootstrap_servers, tuple(sorted(self.properties.items())), self.timeout_s))

    def client_config(self, **overrides: str | int | float | bool) -> dict[str, str | int | float | bool]:
        """The settings dict for a confluent_kafka client (contains secrets: never print it)."""
        settings: dict[str, str | int | float | bool] = {"bootstrap.servers": self.bootstrap_servers}
        settings.update(self.properties)
        # librdkafka logs to stderr by default; our messages carry what a person needs.
        settings.setdefault("log_level", 0)
        # librdkafka drops its bootstrap connection once metadata names the brokers, and opens the
        # first broker connection only after its sparse-connection interval, reconnect.backoff.ms/2:
        # 50 ms of every command at the default 100 (first answer 63 ms -> 21 ms here). A failed
        # connection still backs off exponentially up to reconnect.backoff.max.ms (10 s).
        settings.setdefault("reconnect.backoff.ms", 20)
        settings.update(overrides)
        return settings

    @classmethod
    def from_options(
        cls,
        bootstrap_servers: str,
        *,
        command_config: str | Path | None = None,
        overrides: Iterable[str] = (),
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> KafkaConfig:
        """Build from a properties file (``command_config``), then ``prop=val`` items (``overrides``;
        later ones win): what the CLI's ``--command-config`` and ``-X`` give."""
        properties: dict[str, str] = {}
        if command_config is not None:
            properties.update(read_properties(command_config))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                # Only the key is shown: a typo such as `sasl.password:VALUE` carries the secret.
                name = re.split(r"[:=\s]", item.strip(), maxsplit=1)[0] or "(empty)"
                raise ConfigError(
                    f"overrides {name}...: expected prop=val (the value is not shown)", parameter="overrides"
                )
            properties[key.strip()] = value.strip()
        return cls(bootstrap_servers, translate_java_properties(properties), timeout_s)


def check_bootstrap_servers(servers: str, name: str = "bootstrap_servers") -> None:
    """Raise InvalidInput (exit 2, before any connection is tried) unless ``servers`` is a comma
    separated list of ``[PROTOCOL://]HOST:PORT`` with PORT in 1-65535 (IPv6 hosts in brackets).
    Messages start with ``name``."""
    if not servers.strip():
        raise InvalidInput(f"{name} is empty: give HOST:PORT[,HOST:PORT...]", parameter=name)
    for entry in (e.strip() for e in servers.split(",")):
        shown = repr(_USERINFO.sub("***@", entry))  # user:password@host is no server, and a secret
        match = _SERVER.match(entry)
        if not entry or match is None:
            raise InvalidInput(
                f"{name}: {shown} is not HOST:PORT (as broker:9092, or [::1]:9092 for IPv6)", parameter=name
            )
        port = match.group("port")
        if port is None:
            raise InvalidInput(f"{name}: {shown} has no port (HOST:PORT, as broker:9092)", parameter=name)
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise InvalidInput(f"{name}: the port of {shown} is not in 1-65535", parameter=name)


def _shown(item: str) -> str:
    key, sep, _value = item.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret(key) else item


def parse_properties(text: str, *, source: str = "properties") -> dict[str, str]:
    """Parse ``key=value`` / ``key: value`` lines, as ``java.util.Properties.load`` reads them.

    Supported: ``#`` and ``!`` comments, blank lines, ``=``/``:``/whitespace separators, a trailing
    backslash joining the next line (how long ``sasl.jaas.config`` values are often written).
    Unicode escapes are not.
    """
    properties: dict[str, str] = {}
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip() if pending else raw.strip()
        if not pending:
            start = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append((start, pending + line))
        pending = ""
    if pending:
        logical.append((start, pending))
    for number, line in logical:
        # key, then '=', ':' or whitespace, then the value; a key alone has an empty value.
        match = re.match(r"^((?:[^=:\s\\]|\\.)+)(?:\s*[=:\s]\s*(.*))?$", line)
        if match is None:
            raise ConfigError(f"{source}: line {number} is not key=value (it has no key)")
        properties[match.group(1).replace("\\", "")] = (match.group(2) or "").strip()
    return properties


def read_properties(path: str | Path) -> dict[str, str]:
    """Read a Kafka-style client properties file (``--command-config``)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the client properties file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not a UTF-8 text file (byte {exc.start})") from exc
    return parse_properties(text, source=str(file))


def translate_java_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Map the Java-client-only settings librdkafka does not know to librdkafka's names.

    ``sasl.jaas.config`` with PlainLoginModule or ScramLoginModule becomes ``sasl.username`` and
    ``sasl.password`` (librdkafka's CONFIGURATION.md has no JAAS; other login modules are refused).
    TLS stores: see :func:`_translate_java_ssl`.
    """
    result = _translate_java_ssl(properties)
    jaas = result.pop("sasl.jaas.config", None)
    if jaas is None:
        return result
    match = _JAAS.match(jaas)
    module = match.group("module") if match else ""
    if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
        raise ConfigError(
            "sasl.jaas.config: only the PLAIN and SCRAM login modules can be translated for librdkafka; "
            "set sasl.username / sasl.password (or sasl.oauthbearer.*) instead"
        )
    assert match is not None
    options = {
        (m.group(1) or m.group(3)): (m.group(2) if m.group(1) else m.group(4))
        for m in _JAAS_OPTION.finditer(match.group("options"))
    }
    if "username" not in options or "password" not in options:
        raise ConfigError('sasl.jaas.config: the login module needs username="…" and password="…"')
    result.setdefault("sasl.username", options["username"])
    result.setdefault("sasl.password", options["password"].replace('\\"', '"'))
    return result


def _translate_java_ssl(properties: Mapping[str, str]) -> dict[str, str]:
    """The Java clients' TLS stores in librdkafka's words, or a one-line refusal saying what to do.

    librdkafka reads CA certificates as PEM only (``ssl.ca.location``, ``ssl.ca.pem``) and a client
    keystore as PKCS#12 (``ssl.keystore.location``) or PEM (``ssl.certificate.location`` and
    ``ssl.key.location``, or inline ``ssl.certificate.pem`` and ``ssl.key.pem``); a JKS store it
    cannot read. An empty ``ssl.endpoint.identification.algorithm`` (Java: no host name check) is
    librdkafka's ``none``.
    """
    result = dict(properties)
    trust_type = result.pop("ssl.truststore.type", "").upper()
    trust = result.pop("ssl.truststore.location", None)
    result.pop("ssl.truststore.password", None)
    if trust is not None:
        if trust_type != "PEM":
            kind = f"a {trust_type}" if trust_type else "a Java (JKS or PKCS12)"
            raise ConfigError(
                f"ssl.truststore.location: librdkafka cannot read {kind} truststore; export its CA "
                f"certificate as PEM (keytool -exportcert -rfc -keystore {trust} -alias ALIAS -file ca.pem) "
                "and set ssl.ca.location=ca.pem"
            )
        result.setdefault("ssl.ca.location", trust)
    # Kafka's inline PEM stores (KIP-651) have librdkafka counterparts.
    for java, ours in _INLINE_PEM.items():
        if java in result:
            result.setdefault(ours, result.pop(java))
    key_type = result.pop("ssl.keystore.type", "").upper()
    keystore = result.get("ssl.keystore.location")
    if keystore is not None and key_type == "PEM":
        # One file holding the key and its certificate chain, as Kafka's PEM keystore (KIP-651);
        # a PEM keystore has no store password (the key's is ssl.key.password).
        result.pop("ssl.keystore.location")
        result.pop("ssl.keystore.password", None)
        result.setdefault("ssl.certificate.location", keystore)
        result.setdefault("ssl.key.location", keystore)
    elif keystore is not None and (key_type == "JKS" or (not key_type and _is_jks(keystore))):
        raise ConfigError(
            "ssl.keystore.location: librdkafka cannot read a JKS keystore; convert it to PKCS12 (keytool "
            f"-importkeystore -srckeystore {keystore} -destkeystore client.p12 -deststoretype PKCS12) "
            "and set ssl.keystore.location=client.p12"
        )
    # Any other keystore is librdkafka's own ssl.keystore.location: PKCS#12.
    if result.get("ssl.endpoint.identification.algorithm") == "":
        result["ssl.endpoint.identification.algorithm"] = "none"
    return result


_INLINE_PEM = {
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}
# The first bytes of a Java KeyStore (JKS) and of its JCEKS variant; PKCS#12 is DER (0x30 ...).
_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")


def _is_jks(path: str) -> bool:
    """Whether ``path`` is a Java KeyStore (an unreadable file is left to librdkafka to report)."""
    try:
        with open(path, "rb") as file:
            return file.read(4) in _JKS_MAGIC
    except OSError:
        return False
