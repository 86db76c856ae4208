#!/bin/sh
echo "sync ran"
