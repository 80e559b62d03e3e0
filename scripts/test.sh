#!/usr/bin/env bash
# The test command: installs the test servers, then runs every test
# (unit, integration, doc tests, the shipped policies' Rego tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-deps.sh
exec cargo test --locked --workspace --no-fail-fast "$@"
