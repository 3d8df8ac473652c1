"""The toolkit's own files in a checkpoint, all under ``_recovery/`` (pure: names only).

Spark never reads this directory. Each record is written and read by one module; the names live
here so that the modules that only need to know them (a restore must never put them back, a
listing must tell them from the query's files) do not import the modules that write them.

* :data:`INTENT_FILE`      the writing command's intent record (:mod:`recovery.checkpoint.intent`)
* :data:`LAST_WRITE_FILE`  what the last writing command changed, and when
  (:mod:`recovery.checkpoint.intent`)
* :data:`HEARTBEAT_FILE`   the running query's heartbeat (:mod:`recovery.checkpoint.heartbeat`)
* :data:`BACKUPS_DIR`      the default directory of backup sets (:mod:`recovery.checkpoint.backup`)
* :data:`HOLD_FILE`        the retention values a hold raised, to put back (:mod:`recovery.hold`)
"""

from __future__ import annotations

RECOVERY_DIR = "_recovery"
INTENT_FILE = f"{RECOVERY_DIR}/intent.json"
# The toolkit's own rewrites of batch files are no sign of a running query
# (recovery.checkpoint.heartbeat.refuse_if_in_use reads this record).
LAST_WRITE_FILE = f"{RECOVERY_DIR}/last-write.json"
HEARTBEAT_FILE = f"{RECOVERY_DIR}/heartbeat.json"
BACKUPS_DIR = f"{RECOVERY_DIR}/backups"
HOLD_FILE = f"{RECOVERY_DIR}/retention-hold.json"

# Never written by a restore nor named by a backup manifest: the toolkit's own records, the running
# query's heartbeat, ``lock``, and a retention hold (what Kafka holds now, not the checkpoint's past).
TOOLKIT_PATHS = (
    BACKUPS_DIR,
    INTENT_FILE,
    f"{RECOVERY_DIR}/lock",
    HEARTBEAT_FILE,
    LAST_WRITE_FILE,
    HOLD_FILE,
)
