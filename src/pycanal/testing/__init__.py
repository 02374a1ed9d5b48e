"""Test support shared by the test suite, the benchmarks and the demo."""

from pycanal.testing.mariadb import MariaDBStartError, PrivateMariaDB, find_server_binary, mariadb_binlog_path

__all__ = ["MariaDBStartError", "PrivateMariaDB", "find_server_binary", "mariadb_binlog_path"]
