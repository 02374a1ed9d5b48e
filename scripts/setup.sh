#!/usr/bin/env bash
# Idempotent set-up for pycanal development, tests and the demo.
#
#   1. MariaDB server + client binaries (Debian packages), installed only when missing.
#      We never use the Debian package's own system service: the tests and the demo start a
#      private server (pycanal.testing.PrivateMariaDB) with its own datadir, socket and port.
#      The system service is stopped/disabled after we install it so it does not linger.
#   2. RabbitMQ (Debian's rabbitmq-server) for canal.serverMode = rabbitMQ: the tests start a private
#      node (pycanal.testing.rabbitmq.PrivateRabbitMQ); the package's system service is stopped/disabled.
#   3. .venv with the machine's python3 (>= 3.11) and `pip install -e '.[dev]'`, re-run only
#      when pyproject.toml changed (its sha256 is stored in .venv/.pycanal-setup-stamp); the
#      project's bytecode compiled every time (what changed since).
#
# Works on a fresh Debian 12 machine as root (or as a user with password-less sudo).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"

log() { echo "setup: $*"; }
die() {
    echo "setup: ERROR: $*" >&2
    exit 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# ---------------------------------------------------------------------------- Python
pick_python() {
    local cand
    for cand in "${PYTHON:-}" python3 python3.13 python3.12 python3.11 /usr/bin/python3; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------------------- apt packages
APT_UPDATED=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "missing $* and no apt-get: install them by hand"
    # Wait for a concurrent apt/dpkg (e.g. unattended-upgrades) instead of failing on its lock.
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=900)
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        as_root "${apt[@]}" update >/dev/null
        APT_UPDATED=1
    fi
    log "apt-get install $*"
    as_root "${apt[@]}" install -y "$@" >/dev/null
}

if ! have mariadbd || ! have mariadb-install-db || ! have mariadb || ! have mariadb-binlog; then
    apt_install mariadb-server mariadb-client
    # The package's postinst may have started the system mariadb (port 3306, /run/mysqld).
    # It would be harmless (we use our own port/socket/datadir), but nobody needs it running.
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        as_root systemctl disable --now mariadb.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/mariadb ]; then
        as_root /etc/init.d/mariadb stop >/dev/null 2>&1 || true
    fi
    have mariadbd || die "mariadbd still missing after installing mariadb-server"
fi
log "mariadb: $( (/usr/sbin/mariadbd --version 2>/dev/null || mariadbd --version) | sed 's/^[^ ]* *//')"

# ZooKeeper (Debian package) for the ZooKeeper meta managers' tests: the tests start a private server
# (pycanal.testing.zookeeper.PrivateZooKeeper) from /usr/share/java/zookeeper.jar with java; the
# package's own system service is not used.
if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null 2>&1; then
    apt_install zookeeper
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        as_root systemctl disable --now zookeeper.service >/dev/null 2>&1 || true
    fi
    [ -f /usr/share/java/zookeeper.jar ] || die "/usr/share/java/zookeeper.jar still missing after installing zookeeper"
fi
log "zookeeper: $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo installed)"

# RabbitMQ (Debian package) for canal.serverMode = rabbitMQ: the tests start a private node as the current user
# (pycanal.testing.rabbitmq.PrivateRabbitMQ, from /usr/lib/rabbitmq/bin); the package's own service is not used.
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    apt_install rabbitmq-server
    # The postinst starts the system node (port 5672, epmd on 4369): nobody needs it running.
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        as_root systemctl disable --now rabbitmq-server.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/rabbitmq-server ]; then
        as_root /etc/init.d/rabbitmq-server stop >/dev/null 2>&1 || true
    fi
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || die "rabbitmq-server still missing after installing it"
fi
log "rabbitmq: $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo installed)"

# sysbench (Debian package) writes the OLTP workloads of bench/oltp.py; only the benchmarks use it.
if ! have sysbench; then
    apt_install sysbench
fi

PY="$(pick_python || true)"
if [ -z "$PY" ]; then
    apt_install python3 python3-venv
    PY="$(pick_python)" || die "no python3 >= 3.11 found after installing python3"
fi

# ---------------------------------------------------------------------------- virtualenv
if [ -e .venv ] && ! { .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' &&
    .venv/bin/python -m pip --version; } >/dev/null 2>&1; then
    log "existing .venv is broken or too old; recreating"
    rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
    if ! "$PY" -m venv .venv >/dev/null 2>&1; then
        # Debian's python3 can only create a venv (with pip) once python3-venv is installed.
        rm -rf .venv
        apt_install python3-venv
        "$PY" -m venv .venv
    fi
fi

STAMP=.venv/.pycanal-setup-stamp
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $(.venv/bin/python -c 'import sys; print(sys.version.split()[0])')"
have_stamp="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have_stamp" ] || ! .venv/bin/python -c 'import pycanal' >/dev/null 2>&1; then
    log "pip install -e '.[dev]' into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e "${REPO_ROOT}[dev]"
    echo "$want" >"$STAMP"
