"""Delta tables' logs as pycanal reads and writes them itself, without delta-rs replaying them.

``log`` (where the entries and checkpoints are, put-if-absent, and the one replay of a log that
every reader here uses), ``commit`` (the entries pycanal's writers commit), ``checkpoint`` (the
next checkpoint made from the last one), ``expiry`` (what a checkpoint finds past the retentions,
deleted without listing), ``dv`` (deletion vectors), ``tablestate`` (a table's live files and
rows for readers and pollers), ``rs`` (delta-rs handles on a lake's table). Above delta-rs,
pyarrow and ``pycanal.storage`` (a table's files on a local disk or S3) only: the current-state
writer (``pycanal.spark.cow``) and the readers of the lake use them.
"""
