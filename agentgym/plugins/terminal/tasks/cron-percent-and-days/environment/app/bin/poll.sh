#!/bin/sh
echo "poll ran"
