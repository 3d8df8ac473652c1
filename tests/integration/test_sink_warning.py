"""A Delta sink skips batch ids it already holds for the query id: validate warns, repair refuses."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from streaming_job import NOW, tree_digest

from recovery.cli import cli
from recovery.core.model import GateMode
from recovery.errors import SinkWouldSkip
from recovery.gate import prestart_gate
from recovery.kafka.config import KafkaConfig
from recovery.local import topics


def test_a_sink_ahead_of_an_older_checkpoint_is_reported_and_blocks_execute(
    job, new_topic, produce, bootstrap, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, 40, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()  # batch 0
    shutil.copytree(j.checkpoint, tmp_path / "older")
    produce(topic, 20, partitions=2, start=40, timestamp_ms=NOW)
    j.run()  # batch 1: the sink's txn for the query id is now 1
    # Someone puts the older checkpoint back: Spark would run "batch 1" again, and the sink skips it.
    shutil.rmtree(j.checkpoint)
    shutil.copytree(tmp_path / "older", j.checkpoint)
    produce(topic, 20, partitions=2, start=60, timestamp_ms=NOW)
    topics.delete_records(bootstrap, topic, {0: 25})
    sink = ["--sink", str(j.table)]
    run = CliRunner().invoke

    validated = run(cli, ["validate", str(j.checkpoint), "-b", bootstrap, *sink, "--output", "json"])
    assert validated.exit_code == 1, validated.output
    assert "ahead of the checkpoint" in json.loads(validated.stdout)["sink_warning"]

    before = tree_digest(j.checkpoint)
    # The refusal lives in the executor: the job's pre-start gate in clamp mode gets it too.
    with pytest.raises(SinkWouldSkip):
        prestart_gate(str(j.checkpoint), KafkaConfig(bootstrap), mode=GateMode.CLAMP, sink=str(j.table))
    assert tree_digest(j.checkpoint) == before
    refused = run(cli, ["repair", str(j.checkpoint), "-b", bootstrap, *sink, "--execute", "--force"])
    assert isinstance(refused.exception, SinkWouldSkip)  # StateError: exit 1 through the CLI's main()
    assert str(refused.exception).startswith(f"Delta sink {j.table}: the sink records batch 1 for this query")
    assert "Nothing was written: start the query on a new checkpoint" in str(refused.exception)
    assert tree_digest(j.checkpoint) == before

    accepted = run(
        cli,
        ["repair", str(j.checkpoint), "-b", bootstrap, *sink, "--execute", "--force", "--accept-sink-skip"],
    )
    assert accepted.exit_code == 0, accepted.output
    assert tree_digest(j.checkpoint) != before
