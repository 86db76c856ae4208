#!/usr/bin/env bash
# Builds /app/repo and leaves it in the middle of a conflicted merge of feature/tls into main.
set -euo pipefail
export GIT_AUTHOR_NAME="Sam Okafor" GIT_AUTHOR_EMAIL="sam@example.com"
export GIT_COMMITTER_NAME="Sam Okafor" GIT_COMMITTER_EMAIL="sam@example.com"
export GIT_CONFIG_NOSYSTEM=1
n=0
stamp() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="$((1710000000 + n * 3600)) +0000" GIT_COMMITTER_DATE="$((1710000000 + n * 3600)) +0000"
}
commit() { stamp; git add -A; git commit -q -m "$1"; }
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Sam Okafor"
git config user.email "sam@example.com"

cat > settings.ini <<'T'
[server]
host = 0.0.0.0
port = 8080
workers = 2

[logging]
level = INFO
file = /var/log/app.log
T
cat > app.py <<'T'
import configparser


def load_settings(path="settings.ini"):
    parser = configparser.ConfigParser()
    parser.read(path)
    return parser


def bind_address(settings):
    server = settings["server"]
    return server["host"], int(server["port"])
T
commit "Initial service skeleton"

git checkout -q -b feature/tls
cat > settings.ini <<'T'
[server]
host = 0.0.0.0
port = 8443
tls = true
cert = /etc/app/cert.pem
workers = 2

[logging]
level = DEBUG
file = /var/log/app.log
T
cat >> app.py <<'T'


def tls_context(settings):
    import ssl
    server = settings["server"]
    if not server.getboolean("tls", fallback=False):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server["cert"])
    return context
T
cat > TLS.md <<'T'
# TLS

The server terminates TLS itself when `tls = true`; `cert` points at a PEM bundle.
T
commit "Serve over TLS"

git checkout -q main
cat > settings.ini <<'T'
[server]
host = 0.0.0.0
port = 8080
workers = 4

[logging]
level = WARNING
file = /var/log/app.log
T
cat >> app.py <<'T'


def health(settings):
    return {"status": "ok", "workers": int(settings["server"]["workers"])}
T
commit "Tune workers and log level; add health check"

stamp
git merge --no-edit feature/tls >/dev/null 2>&1 || true
