#!/bin/sh
echo "report ran"
