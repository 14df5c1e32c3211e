#!/usr/bin/env bash
# Regenerates testdata/golden with τ²-bench's own retail code (the oracle).
# Usage: setup.sh TAU2_GIT_DIR WORKDIR   (e.g. a bare clone of
# sierra-research/tau2-bench at a2c0247; needs python3 >= 3.11 with pydantic 2).
# Only RetailTools and the retail data model are imported; τ²'s heavier
# modules (loguru, tau2.utils) are stubbed. The data directory is
# $TAU2_DATA_DIR, else ../shared/tau2-data next to the module root.
set -euo pipefail
G="git --git-dir=$1"; W=$2; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"/tau2/domains/retail "$W"/tau2/environment "$W"/tau2/utils
for f in data_model tools; do
  $G show HEAD:src/tau2/domains/retail/$f.py > "$W"/tau2/domains/retail/$f.py
done
touch "$W"/tau2/__init__.py "$W"/tau2/domains/__init__.py "$W"/tau2/domains/retail/__init__.py "$W"/tau2/environment/__init__.py
printf 'RETAIL_DB_PATH = ""\n' > "$W"/tau2/domains/retail/utils.py
# tau2.utils: the hash (get_dict_hash, copied from τ²) and the no-extra base model.
$G show HEAD:src/tau2/utils/utils.py | python3 -c '
import sys, re
src = sys.stdin.read()
m = re.search(r"^def get_dict_hash\(.*?(?=^def |\Z)", src, re.S | re.M)
print("import hashlib, json\nfrom typing import Any\n" + m.group(0))' > "$W"/tau2/utils/hashing.py
printf 'from tau2.utils.hashing import get_dict_hash\nfrom tau2.utils.pydantic_utils import BaseModelNoExtra\n' > "$W"/tau2/utils/__init__.py
printf 'from pydantic import BaseModel, ConfigDict\nfrom tau2.utils.hashing import get_dict_hash\nclass BaseModelNoExtra(BaseModel):\n    model_config = ConfigDict(extra="forbid")\ndef get_pydantic_hash(obj, exclude=None):\n    return get_dict_hash(obj.model_dump(exclude=exclude))\n' > "$W"/tau2/utils/pydantic_utils.py
cat > "$W"/tau2/environment/db.py <<'PY'
import json
from tau2.utils.pydantic_utils import BaseModelNoExtra, get_pydantic_hash
class DB(BaseModelNoExtra):
    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls.model_validate(json.load(f))
    def get_hash(self):
        return get_pydantic_hash(self)
PY
$G show HEAD:src/tau2/environment/toolkit.py | sed -n '/^TOOL_ATTR/,/^class ToolKitBase/p' | sed '$d' > "$W"/tau2/environment/toolkit_body.py
{
  printf 'from enum import Enum\nfrom typing import Annotated, Any, Callable, Dict, Optional, TypeVar\nfrom pydantic import BaseModel, Field\nfrom tau2.environment.db import DB\nfrom tau2.utils import get_dict_hash\n'
  cat "$W"/tau2/environment/toolkit_body.py
  cat <<'PY'
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
    def tool_type(self, tool_name):
        return getattr(self.tools[tool_name], TOOL_TYPE_ATTR)
    def get_db_hash(self):
        return get_dict_hash(self.db.model_dump())
PY
} > "$W"/tau2/environment/toolkit.py
rm "$W"/tau2/environment/toolkit_body.py
td="$here/.."
data="${TAU2_DATA_DIR:-$td/../../../../../shared/tau2-data}"
python3 "$here/harness.py" "$W" "$td" "$data"
