# Sourced by shell tests that call Python for several checks: python3 as the interpreter
# itself, found once. A version manager's shim in its place on PATH (pyenv's) costs about
# 0.3 s of a core per call.
PYTHON3=$(command python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PYTHON3=""
[ -n "$PYTHON3" ] || PYTHON3=$(command -v python3)
python3() { "$PYTHON3" "$@"; }
