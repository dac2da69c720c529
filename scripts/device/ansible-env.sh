# Sourced by the device scripts, from the repository root: Ansible and the rdmaforge collection for python3.
# The GPU machine has no package index, so ansible-core and its needs come from the wheels in .whl/ (for that
# machine's python3); where python3 already has Ansible (a dry run here, in the venv) the wheels are not used.
if ! python3 -c 'import ansible' 2> /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
  export PATH=/tmp/site/bin:$PATH
  export PYTHONPATH=/tmp/site:$(pwd)${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH}
fi
export ANSIBLE_FORCE_COLOR=0
python3 -m rdmaforge.collection dev > /dev/null || exit 8
