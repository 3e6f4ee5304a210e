# shellcheck shell=sh
# `sh -c HAS_TOOL sh TOOL` (monitoring/doctor.py): where TOOL is on the host's PATH, if it is.
command -v "$1"
