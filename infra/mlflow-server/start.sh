#!/usr/bin/env bash
# The team's MLflow tracking server: basic authentication, runs and the model registry in a database, artifacts in
# an S3 bucket served through the server (clients need the server's URL and an MLflow user, no S3 keys). Every
# setting comes from the environment; infra/README.md ("An MLflow tracking server") lists them. Arguments after
# the script's name go to `mlflow server` as they are. The tests start their servers with this script.
set -euo pipefail

home=${MLFLOW_SERVER_HOME:-$PWD/mlflow-server}
backend=${MLFLOW_BACKEND_STORE_URI:-sqlite:///$home/mlflow.db}
artifacts=${MLFLOW_ARTIFACTS_DESTINATION:-}
auth=${MLFLOW_SERVER_AUTH:-basic}
mlflow=${MLFLOW_BIN:-mlflow}

fail() { echo "error: $*" >&2; exit 2; }

[ -n "$artifacts" ] || fail "MLFLOW_ARTIFACTS_DESTINATION is not set: set it to s3://<bucket>/<prefix> (with" \
  "MLFLOW_S3_ENDPOINT_URL for MinIO or another S3-compatible store)"
command -v "$mlflow" >/dev/null 2>&1 || fail "no '$mlflow' command: install mlflow[auth] (the version pinned in" \
  "pyproject.toml) and boto3, or set MLFLOW_BIN to its path"
mkdir -p "$home"

args=(server --host "${MLFLOW_SERVER_HOST:-0.0.0.0}" --port "${MLFLOW_SERVER_PORT:-5000}"
      --workers "${MLFLOW_SERVER_WORKERS:-2}" --backend-store-uri "$backend"
      --serve-artifacts --artifacts-destination "$artifacts")
if [ -n "${MLFLOW_SERVER_ALLOWED_HOSTS:-}" ]; then
  args+=(--allowed-hosts "$MLFLOW_SERVER_ALLOWED_HOSTS")
fi

case "$auth" in
  basic)
    [ -n "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ] || fail "MLFLOW_FLASK_SERVER_SECRET_KEY is not set: set it to a" \
      "long random string (e.g. \`openssl rand -hex 32\`), the same on every restart"
    if [ -z "${MLFLOW_AUTH_CONFIG_PATH:-}" ]; then
      # The admin user is created on the first start from MLFLOW_AUTH_ADMIN_PASSWORD (MLflow has no default one
      # and refuses to start without it); afterwards the variable is ignored and the password changes through
      # the API. Anonymous requests are refused; signed-in users read everything unless given more.
      if [ -z "${MLFLOW_AUTH_DATABASE_URI:-}" ] && [ ! -f "$home/auth.db" ] && [ -z "${MLFLOW_AUTH_ADMIN_PASSWORD:-}" ]
      then
        fail "MLFLOW_AUTH_ADMIN_PASSWORD is not set: the first start creates the admin user with it"
      fi
      export MLFLOW_AUTH_CONFIG_PATH="$home/basic_auth.ini"
      cat > "$MLFLOW_AUTH_CONFIG_PATH" <<INI
[mlflow]
default_permission = ${MLFLOW_AUTH_DEFAULT_PERMISSION:-READ}
database_uri = ${MLFLOW_AUTH_DATABASE_URI:-sqlite:///$home/auth.db}
admin_username = ${MLFLOW_AUTH_ADMIN_USERNAME:-admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
auth_cache_ttl_seconds = ${MLFLOW_AUTH_CACHE_TTL_SECONDS:-0}
INI
    fi
    args+=(--app-name basic-auth)
    ;;
  none)
    echo "warning: MLFLOW_SERVER_AUTH=none: anyone who reaches port ${MLFLOW_SERVER_PORT:-5000} can read and" \
      "change every run and model (tests and single-user machines only)" >&2
    ;;
  *) fail "MLFLOW_SERVER_AUTH=$auth is not known: use basic (the default) or none" ;;
esac

exec "$mlflow" "${args[@]}" "$@"
