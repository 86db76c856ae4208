#!/bin/sh
echo "quarterly ran"
