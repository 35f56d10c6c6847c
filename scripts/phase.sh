#!/usr/bin/env bash
# phase.sh NAME CMD [ARGS]: runs CMD and then says how long it took, so that
# make test's log (CI's) shows where its time goes, phase by phase.
name=$1
shift
t0=$(date +%s)
"$@"
rc=$?
echo "phase $name: $(($(date +%s) - t0)) s (exit $rc)"
exit $rc
