"""PySpark jobs: analysis of exports and distributed decoding of captures (docs/spark.md).

* ``schema`` — Spark schemas derived from the export's JSON Schema; ``bodies`` and
  ``views`` — typed views of decoded bodies derived from Kafka's message definitions.
* ``load`` — reading exports (JSON Lines, spark-decode Parquet); ``jobs/`` — the
  analyses; ``analyze`` — running them and writing tables (``output``), the summary
  (``tables``), charts (``charts``) and the HTML report; ``error_sites``,
  ``columns`` — helpers.
* ``spark_decode`` — the distributed decode: ``capture_files`` (survey, numbering,
  keyed segments), ``connection_decoder`` (one engine per TCP 4-tuple),
  ``topic_fixup`` (topic ids across connections).
* ``session`` — starting or joining the SparkSession; ``submit`` — the spark-submit
  entry script.

Importing this package does not import PySpark; its modules do.
"""
