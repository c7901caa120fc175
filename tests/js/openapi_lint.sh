#!/usr/bin/env bash
# Lints docs/openapi.yaml with the Redocly CLI (pinned in tests/js/npm) under
# the repository's redocly.yaml. Fails on any error.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
"$here/install.sh"
cd "$root"
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
  "$here/npm/node_modules/.bin/redocly" lint --config redocly.yaml docs/openapi.yaml
