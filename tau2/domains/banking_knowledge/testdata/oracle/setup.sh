#!/usr/bin/env bash
# Builds a workdir that imports τ²-bench's own banking_knowledge code (the
# oracle for testdata/golden) with nothing but python3 (>= 3.10, stdlib):
# data_model.py, db_query.py, utils.py, tools.py and environment/toolkit.py
# come verbatim from the tau2-bench git directory; pydantic and τ²'s
# heavier modules are replaced by the minimal stand-ins in stubs/.
# Usage: setup.sh TAU2_GIT_DIR WORKDIR   (tau2-bench at a2c0247, the data's commit)
set -euo pipefail
G="git --git-dir=$1"; W=$2; here=$(cd "$(dirname "$0")" && pwd)
B=src/tau2/domains/banking_knowledge
mkdir -p "$W"/tau2/domains/banking_knowledge "$W"/tau2/environment "$W"/tau2/utils "$W"/pydantic
for f in data_model db_query utils tools retrieval_mixins; do
  $G show HEAD:$B/$f.py > "$W"/tau2/domains/banking_knowledge/$f.py
done
$G show HEAD:src/tau2/environment/toolkit.py > "$W"/tau2/environment/toolkit.py
touch "$W"/tau2/__init__.py "$W"/tau2/domains/__init__.py "$W"/tau2/domains/banking_knowledge/__init__.py "$W"/tau2/environment/__init__.py
cp "$here"/stubs/pydantic.py "$W"/pydantic/__init__.py
cp "$here"/stubs/utils.py "$W"/tau2/utils/__init__.py
printf 'from pathlib import Path\nimport os\nDATA_DIR = Path(os.environ.get("TAU2_DATA_DIR", "."))\n' > "$W"/tau2/utils/utils.py
printf 'def as_tool(f, **kw):\n    return f\nclass Tool:\n    pass\n' > "$W"/tau2/environment/tool.py
printf 'from pydantic import BaseModel\nimport json\nclass DB(BaseModel):\n    @classmethod\n    def load(cls, path):\n        with open(path) as f:\n            return cls.model_validate(json.load(f))\n' > "$W"/tau2/environment/db.py
echo "oracle workdir ready: $W (run: PYTHONPATH=$W python3 $here/harness.py)"
