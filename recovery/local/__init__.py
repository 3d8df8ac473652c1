"""The embedded rig: a real Kafka broker and a real SparkSession, for the demo and the tests.

Nothing here is a stand-in: :mod:`recovery.local.broker` runs Apache Kafka's own ``kafka.Kafka``
(KRaft, one node; :mod:`recovery.local.cluster` three of them, for broker failures) from the jars
``make jars`` fetched from Maven Central, and :mod:`recovery.local.spark` builds a PySpark session
with the real ``spark-sql-kafka-0-10`` connector and Delta jars on ``spark.jars``. The library proper
never imports this package.
"""
