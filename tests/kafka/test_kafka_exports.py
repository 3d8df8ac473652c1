"""``recovery.kafka`` exports exactly its public names (httpx's test_exported_members)."""

from __future__ import annotations

import recovery.kafka


def test_all_is_sorted_and_every_name_exists() -> None:
    assert recovery.kafka.__all__ == sorted(recovery.kafka.__all__)
    for name in recovery.kafka.__all__:
        assert hasattr(recovery.kafka, name), name


def test_all_names_the_lazy_exports() -> None:
    assert recovery.kafka.__all__ == sorted(recovery.kafka._EXPORTS)


def test_importing_a_module_of_the_package_does_not_import_the_others() -> None:
    """``recovery.kafka.config`` (the CLI's options need it) must not drag in admin, read, groups."""
    import subprocess
    import sys

    code = (
        "import sys, recovery.kafka.config; "
        "print(sorted(m for m in sys.modules if m.startswith('recovery.kafka.') or m == 'confluent_kafka'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "['recovery.kafka.config']"


def test_public_names_are_exported() -> None:
    for name in recovery.kafka.__all__:
        getattr(recovery.kafka, name)  # resolves every lazy name
    public = {name for name in vars(recovery.kafka) if not name.startswith("_")}
    modules = {
        "admin",
        "answers",
        "cluster",
        "config",
        "group_values",
        "groups",
        "logdirs",
        "offsets",
        "read",
        "read_helper",
        "runway_facts",
        "selection",
        "topic_config",
        "values",
    }
    plumbing = {"annotations", "importlib", "TYPE_CHECKING", "Any"}
    assert public - modules - plumbing == set(recovery.kafka.__all__)
