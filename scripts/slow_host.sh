#!/usr/bin/env bash
# Run a command with a slowed host: it shares one CPU core with a process that burns it.
#
# Usage (from anywhere):  bash scripts/slow_host.sh CMD [ARG...]
#
# Starts a CPU burner (`yes >/dev/null`) pinned with `taskset -c C` to core C, runs CMD
# pinned to the same core (CMD and every process and thread it starts: CPython, PyTorch's
# threads, nsys's injected threads), so the workload's host gets about half of one core;
# kills the burner when CMD exits (also on INT/TERM/HUP) and exits with CMD's status.
# C is the last CPU this shell may run on (nproc - 1 on an unrestricted machine);
# SLOW_HOST_CPU=N picks another. In a record_corpus.sh LIST line, COMMAND
# `bash scripts/slow_host.sh python3 ...` is run as `nsys profile ... bash
# scripts/slow_host.sh python3 ...`: the workload is pinned, nsys itself is not.
set -u
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/slow_host.sh CMD [ARG...]" >&2
  exit 2
fi
core=${SLOW_HOST_CPU:-$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))' 2>/dev/null || echo $(($(nproc) - 1)))}
taskset -c "$core" yes >/dev/null </dev/null &
burner=$!
trap 'kill "$burner" 2>/dev/null; wait "$burner" 2>/dev/null' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
echo "slow_host: CPU $core shared with a burner (pid $burner)" >&2
taskset -c "$core" "$@"
rc=$?
exit "$rc"
