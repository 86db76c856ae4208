#!/bin/sh
echo "cleanup ran"
