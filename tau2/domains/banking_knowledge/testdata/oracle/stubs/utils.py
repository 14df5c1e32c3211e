"""Stand-in for tau2.utils: τ²'s get_dict_hash and the pydantic update helper."""
import copy
import hashlib
import json


def get_dict_hash(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def update_pydantic_model_with_dict(model, update_data):
    def merge(a, b):
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v)
            else:
                a[k] = v
    d = model.model_dump()
    # pydantic's model_validate builds new dicts for the Dict[...] fields, so
    # the task's initialization data is never aliased into the DB.
    merge(d, copy.deepcopy(update_data))
    return type(model).model_validate(d)
