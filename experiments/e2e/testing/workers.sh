# Shell helpers for tests that watch vit_ddp's workers (sourced).

# The pid of the worker of `rank` among the children of `parent`, once it runs.
worker_of() {
  local parent=$1 rank=$2
  for _ in $(seq 1 200); do
    for pid in $(pgrep -P "$parent"); do
      if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$rank"; then echo "$pid"; return 0; fi
    done
    sleep 0.1
  done
  return 1
}

# Waits up to $2 seconds for pid $1 to end; prints the seconds it took.
wait_end() {
  local start=$SECONDS
  while kill -0 "$1" 2>/dev/null; do
    (( SECONDS - start > $2 )) && return 1
    sleep 0.2
  done
  echo $(( SECONDS - start ))
}
