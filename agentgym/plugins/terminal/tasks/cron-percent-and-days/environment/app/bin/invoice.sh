#!/bin/sh
echo "invoice ran"
