# shellcheck shell=sh
# Included by the scripts that refuse a system account: `below_floor UID FLOOR` says, on
# stderr, why the account whose UID is below the floor runs nothing.
below_floor() { echo "refused: $(id -un) has UID $1, below $2 (a system account)" >&2; }
