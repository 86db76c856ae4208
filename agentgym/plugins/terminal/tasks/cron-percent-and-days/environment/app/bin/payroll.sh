#!/bin/sh
echo "payroll ran"
