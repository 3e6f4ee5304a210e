# shellcheck shell=sh
# `sh -c UID_FLOOR sh FLOOR ARGV...`: run ARGV only if the account's UID is at least FLOOR: a
# system account (postgres, www-data) mapped by mistake is refused on the host itself, where
# its UID is known.
. ./below-floor.sh
floor=$1
shift
uid=$(id -u)
if [ "$uid" -lt "$floor" ]; then
  below_floor "$uid" "$floor"
  exit 6
fi
exec "$@"
