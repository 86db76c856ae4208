#!/bin/sh
echo "backup ran"
