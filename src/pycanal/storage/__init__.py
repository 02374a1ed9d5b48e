"""Where the lake's files live: a local directory or an S3 bucket prefix, behind one path type
(:class:`~pycanal.storage.lakepath.LakePath`) that the lake's writers and readers share:
``local`` and ``s3`` are the two stores' operations, ``errors`` the one error they raise."""

from .lakepath import LakePath, StorageError, lake_path, mask

__all__ = ["LakePath", "StorageError", "lake_path", "mask"]
