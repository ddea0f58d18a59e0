#!/bin/sh
got=$(sh add.sh 2 3)
if [ "$got" != 5 ]; then echo "FAIL: add 2 3: expected 5, got $got"; exit 1; fi
echo ok
