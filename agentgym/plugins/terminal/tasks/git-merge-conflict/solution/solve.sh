#!/usr/bin/env bash
# Reference: write the resolved files, stage them, and conclude the merge.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
cat > settings.ini <<'T'
[server]
host = 0.0.0.0
port = 8443
tls = true
cert = /etc/app/cert.pem
workers = 4

[logging]
level = WARNING
file = /var/log/app.log
T
python3 - <<'PY'
import re
text = open("app.py").read()
# keep both sides of the conflict, one after the other, separated by two blank lines
text = re.sub(r"<<<<<<< [^\n]*\n(.*?)=======\n(.*?)>>>>>>> [^\n]*\n",
              lambda m: m.group(1) + "\n\n" + m.group(2), text, flags=re.S)
open("app.py", "w").write(text)
PY
git add settings.ini app.py
git commit -q --no-edit
git log --oneline --graph -5
