#!/bin/bash
awk '{ s += $2 } END { print s }' /opt/inventory/stock.txt > /app/total.txt
