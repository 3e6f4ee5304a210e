# shellcheck shell=sh
# `sh -c IN_HOME sh ARGV...` (monitoring/localaccounts.py): run ARGV in the account's home,
# as an SSH login would start there.
cd "$HOME" 2>/dev/null || cd /
exec "$@"
