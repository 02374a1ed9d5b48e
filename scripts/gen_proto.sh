#!/usr/bin/env bash
# Regenerate src/pycanal/protocol/{EntryProtocol,CanalProtocol}_pb2.py from the .proto files.
#
#   scripts/gen_proto.sh            # rewrite the committed modules
#   scripts/gen_proto.sh OUT_DIR    # write them to OUT_DIR instead (tests compare the two)
#
# Needs the dev extra (grpcio-tools, pinned in pyproject.toml so the output is reproducible, and
# ruff). The output is marked `# ruff: noqa` and formatted with the project's ruff settings, so
# `ruff check` / `ruff format` over the tree leave the generated code alone.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-.venv/bin/python}"
SRC=src/pycanal/protocol
OUT="${1:-$SRC}"
mkdir -p "$OUT"

"$PY" -m grpc_tools.protoc -I "$SRC" --python_out="$OUT" "$SRC/EntryProtocol.proto" "$SRC/CanalProtocol.proto"

for name in EntryProtocol CanalProtocol; do
    "$PY" - "$OUT/${name}_pb2.py" <<'PYEOF'
import sys

path = sys.argv[1]
with open(path, encoding="utf-8") as fh:
    lines = fh.read().splitlines(keepends=True)
lines.insert(1, "# ruff: noqa\n")
with open(path, "w", encoding="utf-8") as fh:
    fh.writelines(lines)
PYEOF
    "$PY" -m ruff format --quiet --config pyproject.toml "$OUT/${name}_pb2.py"
done
