#!/bin/bash
# Appends the new port instead of replacing the old one.
cp /etc/demo/app.conf /app/app.conf && echo 'port = 9090' >> /app/app.conf
