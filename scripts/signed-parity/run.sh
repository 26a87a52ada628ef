#!/usr/bin/env bash
# Apple's own verdicts on signed App Store payloads, for the Swift parity test.
#
# Usage: scripts/signed-parity/run.sh OUT_DIR [VENV_DIR]
#
# Creates a Python virtual environment (in VENV_DIR, kept and reused, or else in a temporary directory removed
# at exit), installs requirements.txt into it, runs generate_cases.py OUT_DIR and prints a one-line summary.
# Writes OUT_DIR/cases.json. Needs python3 with the venv module (Debian: python3-venv) and access to PyPI.
# PYTHON picks the interpreter (default python3); APPLE_FIXTURES the fixture directory
# (default <repo>/../shared/fixtures/apple).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUT_DIR [VENV_DIR]" >&2
    exit 2
fi
OUT="$1"
PYTHON="${PYTHON:-python3}"

if [ $# -eq 2 ]; then
    VENV="$2"
else
    VENV="$(mktemp -d "${TMPDIR:-/tmp}/signed-parity-venv.XXXXXX")"
    trap 'rm -rf "$VENV"' EXIT
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$VENV/bin/python" -m pip install --quiet -r "$HERE/requirements.txt"

mkdir -p "$OUT"
"$VENV/bin/python" "$HERE/generate_cases.py" "$OUT"

"$VENV/bin/python" - "$OUT/cases.json" <<'PY'
import collections, json, sys
document = json.load(open(sys.argv[1]))
cases, receipts = document["cases"], document["receipts"]
verdicts = collections.Counter(c["apple_verdict"] for c in cases)
ok = verdicts.pop("OK", 0)
rejected = ", ".join(f"{name} {count}" for name, count in sorted(verdicts.items(), key=lambda kv: (-kv[1], kv[0])))
print(f"signed-parity: {len(cases)} cases ({sum(c['source'] == 'generated' for c in cases)} generated), "
      f"{ok} OK, {sum(verdicts.values())} rejected ({rejected}); {len(receipts)} receipts for ReceiptUtility "
      f"({sum('apple_error' in r for r in receipts)} refused) -> {sys.argv[1]}")
PY
