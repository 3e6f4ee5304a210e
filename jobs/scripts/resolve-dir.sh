# shellcheck shell=sh
# Included first by the scripts given the log directory as $1 (JOBS_LOG_DIR): sets $dir.
# "~/x" means the account's home on the host; resolved there, never by the service.
# shellcheck disable=SC2034  # $dir is read by the script that includes this part
dir=$1
# shellcheck disable=SC2088  # a literal "~/", the service's word for the home
case $dir in "~/"*) dir=$HOME/${dir#"~/"} ;; esac
