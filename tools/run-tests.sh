#!/usr/bin/env bash
# The suite as five pytest processes at once. On CI's 2 cores this more than halves the wall time: most tests wait
# on simulators, rounds and servers starting, not on the CPU. Groups:
#   pulumi  the tests that run the Pulumi program: Pulumi's mocks deadlock in a process where Locust's gevent
#           monkey-patching ran, so they get a process of their own (tests/pulumi_harness.py refuses otherwise);
#   e2e     the directories whose tests start simulators and Locust (the long ones), in three: the bench; the
#   e2e2    canary rehearsals and sweeps; the web UI (its Locust runs and the browser);
#   ui
#   rest    everything else under tests/ (a new directory lands here by itself).
# The last four import Locust before pytest starts: its gevent monkey-patching must come before anything imports
# ssl (httpx, urllib3), or importing Locust later in the process ends in a RecursionError.
# Each group's output (with its 12 slowest tests: where the suite's time goes) is printed whole when the group
# ends; the exit status is the worst of the five, and the last line adds their counts up. Arguments are passed to
# every group's pytest: `tools/run-tests.sh -m "not slow"` is the unit suite (`make test-unit`).
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
EXTRA=("$@")
PULUMI="tests/deploy tests/deploy_extras tests/probe"
E2E="tests/load"
E2E2="tests/serving tests/sweep"
UI="tests/ui"
ignore() { for d in "$@"; do printf -- '--ignore=%s ' "$d"; done; }

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pids
run() {  # name, what the interpreter runs first, pytest arguments...
  local name=$1 first=$2; shift 2
  "$PY" -c "$first"'import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))' -q -ra -p no:cacheprovider \
    --durations=12 "${EXTRA[@]}" "$@" \
    >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}
# shellcheck disable=SC2086
run pulumi "" $PULUMI
# shellcheck disable=SC2086
run e2e "import locust; " $E2E
# shellcheck disable=SC2086
run e2e2 "import locust; " $E2E2
# shellcheck disable=SC2086
run ui "import locust; " $UI
# shellcheck disable=SC2046,SC2086
run rest "import locust; " tests $(ignore $PULUMI $E2E $E2E2 $UI)

status=0
passed=0 failed=0 skipped=0 errors=0
for name in pulumi e2e e2e2 ui rest; do
  wait "${pids[$name]}"; rc=$?
  echo "=== tests: $name (exit $rc) ==="
  cat "$logs/$name.log"
  # pytest exits 5 when a group collected nothing: not a failure of the suite
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=1; fi
  summary=$(tail -n 1 "$logs/$name.log")
  for kind in passed failed skipped error errors; do
    n=$(grep -oE "[0-9]+ $kind\b" <<<"$summary" | grep -oE '^[0-9]+' || true)
    [ -z "$n" ] && continue
    case $kind in passed) passed=$((passed + n)) ;; failed) failed=$((failed + n)) ;;
      skipped) skipped=$((skipped + n)) ;; *) errors=$((errors + n)) ;; esac
  done
done
[ "$errors" -gt 0 ] && failed=$((failed + errors))
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
