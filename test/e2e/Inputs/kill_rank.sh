#!/bin/sh
# Starts "$@" (an mpirun of two or more mf-run ranks), kills one rank with
# SIGKILL once both run, and prints how the job ended: every rank must stop,
# with mpirun's message, well before the test's timeout.
"$@" > kill_rank.out 2>&1 &
job=$!
tries=0
while [ "$(pgrep -f -c "^mf-run .*$KILL_MATCH")" -lt 2 ] && [ $tries -lt 300 ]; do
  sleep 0.1
  tries=$((tries + 1))
done
sleep 1 # into the training steps
pkill -KILL -n -f "^mf-run .*$KILL_MATCH"
wait $job
echo "exit status $?"
cat kill_rank.out
echo "ranks left: $(pgrep -f -c "^mf-run .*$KILL_MATCH")"
