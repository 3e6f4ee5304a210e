# shellcheck shell=sh
# `sh -c READ_LOGS sh KEEP LIMIT FILE OFFSET...`: the new part of each given log: for each
# pair FILE OFFSET, a line "@@ SIZE START" (or "@@ -" without the file), then base64 of at
# most LIMIT bytes from START: START is the offset, 0 if the file is now shorter (rewritten),
# or SIZE - KEEP when more than KEEP bytes are new (the service keeps only that much). base64
# keeps the bytes exact and the markers apart from the text.
keep=$1 limit=$2
shift 2
while [ $# -ge 2 ]; do
  f=$1 start=$2
  shift 2
  if [ ! -f "$f" ]; then
    echo "@@ -"
    continue
  fi
  size=$(($(wc -c <"$f")))
  [ "$start" -gt "$size" ] && start=0
  [ $((size - start)) -gt "$keep" ] && start=$((size - keep))
  echo "@@ $size $start"
  tail -c +$((start + 1)) "$f" | head -c "$limit" | base64
done
true
