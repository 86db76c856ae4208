#!/usr/bin/env bash
# Builds /app/site with careless permissions.
set -euo pipefail
cd /app
mkdir -p site/css/.cache site/js site/bin/lib site/tools site/private/keys site/uploads
put() { printf '%s\n' "$2" > "site/$1"; chmod "$3" "site/$1"; }
put index.html '<h1>Welcome</h1>' 666
put about.html '<h1>About us</h1>' 600
put .htaccess 'Options -Indexes' 777
put css/style.css 'body { margin: 0 }' 664
put css/.cache/build.css '/* built */' 640
put js/app.js 'console.log("hi")' 755
put bin/deploy '#!/bin/sh
echo deploying' 644
put bin/backup.sh '#!/bin/sh
echo backup' 600
put bin/lib/helpers.py 'def helper(): pass' 777
put tools/minify.sh '#!/bin/sh
echo minify' 666
put private/credentials.txt 'user=admin' 644
put private/.token 'tok-123' 666
put private/keys/server.key 'KEY DATA' 644
put private/keys/rotate.sh '#!/bin/sh
echo rotate' 755
put uploads/notes.txt 'notes' 666
chmod 777 site/uploads site/css
chmod 750 site/js site/bin/lib
chmod 775 site/private site/tools
chmod 711 site/private/keys
chmod 700 site/css/.cache
chmod 755 site site/bin
