"""pycanal: a Python implementation of Alibaba Canal (MySQL/MariaDB binlog CDC)."""

__version__ = "0.1.0"
