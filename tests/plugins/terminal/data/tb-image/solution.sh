#!/bin/bash
sed 's/^port = 8080$/port = 9090/' /etc/demo/app.conf > /app/app.conf
