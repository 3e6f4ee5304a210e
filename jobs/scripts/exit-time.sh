# shellcheck shell=sh
# Included by the scripts that report when a task ended: `ended_at FILE` prints the time an
# exit file was written (UTC, ISO 8601); GNU's and BusyBox's date both read it.
ended_at() { date -u -r "$1" +%Y-%m-%dT%H:%M:%SZ; }
