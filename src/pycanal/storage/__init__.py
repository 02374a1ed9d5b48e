"""Where the lake's files live: a local directory or an S3 bucket prefix, behind one path type
(:class:`~pycanal.storage.lakepath.LakePath`) that the lake's writers and readers share."""

from .lakepath import LakePath, StorageError, lake_path, mask

__all__ = ["LakePath", "StorageError", "lake_path", "mask"]
