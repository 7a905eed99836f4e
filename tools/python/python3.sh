#!/bin/sh
# The Python of ddplab's Python tests: the first python3 that has PyTorch (Debian's
# python3 with python3-torch, which tools/setup.sh installs, or the python3 on PATH where
# PyTorch comes with it), else the python3 on PATH. (It looks for torch without importing
# it, which takes seconds.)
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null 2>&1 &&
     "$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" >/dev/null 2>&1; then
    exec "$python" "$@"
  fi
done
exec python3 "$@"
