# Usage: harness.py SCENARIOS.json OUT_DIR ORACLE_WORKDIR TESTDATA_DIR REAL_TELECOM_DIR (see setup.sh).
# Oracle: runs telecom scenarios through τ²'s own TelecomTools/TelecomUserTools
# with τ²'s get_response / run_env_function_call / sync_tools / to_json_str
# (copied from environment.py) and writes golden outputs.
import sys, json, tomllib, hashlib
sys.path.insert(0, sys.argv[3])
from datetime import date, datetime
from pydantic import BaseModel
from tau2.domains.telecom.tools import TelecomTools
from tau2.domains.telecom.user_tools import TelecomUserTools
from tau2.domains.telecom.data_model import TelecomDB, LineStatus
from tau2.domains.telecom.user_data_model import TelecomUserDB, PaymentRequest, VpnDetails, PerformanceLevel

def to_json_str(resp):
    def _process(resp):
        if isinstance(resp, BaseModel): return resp.model_dump()
        elif isinstance(resp, str): return resp
        elif resp is None: return resp
        elif isinstance(resp, (int, float, bool)): return str(resp)
        elif isinstance(resp, list): return [_process(i) for i in resp]
        elif isinstance(resp, tuple): return tuple(_process(i) for i in resp)
        elif isinstance(resp, dict): return {k: _process(v) for k, v in resp.items()}
        elif isinstance(resp, (datetime, date)): return resp.isoformat()
        raise ValueError(type(resp))
    if not isinstance(resp, str):
        return json.dumps(_process(resp), default=str)
    return resp

class Env:
    def __init__(self, dbp, udbp):
        TelecomUserTools.default_vpn_details = VpnDetails(server_address="192.168.1.1", protocol="OpenVPN", server_performance=PerformanceLevel.EXCELLENT)
        self.tools = TelecomTools(TelecomDB.model_validate(tomllib.load(open(dbp,'rb'))))
        self.user_tools = TelecomUserTools(TelecomUserDB.model_validate(tomllib.load(open(udbp,'rb'))))
        self.sync_tools()
    def sync_tools(self):
        if self.user_tools.db.surroundings.phone_number is None: return
        phone_number = self.user_tools.db.surroundings.phone_number
        line = self.tools._get_line_by_phone(phone_number)
        self.user_tools.db.surroundings.line_active = line.status == LineStatus.ACTIVE
        self.user_tools.db.surroundings.roaming_allowed = bool(line.roaming_enabled)
        plan = self.tools._get_plan_by_id(line.plan_id)
        self.user_tools.db.surroundings.mobile_data_usage_exceeded = line.data_used_gb >= plan.data_limit_gb + line.data_refueling_gb
        cpr = self.user_tools.db.surroundings.payment_request
        if cpr is not None and cpr.paid:
            self.tools._set_bill_to_paid(cpr.bill_id)
            self.user_tools.db.surroundings.payment_request = None
        if self.user_tools.db.surroundings.payment_request is None:
            customer = self.tools.get_customer_by_phone(phone_number)
            bills = self.tools._get_bills_awaiting_payment(customer)
            if bills:
                self.user_tools.db.surroundings.payment_request = PaymentRequest(bill_id=bills[0].bill_id, amount_due=bills[0].total_due)
    def get_response(self, requestor, name, args):
        try:
            tk = self.user_tools if requestor == 'user' else self.tools
            resp = tk.use_tool(name, **args)
            self.sync_tools()
            err = False
        except Exception as e:
            resp = f"Error: {e}"; err = True
        return to_json_str(resp), err
    def run_fn(self, env_type, name, args):
        tk = self.user_tools if env_type == 'user' else self.tools
        try:
            res = getattr(tk, name)(**args)
            self.sync_tools()
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}
        if isinstance(res, tuple): res = list(res)
        return {"result": res}

def dump(db): return json.dumps(db.model_dump(), sort_keys=True, default=str)

def main(scen_path, out_dir):
    scens = json.load(open(scen_path))
    for sc in scens:
        base = {'fixture': sys.argv[4] + '/fixture', 'real': sys.argv[5]}[sc['db']]
        e = Env(base + '/db.toml', base + '/user_db.toml')
        outs = []
        for st in sc['steps']:
            if st['kind'] == 'call':
                c, err = e.get_response(st['requestor'], st['name'], st.get('args', {}))
                outs.append({"content": c, "error": err})
            else:
                outs.append(e.run_fn(st['env_type'], st['name'], st.get('args', {})))
        g = {"steps": outs,
             "agent_db": dump(e.tools.db), "user_db": dump(e.user_tools.db),
             "agent_hash": hashlib.sha256(dump(e.tools.db).encode()).hexdigest(),
             "user_hash": hashlib.sha256(dump(e.user_tools.db).encode()).hexdigest()}
        with open(f"{out_dir}/{sc['name']}.json", 'w') as f:
            json.dump(g, f, indent=1, ensure_ascii=False); f.write('\n')

main(sys.argv[1], sys.argv[2])
