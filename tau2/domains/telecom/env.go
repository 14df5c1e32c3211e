package telecom

import (
	_ "embed"
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// view is the view a telecom tool or environment function works through:
// the DB of its own side (db for TelecomTools, user for TelecomUserTools;
// the other is nil, as in τ² where each toolkit holds only its DB).
type view struct {
	db   *DB
	user *UserDB
}

// Domain names τ² registers for telecom: the manual and the workflow
// tech-support policy variants (same tools).
const (
	DomainManual   = "telecom"
	DomainWorkflow = "telecom-workflow"
)

//go:embed agent_tools.json
var agentToolsJSON string

//go:embed user_tools.json
var userToolsJSON string

// schemas maps tool name -> OpenAI schema in json.dumps form, from τ²'s
// exact schemas (derived/tool_schemas.json) shipped next to this file.
func schemas(listJSON string) map[string]string {
	v, err := pyjson.Loads(listJSON)
	if err != nil {
		panic(fmt.Sprintf("telecom: embedded tool schemas: %v", err))
	}
	out := map[string]string{}
	for _, t := range v.([]any) {
		fn, _ := t.(*pyjson.Object).Get("function")
		name, _ := fn.(*pyjson.Object).Get("name")
		out[name.(string)] = pyjson.MustDumps(t)
	}
	return out
}

type envFn = func(e *view, k kwargs) (any, error)

// kwargsOf adapts the framework's decoded arguments (already bound against
// the signature) to the tools' Python-semantics accessors.
func kwargsOf(a *env.Args) kwargs {
	k := kwargs{vals: map[string]any{}}
	for name, v := range a.Object().All() {
		k.vals[name] = v
	}
	return k
}

func agentFunc(f envFn) func(db *DB, a *env.Args) (any, error) {
	return func(db *DB, a *env.Args) (any, error) { return f(&view{db: db}, kwargsOf(a)) }
}

func userFunc(f envFn) func(db *UserDB, a *env.Args) (any, error) {
	return func(db *UserDB, a *env.Args) (any, error) { return f(&view{user: db}, kwargsOf(a)) }
}

func params(required []string, optional ...string) []env.Param {
	var out []env.Param
	for _, r := range required {
		out = append(out, env.Param{Name: r, Required: true})
	}
	for _, o := range optional {
		out = append(out, env.Param{Name: o})
	}
	return out
}

// AgentToolkit is τ²'s TelecomTools: the 13 agent tools in τ²'s order and
// the environment functions tasks call on the agent side.
var AgentToolkit = buildAgentToolkit()

func buildAgentToolkit() *env.Toolkit {
	s := schemas(agentToolsJSON)
	t := func(name string, typ env.ToolType, f envFn) *env.Tool {
		return env.NewTool(name, typ, s[name], agentFunc(f))
	}
	f := func(name string, p []env.Param, fn envFn) *env.EnvFunc {
		return env.NewEnvFunc(name, p, agentFunc(fn))
	}
	return env.MustToolkit(agentClass,
		[]*env.Tool{
			t("get_customer_by_phone", env.Read, (*view).getCustomerByPhone),
			t("get_customer_by_id", env.Read, (*view).getCustomerByID),
			t("get_customer_by_name", env.Read, (*view).getCustomerByName),
			t("get_details_by_id", env.Read, (*view).getDetailsByID),
			t("suspend_line", env.Write, (*view).suspendLine),
			t("resume_line", env.Write, (*view).resumeLine),
			t("get_bills_for_customer", env.Read, (*view).getBillsForCustomer),
			t("send_payment_request", env.Write, (*view).sendPaymentRequest),
			t("get_data_usage", env.Read, (*view).getDataUsage),
			t("enable_roaming", env.Write, (*view).enableRoaming),
			t("disable_roaming", env.Write, (*view).disableRoaming),
			t("transfer_to_human_agents", env.Generic, (*view).transferToHumanAgents),
			t("refuel_data", env.Write, (*view).refuelData),
		},
		f("get_available_plan_ids", nil, (*view).getAvailablePlanIDs),
		f("set_data_usage", params([]string{"customer_id", "line_id", "data_used_gb"}), (*view).setDataUsage),
		f("suspend_line_for_overdue_bill", params([]string{"customer_id", "line_id", "new_bill_id", "contract_ended"}), (*view).suspendLineForOverdueBill),
		f("assert_data_refueling_amount", params([]string{"customer_id", "line_id", "expected_amount"}), (*view).assertDataRefuelingAmount),
		f("assert_line_status", params([]string{"customer_id", "line_id", "expected_status"}), (*view).assertLineStatus),
		f("assert_overdue_bill_exists", params([]string{"customer_id", "overdue_bill_id"}), (*view).assertOverdueBillExists),
		f("assert_no_overdue_bill", params([]string{"overdue_bill_id"}), (*view).assertNoOverdueBill),
	)
}

// UserToolkit is τ²'s TelecomUserTools: the 30 device tools in τ²'s order
// and the environment functions that set up and check the phone.
var UserToolkit = buildUserToolkit()

func buildUserToolkit() *env.Toolkit {
	s := schemas(userToolsJSON)
	t := func(name string, typ env.ToolType, f envFn) *env.Tool {
		return env.NewTool(name, typ, s[name], userFunc(f))
	}
	f := func(name string, p []env.Param, fn envFn) *env.EnvFunc {
		return env.NewEnvFunc(name, p, userFunc(fn))
	}
	status := params([]string{"expected_status"})
	return env.MustToolkit(userClass,
		[]*env.Tool{
			t("check_status_bar", env.Read, (*view).checkStatusBar),
			t("check_network_status", env.Read, (*view).checkNetworkStatus),
			t("check_network_mode_preference", env.Read, (*view).checkNetworkModePreference),
			t("set_network_mode_preference", env.Write, (*view).setNetworkModePreference),
			t("run_speed_test", env.Read, (*view).runSpeedTest),
			t("toggle_airplane_mode", env.Write, (*view).toggleAirplaneModeTool),
			t("check_sim_status", env.Read, (*view).checkSimStatus),
			t("reseat_sim_card", env.Write, (*view).reseatSimCard),
			t("toggle_data", env.Write, (*view).toggleDataTool),
			t("toggle_roaming", env.Write, (*view).toggleRoamingTool),
			t("check_data_restriction_status", env.Read, (*view).checkDataRestrictionStatus),
			t("toggle_data_saver_mode", env.Write, (*view).toggleDataSaverModeTool),
			t("check_apn_settings", env.Read, (*view).checkAPNSettings),
			t("set_apn_settings", env.Write, (*view).setAPNSettings),
			t("reset_apn_settings", env.Write, (*view).resetAPNSettings),
			t("check_wifi_status", env.Read, (*view).checkWifiStatus),
			t("toggle_wifi", env.Write, (*view).toggleWifiTool),
			t("check_wifi_calling_status", env.Read, (*view).checkWifiCallingStatus),
			t("toggle_wifi_calling", env.Write, (*view).toggleWifiCallingTool),
			t("check_vpn_status", env.Read, (*view).checkVPNStatus),
			t("connect_vpn", env.Write, (*view).connectVPNTool),
			t("disconnect_vpn", env.Write, (*view).disconnectVPNTool),
			t("check_installed_apps", env.Read, (*view).checkInstalledApps),
			t("check_app_status", env.Read, (*view).checkAppStatus),
			t("check_app_permissions", env.Read, (*view).checkAppPermissions),
			t("grant_app_permission", env.Write, (*view).grantAppPermissionTool),
			t("can_send_mms", env.Read, (*view).canSendMMSTool),
			t("reboot_device", env.Write, (*view).rebootDeviceTool),
			t("check_payment_request", env.Read, (*view).checkPaymentRequest),
			t("make_payment", env.Write, (*view).makePayment),
		},
		f("set_user_info", params([]string{"name", "phone_number"}), (*view).setUserInfo),
		f("set_user_location", params([]string{"abroad"}), (*view).setUserLocation),
		f("turn_airplane_mode_on", nil, (*view).turnAirplaneModeOn),
		f("turn_airplane_mode_off", nil, (*view).turnAirplaneModeOff),
		f("turn_data_on", nil, (*view).turnDataOn),
		f("turn_data_off", nil, (*view).turnDataOff),
		f("turn_roaming_on", nil, (*view).turnRoamingOn),
		f("turn_roaming_off", nil, (*view).turnRoamingOff),
		f("turn_data_saver_mode_on", nil, (*view).turnDataSaverModeOn),
		f("turn_data_saver_mode_off", nil, (*view).turnDataSaverModeOff),
		f("unseat_sim_card", nil, (*view).unseatSimCard),
		f("lock_sim_card", params([]string{"mode"}), (*view).lockSimCard),
		f("break_apn_settings", nil, (*view).breakAPNSettings),
		f("break_apn_mms_setting", nil, (*view).breakAPNMMSSetting),
		f("break_vpn", nil, (*view).breakVPN),
		f("set_wifi_calling", params([]string{"enabled"}, "mms_over_wifi"), (*view).setWifiCalling),
		f("remove_app_permission", params([]string{"app_name", "permission"}), (*view).removeAppPermission),
		f("simulate_network_search", nil, (*view).simulateNetworkSearchFn),
		f("assert_airplane_mode_status", status, (*view).assertAirplaneModeStatus),
		f("assert_service_status", status, (*view).assertServiceStatus),
		f("assert_mobile_data_status", status, (*view).assertMobileDataStatus),
		f("assert_mobile_roaming_status", status, (*view).assertMobileRoamingStatus),
		f("assert_mobile_data_saver_mode_status", status, (*view).assertMobileDataSaverModeStatus),
		f("assert_internet_speed", params([]string{"expected_speed"}, "expected_desc"), (*view).assertInternetSpeed),
		f("assert_internet_not_excellent", nil, (*view).assertInternetNotExcellent),
		f("assert_can_send_mms", status, (*view).assertCanSendMMS),
		f("assert_mobile_data_usage_exceeded", status, (*view).assertMobileDataUsageExceeded),
	)
}

// Sync is τ²'s TelecomEnvironment.sync_tools(): it copies the line's state
// into the user's surroundings (line active, roaming allowed, data usage
// exceeded) and moves payment requests between the agent's bills and the
// user's phone. It never re-runs the network search: device fields derived
// from the line change only when a user action triggers a search.
func Sync(agent *DB, user *UserDB) error {
	s := &user.Surroundings
	if s.PhoneNumber == nil {
		return nil
	}
	phone := *s.PhoneNumber
	ae := &view{db: agent}
	line, err := ae.lineByPhone(phone)
	if err != nil {
		return err
	}
	s.LineActive = line.Status == LineActive
	s.RoamingAllowed = line.RoamingEnabled
	plan, err := ae.planByID(line.PlanID)
	if err != nil {
		return err
	}
	s.MobileDataUsageExceeded = line.DataUsedGB >= float64(plan.DataLimitGB+line.DataRefuelingGB)
	if pr := s.PaymentRequest; pr != nil && pr.Paid {
		b, err := ae.billByID(pr.BillID)
		if err != nil {
			return err
		}
		b.Status = BillPaid
		s.PaymentRequest = nil
	}
	if s.PaymentRequest == nil {
		c, err := ae.customerByPhone(phone)
		if err != nil {
			return err
		}
		bills, err := ae.billsAwaitingPayment(c)
		if err != nil {
			return err
		}
		if len(bills) != 0 {
			s.PaymentRequest = &PaymentRequest{BillID: bills[0].BillID, AmountDue: bills[0].TotalDue}
		}
	}
	return nil
}

// syncHook adapts Sync to the framework. The DBs can only be of other types
// after τ²'s initialization_data aliasing quirk, which telecom tasks never
// trigger; that case is reported, not guessed.
func syncHook(e *env.Environment) error {
	agent, ok1 := e.Agent.DB.(*DB)
	user, ok2 := e.User.DB.(*UserDB)
	if !ok1 || !ok2 {
		return fmt.Errorf("telecom: sync_tools: unexpected DB types %T / %T", e.Agent.DB, e.User.DB)
	}
	return Sync(agent, user)
}

// Policy assembles τ²'s telecom policy text for a variant ("manual" or
// "workflow") and mode.
func Policy(dataDir string, workflow, solo bool) (string, error) {
	main, tech := MainPolicyFile, TechSupportManualFile
	switch {
	case solo && workflow:
		main, tech = MainPolicySoloFile, TechSupportWorkflowSoloFile
	case solo:
		main = MainPolicySoloFile // τ² reuses the manual for solo mode
	case workflow:
		tech = TechSupportWorkflowFile
	}
	m, err := data.ReadFile(dataDir, DomainManual, main)
	if err != nil {
		return "", fmt.Errorf("telecom: policy: %w", err)
	}
	t, err := data.ReadFile(dataDir, DomainManual, tech)
	if err != nil {
		return "", fmt.Errorf("telecom: policy: %w", err)
	}
	return "<main_policy>\n" + m + "\n</main_policy>\n<tech_support_policy>\n" + t + "\n</tech_support_policy>", nil
}

// Load returns the telecom DBs of a data directory, loaded once per process.
func Load(dataDir string) (*Data, error) {
	return env.LoadOnce("telecom:"+dataDir, func() (*Data, error) {
		return LoadDir(data.DomainDir(dataDir, DomainManual))
	})
}

// NewEnvironment builds a fresh telecom environment (its own copies of the
// DBs) for one episode, synced as τ²'s constructor does.
func NewEnvironment(d *Data, policy, domain string, solo bool) (*env.Environment, error) {
	e := &env.Environment{
		Domain:   domain,
		Policy:   policy,
		Agent:    env.Side{Toolkit: AgentToolkit, DB: d.DB.Clone()},
		User:     env.Side{Toolkit: UserToolkit, DB: d.UserDB.Clone()},
		Solo:     solo,
		SyncHook: syncHook,
	}
	if err := e.Sync(); err != nil {
		return nil, fmt.Errorf("telecom: new environment: %w", err)
	}
	return e, nil
}

func constructor(workflow bool) env.Constructor {
	domain := DomainManual
	if workflow {
		domain = DomainWorkflow
	}
	return func(opts env.Options) (*env.Environment, error) {
		dir, err := data.Dir(opts.DataDir)
		if err != nil {
			return nil, err
		}
		d, err := Load(dir)
		if err != nil {
			return nil, err
		}
		policy, err := env.LoadOnce(fmt.Sprintf("telecom-policy:%s:%v:%v", dir, workflow, opts.Solo), func() (string, error) {
			return Policy(dir, workflow, opts.Solo)
		})
		if err != nil {
			return nil, err
		}
		return NewEnvironment(d, policy, domain, opts.Solo)
	}
}

func init() {
	env.Register(DomainManual, constructor(false))
	env.Register(DomainWorkflow, constructor(true))
}
