#!/usr/bin/env bash
# Install (Debian packages) and start the real services the test suite uses (and Chromium), on loopback only,
# then print the environment that points the tests at them. Used by .ci/run; run it by hand
# (as root) to exercise the PostgreSQL and Redis backends locally:
#   eval "$(sudo scripts/test-services.sh)"
set -euo pipefail

need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# Debian's Chromium for the web page tests (Playwright drives it; it never downloads a browser).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

# PostgreSQL: the Debian cluster, listening on 127.0.0.1 only, with a password role for tests.
version=$(ls /usr/lib/postgresql | sort -n | tail -n 1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^${version} main$"; then
  pg_createcluster "$version" main >&2
fi
pg_ctlcluster "$version" main start >&2 2>/dev/null || true
for _ in $(seq 1 50); do
  su postgres -c "pg_isready -q -h 127.0.0.1" && break
  sleep 0.2
done
su postgres -c "psql -q -tAc \"SELECT 1 FROM pg_roles WHERE rolname='agentskit'\"" | grep -q 1 ||
  su postgres -c "psql -q -c \"CREATE ROLE agentskit LOGIN PASSWORD 'agentskit'\"" >&2
su postgres -c "psql -q -tAc \"SELECT 1 FROM pg_database WHERE datname='agentskit_test'\"" | grep -q 1 ||
  su postgres -c "psql -q -c 'CREATE DATABASE agentskit_test OWNER agentskit'" >&2

# Redis: a throwaway, non-persistent server on loopback.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no >&2
  for _ in $(seq 1 50); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

echo "export AGENTSKIT_TEST_POSTGRES_URL=postgresql://agentskit:agentskit@127.0.0.1:5432/agentskit_test"
echo "export AGENTSKIT_TEST_REDIS_URL=redis://127.0.0.1:6379/0"