else
    log ".venv up to date"
fi
# The project's bytecode, written now: where PYTHONDONTWRITEBYTECODE is set (this machine's
# shells, many CI images) Python never caches it itself, and every process (a server, each Spark
# Python worker) compiled pycanal from source: importing pycanal.spark.canal_source took 0.9-1.1 s
# of CPU instead of 0.65-0.7, the CLI 0.3 s instead of 0.14. Stale files are recompiled here, and
# Python checks each one against its source anyway.
.venv/bin/python -m compileall -q src
# The compiled twins of the modules pycanal.compiled lists (Cython, a C compiler): the install
# above builds them (setup.py); this rebuilds a twin older than its module's source (an edited
# checkout). Without them those modules run interpreted.
.venv/bin/python scripts/build_ext.py || log "compiled twins not built: their Python modules run instead"

# ---------------------------------------------------------------------------- canal-python venv
# tests/test_canal_python_compat.py runs the unmodified canal-python 0.4 client from PyPI against
# pycanal's server. Its generated protobuf code only loads with protobuf <= 3.20 (pure Python),
# which cannot share .venv with pycanal's protobuf 7, hence a small venv of its own.
CP_VENV=.venv-canal-python
CP_REQS="canal-python==0.4 protobuf==3.20.3"
if [ "$(cat "$CP_VENV/.pycanal-setup-stamp" 2>/dev/null || true)" != "$CP_REQS" ] ||
    ! "$CP_VENV/bin/python" -c 'import canal.client' >/dev/null 2>&1; then
    log "creating $CP_VENV ($CP_REQS)"
    rm -rf "$CP_VENV"
    "$PY" -m venv "$CP_VENV"
    # shellcheck disable=SC2086 # CP_REQS is a list of requirements
    "$CP_VENV/bin/python" -m pip install -q --disable-pip-version-check $CP_REQS
    echo "$CP_REQS" >"$CP_VENV/.pycanal-setup-stamp"
else
    log "$CP_VENV up to date"
fi
# ---------------------------------------------------------------------------- driver JVM class archive
# pycanal.spark.jvm: a driver JVM that maps Spark's classes from an archive starts ~2 s sooner.
# Made once per Java build and pyspark version (~30 s); a no-op when made. Spark runs without it.
if out="$(.venv/bin/python -m pycanal.spark.jvm 2>.venv/.class-archive.log)"; then
    log "${out#pycanal: }"
else
    log "WARNING: the driver JVM's class archive could not be made (.venv/.class-archive.log says why)"
fi
# ---------------------------------------------------------------------------- Delta Lake and Kafka for Spark
# Every session pycanal starts has Delta Lake for Spark and Spark's Kafka source
# (pycanal.spark.session.spark_packages), their jars fetched by Spark's Ivy from Maven Central as PySpark
# users fetch them; fetched here once (a no-op while the jars of the installed delta-spark and pyspark are
# in Ivy's cache).
DELTA_VERSION="$(.venv/bin/python -c 'from importlib.metadata import version; print(version("delta-spark"))')"
SPARK_VERSION="$(.venv/bin/python -c 'from importlib.metadata import version; print(version("pyspark"))')"
if ls "$HOME"/.ivy2.5.2/jars/io.delta_delta-spark_*_2.13-"$DELTA_VERSION".jar >/dev/null 2>&1 &&
    [ -f "$HOME/.ivy2.5.2/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar" ]; then
    log "delta-spark $DELTA_VERSION and spark-sql-kafka $SPARK_VERSION jars up to date in ~/.ivy2.5.2"
elif out="$(.venv/bin/python -m pycanal.spark.session 2>.venv/.delta-fetch.log)"; then
    log "${out#pycanal: }"
else
    log "WARNING: Delta Lake or Kafka for Spark could not be fetched (.venv/.delta-fetch.log says why)"
