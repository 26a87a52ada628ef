#!/usr/bin/env bash
# Makes the webhook receiver's Python environment: a virtual environment in VENV_DIR (kept and reused) with
# requirements.txt (the `standardwebhooks` package from PyPI) installed. Prints the interpreter's path.
#
# Usage: scripts/webhook-receiver/run.sh VENV_DIR
# Then: VENV_DIR/bin/python scripts/webhook-receiver/receiver.py --secret whsec_... (see receiver.py).
# Needs python3 with the venv module (Debian: python3-venv) and access to PyPI. PYTHON picks the interpreter.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then
    echo "usage: $0 VENV_DIR" >&2
    exit 2
fi
VENV="$1"
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
        "$VENV/bin/python" -m pip install --quiet -r "$HERE/requirements.txt"
fi
echo "$VENV/bin/python"
