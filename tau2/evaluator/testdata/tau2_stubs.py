"""Stubs for tau2-bench dependencies that are not installed here (no network):
enough of loguru, toml (tomllib), addict, docstring_parser to run the
evaluator; litellm, pandas and other unused imports become dummy modules.
Used by tau2_oracle.py only."""
import sys, types, importlib.abc, importlib.machinery, tomllib

class _Anything(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Dummy(f"{self.__name__}.{name}")

class _Dummy:
    def __init__(self, name="dummy"): self._n = name
    def __call__(self, *a, **k): return _Dummy(self._n + "()")
    def __getattr__(self, name):
        if name.startswith("__"): raise AttributeError(name)
        return _Dummy(self._n + "." + name)
    def __mro_entries__(self, bases): return (object,)
    def __or__(self, o): return object
    def __ror__(self, o): return object
    def __getitem__(self, k): return object
    def __iter__(self): return iter(())

STUB = {"litellm", "pandas", "numpy", "rich", "tabulate", "fastapi", "uvicorn", "psutil",
        "tenacity", "deepdiff", "dotenv", "typer", "requests", "httpx", "yaml",
        "redis", "diskcache"}

class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUB:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        m = _Anything(spec.name); m.__path__ = []; return m
    def exec_module(self, m): pass

sys.meta_path.insert(0, Finder())

# loguru
lg = types.ModuleType("loguru")
class _L:
    def __getattr__(self, n): return lambda *a, **k: None
lg.logger = _L()
sys.modules["loguru"] = lg

# toml -> tomllib
tm = types.ModuleType("toml")
def _load(f, *a, **k):
    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        with open(f, "rb") as fh: return tomllib.load(fh)
    data = f.read()
    return tomllib.loads(data if isinstance(data, str) else data.decode())
tm.load = _load
tm.loads = tomllib.loads
sys.modules["toml"] = tm

# addict.Dict: recursive dict with update merging nested dicts (addict semantics)
ad = types.ModuleType("addict")
class Dict(dict):
    def __init__(self, *args, **kw):
        super().__init__()
        for a in args:
            if isinstance(a, dict):
                for k, v in a.items(): self[k] = self._hook(v)
        for k, v in kw.items(): self[k] = self._hook(v)
    @classmethod
    def _hook(cls, v):
        if isinstance(v, dict) and not isinstance(v, Dict): return cls(v)
        if isinstance(v, (list, tuple)): return type(v)(cls._hook(x) for x in v)
        return v
    def update(self, *args, **kw):
        other = {}
        for a in args: other.update(a)
        other.update(kw)
        for k, v in other.items():
            if k not in self or not isinstance(self[k], dict) or not isinstance(v, dict):
                self[k] = self._hook(v)
            else:
                self[k].update(v)
    def to_dict(self):
        out = {}
        for k, v in self.items():
            if isinstance(v, Dict): v = v.to_dict()
            elif isinstance(v, (list, tuple)): v = type(v)(x.to_dict() if isinstance(x, Dict) else x for x in v)
            out[k] = v
        return out
ad.Dict = Dict
sys.modules["addict"] = ad

# docstring_parser.parse: only what tau2's Tool.parse_data reads (descriptions
# do not matter for grading, tool names and types do).
dp = types.ModuleType("docstring_parser")
class _Doc:
    def __init__(self, text):
        lines = (text or "").strip().splitlines()
        self.short_description = lines[0] if lines else None
        self.long_description = None
        self.params, self.raises, self.examples, self.returns = [], [], [], None
dp.parse = lambda text, *a, **k: _Doc(text)
sys.modules["docstring_parser"] = dp
