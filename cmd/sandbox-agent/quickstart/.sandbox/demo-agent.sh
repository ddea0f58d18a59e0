#!/bin/sh
# A stand-in for a model, so the quick start runs without one. The runner
# gives a real agent the prompt on stdin; this script ignores it and does
# the one task the quick start asks for ("Document add.sh").
#
# Plan runs set SANDBOX_READ_ONLY=1: print the plan (markdown) and change
# nothing. Other runs: do the work and print a one-line summary, which
# becomes the receipt's summary.
set -e

if [ -n "$SANDBOX_READ_ONLY" ]; then
	cat <<'PLAN'
## Plan

1. Add `NOTES.md` explaining how to use `add.sh`: `sh add.sh A B` prints A+B.
2. Give an example and say that it adds integers only.
3. Leave `add.sh` and `test.sh` as they are; `sh test.sh` must still pass.
PLAN
	exit 0
fi

sum=$(sh add.sh 2 3)
cat > NOTES.md <<NOTES
# Notes

\`add.sh\` adds two integers and prints the sum:

    \$ sh add.sh 2 3
    $sum

It uses the shell's arithmetic, so it takes integers only.
\`sh test.sh\` checks it.
NOTES
echo "Added NOTES.md documenting add.sh: usage, an example, integers only."
