"""Minimal stand-in for the part of pydantic 2 that banking_knowledge's data
model uses: BaseModel with annotated fields, Field(default / default_factory),
model_validate (nested models built from dicts), model_dump. Dict[str, Any]
values are kept as given, as pydantic does."""
import copy
import typing

_MISSING = object()


class _FieldInfo:
    def __init__(self, default=_MISSING, default_factory=None):
        self.default = default
        self.default_factory = default_factory


def Field(default=_MISSING, *, default_factory=None, **_):
    return _FieldInfo(default, default_factory)


class ConfigDict(dict):
    pass


class BaseModel:
    @classmethod
    def _fields(cls):
        out = {}
        for klass in reversed(cls.__mro__):
            for name, ann in getattr(klass, "__annotations__", {}).items():
                if typing.get_origin(ann) is typing.ClassVar or name == "model_config":
                    continue
                out[name] = (ann, klass.__dict__.get(name, _MISSING))
        return out

    def __init__(self, **kw):
        for name, (ann, default) in self._fields().items():
            if name in kw:
                v = kw[name]
                if isinstance(ann, type) and issubclass(ann, BaseModel) and isinstance(v, dict):
                    v = ann(**v)
            elif isinstance(default, _FieldInfo):
                if default.default_factory is not None:
                    v = default.default_factory()
                elif default.default is not _MISSING and default.default is not Ellipsis:
                    v = copy.deepcopy(default.default)
                else:
                    raise TypeError(f"{type(self).__name__}: field {name} required")
            elif default is not _MISSING:
                v = copy.deepcopy(default)
            else:
                raise TypeError(f"{type(self).__name__}: field {name} required")
            object.__setattr__(self, name, v)

    @classmethod
    def model_validate(cls, data):
        return cls(**data)

    def model_dump(self, **_):
        def dump(v):
            if isinstance(v, BaseModel):
                return v.model_dump()
            if isinstance(v, dict):
                return {k: dump(x) for k, x in v.items()}
            if isinstance(v, list):
                return [dump(x) for x in v]
            return v
        return {name: dump(getattr(self, name)) for name in self._fields()}
