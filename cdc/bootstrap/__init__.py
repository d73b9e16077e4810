"""The Spark bootstrap: tables bulk-loaded into Parquet under one consistent point.

Public API:
- ``cdc.bootstrap.job.run(BootstrapConfig, spark=None) -> manifest dict`` (``weir bootstrap``,
  ``python -m cdc.bootstrap``, ``spark-submit .../cdc/bootstrap/__main__.py``);
- ``cdc.bootstrap.replay``: load a manifest's Parquet and bring it up to date from the slot's
  changes (per-partition snapshot visibility), and the upstream's own row checksum;
- ``cdc.bootstrap.errors.BootstrapError``: every bad input, with what to do.

Layering: ``copytext``, ``plan``, ``progress`` are sans-I/O; ``reader`` is what executors run
(psycopg + pyarrow, no Spark, no proxy); ``job`` is the driver. How the result stays one
consistent state across kills and resumes: docs/bootstrap.md.
"""