fi
# maven_jars NAME POM HOME: the dependencies of POM copied by Maven into HOME/lib; a no-op while the
# pom's sha256 matches the stamp there.
maven_jars() {
    local name="$1" pom="$2" home="$3" want
    want="$(sha256sum "$pom" | cut -d' ' -f1)"
    if [ "$want" = "$(cat "$home/lib/.pycanal-pom-sha256" 2>/dev/null || true)" ]; then
        log "$name jars up to date in $home/lib"
        return
    fi
    command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || apt_install maven openjdk-17-jdk-headless
    mkdir -p "$home"
    rm -rf "$home/lib.new"
    if mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$home/lib.new" >"$home/mvn.log" 2>&1; then
        echo "$want" >"$home/lib.new/.pycanal-pom-sha256"
        rm -rf "$home/lib"
        mv "$home/lib.new" "$home/lib"
        log "$name jars copied to $home/lib ($(du -sh "$home/lib" | cut -f1))"
    else
        log "WARNING: mvn could not fetch $name ($home/mvn.log says why); its tests will fail"
    fi
}
# ---------------------------------------------------------------------------- Alibaba Canal (Java)
# pycanal.testing.canal.PrivateCanal runs the real Canal server beside pycanal, as the reference. Its jars
# come from Maven Central (scripts/canal/pom.xml: 1.1.7, the newest whose server is there) into
# $PYCANAL_CANAL_HOME/lib (maven_jars).
CANAL_VERSION="$(sed -n 's:.*<canal.version>\(.*\)</canal.version>.*:\1:p' scripts/canal/pom.xml)"
CANAL_HOME="${PYCANAL_CANAL_HOME:-$HOME/.cache/pycanal/canal-$CANAL_VERSION}"
maven_jars "canal: $CANAL_VERSION" scripts/canal/pom.xml "$CANAL_HOME"
# Canal's producers for its MQ modes (canal.serverMode = kafka, rabbitMQ), loaded by Canal from plugin/ and not
# from its classpath, as Canal's own package ships them: connector.kafka's and connector.rabbitmq's
# jar-with-dependencies (kafka-clients 2.4, amqp-client inside) into $CANAL_HOME/plugin.
CANAL_PLUGINS="connector.kafka connector.rabbitmq"
if [ "$CANAL_VERSION $CANAL_PLUGINS" = "$(cat "$CANAL_HOME/plugin/.pycanal-artifact" 2>/dev/null || true)" ]; then
    log "canal: MQ plugins up to date in $CANAL_HOME/plugin"
else
    rm -rf "$CANAL_HOME/plugin.new"
    fetched=1
    for plugin in $CANAL_PLUGINS; do
        mvn -q -B dependency:copy -Dartifact="com.alibaba.otter:$plugin:$CANAL_VERSION:jar:jar-with-dependencies" \
            -DoutputDirectory="$CANAL_HOME/plugin.new" >>"$CANAL_HOME/mvn-plugin.log" 2>&1 || fetched=0
    done
    if [ "$fetched" = 1 ]; then
        echo "$CANAL_VERSION $CANAL_PLUGINS" >"$CANAL_HOME/plugin.new/.pycanal-artifact"
        rm -rf "$CANAL_HOME/plugin"
        mv "$CANAL_HOME/plugin.new" "$CANAL_HOME/plugin"
        log "canal: MQ plugins ($CANAL_PLUGINS) copied to $CANAL_HOME/plugin"
    else
        log "WARNING: mvn could not fetch Canal's MQ plugins ($CANAL_HOME/mvn-plugin.log says why); Canal's MQ test will fail"
    fi
fi
# ---------------------------------------------------------------------------- Apache Kafka (Java)
# pycanal.testing.kafka.PrivateKafka runs a real broker (KRaft, one node) for canal.serverMode = kafka. Its
# jars come from Maven Central (scripts/kafka/pom.xml) into $PYCANAL_KAFKA_HOME/lib, the same way as
# Canal's above (maven_jars).
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml)"
KAFKA_HOME="${PYCANAL_KAFKA_HOME:-$HOME/.cache/pycanal/kafka-$KAFKA_VERSION}"
maven_jars "kafka: $KAFKA_VERSION" scripts/kafka/pom.xml "$KAFKA_HOME"
# ---------------------------------------------------------------------------- S3Proxy (Java)
# pycanal.testing.s3.PrivateS3 runs a real S3-compatible server (S3Proxy on its filesystem store) for the lake
# on object storage. Its self-contained jar (55 MB) comes from Maven Central into $PYCANAL_S3PROXY_HOME; the
# version is S3PROXY_VERSION in src/pycanal/testing/s3.py. A no-op while that jar is there.
S3PROXY_VERSION="$(sed -n 's/^S3PROXY_VERSION = "\(.*\)"$/\1/p' src/pycanal/testing/s3.py)"
[ -n "$S3PROXY_VERSION" ] || die "no S3PROXY_VERSION in src/pycanal/testing/s3.py"
S3PROXY_HOME="${PYCANAL_S3PROXY_HOME:-$HOME/.cache/pycanal/s3proxy-$S3PROXY_VERSION}"
S3PROXY_JAR="s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"
if [ -f "$S3PROXY_HOME/$S3PROXY_JAR" ]; then
    log "s3proxy: $S3PROXY_VERSION up to date in $S3PROXY_HOME"
else
    command -v mvn >/dev/null 2>&1 || apt_install maven openjdk-17-jdk-headless
    mkdir -p "$S3PROXY_HOME"
    if mvn -q -B dependency:copy -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
        -DoutputDirectory="$S3PROXY_HOME" >"$S3PROXY_HOME/mvn.log" 2>&1 && [ -f "$S3PROXY_HOME/$S3PROXY_JAR" ]; then
        log "s3proxy: $S3PROXY_VERSION copied to $S3PROXY_HOME"
    else
        log "WARNING: mvn could not fetch S3Proxy $S3PROXY_VERSION ($S3PROXY_HOME/mvn.log says why); its tests will fail"
    fi
fi
log "ready"
