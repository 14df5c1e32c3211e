#!/usr/bin/env bash
# Regenerates testdata/golden with τ²-bench's own telecom code (the oracle).
# Usage: setup.sh TAU2_GIT_DIR WORKDIR   (e.g. a bare clone of
# sierra-research/tau2-bench at a2c0247; needs python3 >= 3.11 with pydantic 2).
# Only the telecom toolkits are imported; τ²'s heavier modules are stubbed.
set -euo pipefail
G="git --git-dir=$1"; W=$2; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"/tau2/domains/telecom "$W"/tau2/environment "$W"/tau2/utils "$W"/loguru
for f in data_model user_data_model tools user_tools; do
  $G show HEAD:src/tau2/domains/telecom/$f.py > "$W"/tau2/domains/telecom/$f.py
done
touch "$W"/tau2/__init__.py "$W"/tau2/domains/__init__.py "$W"/tau2/domains/telecom/__init__.py "$W"/tau2/environment/__init__.py "$W"/tau2/utils/__init__.py
printf 'class _L:\n    def info(self,*a,**k): pass\n    debug=warning=error=info\nlogger=_L()\n' > "$W"/loguru/__init__.py
printf 'from datetime import date, datetime\nTELECOM_DB_PATH = ""\ndef get_now(): return datetime(2025, 2, 25, 12, 8, 0)\ndef get_today(): return date(2025, 2, 25)\n' > "$W"/tau2/domains/telecom/utils.py
printf 'from pydantic import BaseModel, ConfigDict\nclass BaseModelNoExtra(BaseModel):\n    model_config = ConfigDict(extra="forbid")\ndef update_pydantic_model_with_dict(m, d): raise NotImplementedError\n' > "$W"/tau2/utils/pydantic_utils.py
printf 'from tau2.utils.pydantic_utils import BaseModelNoExtra\nclass DB(BaseModelNoExtra):\n    pass\n' > "$W"/tau2/environment/db.py
$G show HEAD:src/tau2/environment/toolkit.py | sed -n 1,124p | grep -v "^from tau2" | sed 's/^T = TypeVar("T", bound=DB)/T = TypeVar("T")/' > "$W"/tau2/environment/toolkit.py
cat >> "$W"/tau2/environment/toolkit.py <<'PY'
class ToolKitBase(metaclass=ToolKitType):
    def __init__(self, db=None):
        self.db = db
    @property
    def tools(self):
        return {name: getattr(self, name) for name in self._func_tools.keys()}
    def use_tool(self, tool_name, **kwargs):
        if tool_name not in self.tools:
            raise ValueError(f"Tool '{tool_name}' not found.")
        return self.tools[tool_name](**kwargs)
PY
td="$here/.."
python3 "$here/harness.py" "$td/scenarios.json" "$td/golden" "$W" "$td" "${TAU2_DATA_DIR:-$td/../../../../../shared/tau2-data}/tau2/domains/telecom"
