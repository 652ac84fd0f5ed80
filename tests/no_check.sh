#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/no_check.sh - stands in for the unit test programs when configure
# did not find Check: says why they did not run and reports SKIP (77).
echo "SKIP: the unit test programs (tests/test_*.c) need Check, which" \
    "configure did not find; apt-get install check, then run configure" \
    "and make check again"
exit 77
