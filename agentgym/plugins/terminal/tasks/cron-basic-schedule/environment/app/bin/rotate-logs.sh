#!/bin/sh
echo "rotate-logs ran"
