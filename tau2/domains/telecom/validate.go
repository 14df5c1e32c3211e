package telecom

import (
	"math"
	"strconv"
	"strings"

	"tau2rl/tau2/pyjson"
)

// Validation of generic values (loaded TOML, merged initialization_data,
// set_apn_settings arguments) into the telecom models, following pydantic's
// lax mode for the field types τ² declares and its extra="forbid" config
// (τ²'s BaseModelNoExtra): unknown keys are errors. Failures are
// *pyjson.ValidationError so their text reads like τ²'s.

// fields reads the fields of one model from a generic object. The first
// problem is kept in err; later reads return zero values.
type fields struct {
	o     *pyjson.Object
	path  []any
	model string
	used  map[string]bool
	err   error
}

func newFields(v any, path []any, model string) *fields {
	f := &fields{path: path, model: model, used: map[string]bool{}}
	o, ok := v.(*pyjson.Object)
	if !ok {
		f.err = pyjson.NewValidationError(model, clonePath(path), "Input should be a valid dictionary or instance of "+model, "model_type", v)
		return f
	}
	f.o = o
	return f
}

func clonePath(p []any) []any { return append([]any{}, p...) }

func (f *fields) loc(name string) []any { return append(clonePath(f.path), name) }

func (f *fields) fail(name, msg, typ string, input any) {
	if f.err == nil {
		f.err = pyjson.NewValidationError(f.model, f.loc(name), msg, typ, input)
	}
}

// get returns the raw value of name; missing required fields are reported.
func (f *fields) get(name string, required bool) (any, bool) {
	if f.err != nil {
		return nil, false
	}
	f.used[name] = true
	v, ok := f.o.Get(name)
	if !ok {
		if required {
			f.err = pyjson.NewValidationError(f.model, f.loc(name), "Field required", "missing", f.o)
		}
		return nil, false
	}
	return v, true
}

// finish reports the first error, or an extra key if every field validated.
func (f *fields) finish() error {
	if f.err != nil {
		return f.err
	}
	for k, v := range f.o.All() {
		if !f.used[k] {
			return pyjson.NewValidationError(f.model, f.loc(k), "Extra inputs are not permitted", "extra_forbidden", v)
		}
	}
	return nil
}

func (f *fields) str(name string, required bool, def string) string {
	v, ok := f.get(name, required)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		f.fail(name, "Input should be a valid string", "string_type", v)
	}
	return s
}

// optStr reads an Optional[str] field.
func (f *fields) optStr(name string, def *string) *string {
	v, ok := f.get(name, false)
	if !ok {
		return clonePtr(def)
	}
	if v == nil {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		f.fail(name, "Input should be a valid string", "string_type", v)
		return nil
	}
	return &s
}

func (f *fields) float(name string, required bool, def float64) float64 {
	v, ok := f.get(name, required)
	if !ok {
		return def
	}
	x, err := laxFloat(v)
	if err != "" {
		f.fail(name, err, "float_type", v)
	}
	return x
}

func (f *fields) integer(name string, required bool, def int64) int64 {
	v, ok := f.get(name, required)
	if !ok {
		return def
	}
	x, err := laxInt(v)
	if err != "" {
		f.fail(name, err, "int_type", v)
	}
	return x
}

func (f *fields) optInt(name string) *int64 {
	v, ok := f.get(name, false)
	if !ok || v == nil {
		return nil
	}
	x, err := laxInt(v)
	if err != "" {
		f.fail(name, err, "int_type", v)
		return nil
	}
	return &x
}

func (f *fields) boolean(name string, required bool, def bool) bool {
	v, ok := f.get(name, required)
	if !ok {
		return def
	}
	b, good := pyjson.LaxBool(v)
	if !good {
		f.fail(name, "Input should be a valid boolean", "bool_type", v)
	}
	return b
}

func (f *fields) enum(name string, allowed []string, required bool, def string) string {
	v, ok := f.get(name, required)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if isStr {
		for _, a := range allowed {
			if a == s {
				return s
			}
		}
	}
	f.fail(name, "Input should be "+enumList(allowed), "enum", v)
	return def
}

// enumList renders pydantic's "'a', 'b' or 'c'".
func enumList(allowed []string) string {
	var b strings.Builder
	for i, a := range allowed {
		switch {
		case i == 0:
		case i == len(allowed)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(pyjson.Repr(a))
	}
	return b.String()
}

func (f *fields) date(name string, required bool) Date {
	v, ok := f.get(name, required)
	if !ok {
		return Date{}
	}
	return f.dateValue(name, v)
}

func (f *fields) dateValue(name string, v any) Date {
	s, isStr := v.(string)
	if !isStr {
		f.fail(name, "Input should be a valid date", "date_type", v)
		return Date{}
	}
	d, err := parseDate(s)
	if err != nil {
		f.fail(name, "Input should be a valid date in the format YYYY-MM-DD", "date_from_datetime_parsing", v)
	}
	return d
}

func (f *fields) optDate(name string) *Date {
	v, ok := f.get(name, false)
	if !ok || v == nil {
		return nil
	}
	d := f.dateValue(name, v)
	return &d
}

func (f *fields) dateTimeValue(name string, v any) DateTime {
	s, isStr := v.(string)
	if !isStr {
		f.fail(name, "Input should be a valid datetime", "datetime_type", v)
		return DateTime{}
	}
	d, err := parseDateTime(s)
	if err != nil {
		f.fail(name, "Input should be a valid datetime", "datetime_parsing", v)
	}
	return d
}

func (f *fields) optDateTime(name string) *DateTime {
	v, ok := f.get(name, false)
	if !ok || v == nil {
		return nil
	}
	d := f.dateTimeValue(name, v)
	return &d
}

func (f *fields) strList(name string) []string {
	v, ok := f.get(name, false)
	if !ok {
		return []string{}
	}
	l, isList := v.([]any)
	if !isList {
		f.fail(name, "Input should be a valid list", "list_type", v)
		return nil
	}
	out := make([]string, len(l))
	for i, el := range l {
		s, isStr := el.(string)
		if !isStr && f.err == nil {
			f.err = pyjson.NewValidationError(f.model, append(f.loc(name), i), "Input should be a valid string", "string_type", el)
		}
		out[i] = s
	}
	return out
}

// list reads a list of sub-models with fn.
func (f *fields) list(name string, required bool, fn func(v any, path []any) error) {
	v, ok := f.get(name, required)
	if !ok {
		return
	}
	l, isList := v.([]any)
	if !isList {
		f.fail(name, "Input should be a valid list", "list_type", v)
		return
	}
	for i, el := range l {
		if err := fn(el, append(f.loc(name), i)); err != nil {
			if f.err == nil {
				f.err = err
			}
			return
		}
	}
}

func laxFloat(v any) (float64, string) {
	switch x := v.(type) {
	case float64:
		return x, ""
	case int64:
		return float64(x), ""
	case bool:
		if x {
			return 1, ""
		}
		return 0, ""
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, "Input should be a valid number, unable to parse string as a number"
		}
		return f, ""
	}
	return 0, "Input should be a valid number"
}

func laxInt(v any) (int64, string) {
	switch x := v.(type) {
	case int64:
		return x, ""
	case bool:
		if x {
			return 1, ""
		}
		return 0, ""
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, "Input should be a valid integer, got a number with a fractional part"
		}
		if x < -9.2e18 || x > 9.2e18 {
			return 0, "Input should be a valid integer"
		}
		return int64(x), ""
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, "Input should be a valid integer, unable to parse string as an integer"
		}
		return n, ""
	}
	return 0, "Input should be a valid integer"
}

// ---- agent DB ----

func validatePlan(v any, path []any) (*Plan, error) {
	f := newFields(v, path, "TelecomDB")
	p := &Plan{
		PlanID:                  f.str("plan_id", true, ""),
		Name:                    f.str("name", true, ""),
		DataLimitGB:             f.float("data_limit_gb", true, 0),
		PricePerMonth:           f.float("price_per_month", true, 0),
		DataRefuelingPricePerGB: f.float("data_refueling_price_per_gb", true, 0),
	}
	return p, f.finish()
}

func validateDevice(v any, path []any) (*Device, error) {
	f := newFields(v, path, "TelecomDB")
	d := &Device{
		DeviceID:             f.str("device_id", true, ""),
		DeviceType:           f.enum("device_type", deviceTypes, true, ""),
		Model:                f.str("model", true, ""),
		IMEI:                 f.optStr("imei", nil),
		IsESIMCapable:        f.boolean("is_esim_capable", true, false),
		Activated:            f.boolean("activated", false, false),
		ActivationDate:       f.optDateTime("activation_date"),
		LastESIMTransferDate: f.optDateTime("last_esim_transfer_date"),
	}
	return d, f.finish()
}

func validateLine(v any, path []any) (*Line, error) {
	f := newFields(v, path, "TelecomDB")
	l := &Line{
		LineID:                 f.str("line_id", true, ""),
		PhoneNumber:            f.str("phone_number", true, ""),
		Status:                 LineStatus(f.enum("status", lineStatuses, false, string(LinePendingActivation))),
		PlanID:                 f.str("plan_id", true, ""),
		DeviceID:               f.optStr("device_id", nil),
		DataUsedGB:             f.float("data_used_gb", false, 0),
		DataRefuelingGB:        f.float("data_refueling_gb", false, 0),
		RoamingEnabled:         f.boolean("roaming_enabled", false, false),
		ContractEndDate:        f.optDate("contract_end_date"),
		LastPlanChangeDate:     f.optDate("last_plan_change_date"),
		LastSIMReplacementDate: f.optDate("last_sim_replacement_date"),
		SuspensionStartDate:    f.optDate("suspension_start_date"),
	}
	return l, f.finish()
}

func validateLineItem(v any, path []any) (LineItem, error) {
	f := newFields(v, path, "TelecomDB")
	li := LineItem{
		Description: f.str("description", true, ""),
		Amount:      f.float("amount", true, 0),
		Date:        f.date("date", true),
		ItemType:    f.str("item_type", true, ""),
	}
	return li, f.finish()
}

func validateBill(v any, path []any) (*Bill, error) {
	f := newFields(v, path, "TelecomDB")
	b := &Bill{
		BillID:      f.str("bill_id", true, ""),
		CustomerID:  f.str("customer_id", true, ""),
		PeriodStart: f.date("period_start", true),
		PeriodEnd:   f.date("period_end", true),
		IssueDate:   f.date("issue_date", true),
		TotalDue:    f.float("total_due", true, 0),
		DueDate:     f.date("due_date", true),
		LineItems:   []LineItem{},
	}
	f.list("line_items", false, func(v any, p []any) error {
		li, err := validateLineItem(v, p)
		b.LineItems = append(b.LineItems, li)
		return err
	})
	b.Status = BillStatus(f.enum("status", billStatuses, false, string(BillDraft)))
	return b, f.finish()
}

func validateCustomer(v any, path []any) (*Customer, error) {
	f := newFields(v, path, "TelecomDB")
	c := &Customer{
		CustomerID:  f.str("customer_id", true, ""),
		FullName:    f.str("full_name", true, ""),
		DateOfBirth: f.str("date_of_birth", true, ""),
		Email:       f.str("email", true, ""),
		PhoneNumber: f.str("phone_number", true, ""),
	}
	if av, ok := f.get("address", true); ok {
		af := newFields(av, f.loc("address"), "TelecomDB")
		c.Address = Address{
			Street:  af.str("street", true, ""),
			City:    af.str("city", true, ""),
			State:   af.str("state", true, ""),
			ZipCode: af.str("zip_code", true, ""),
		}
		if err := af.finish(); err != nil && f.err == nil {
			f.err = err
		}
	}
	c.AccountStatus = f.enum("account_status", accountStatuses, false, "Pending Verification")
	c.PaymentMethods = []PaymentMethod{}
	f.list("payment_methods", false, func(v any, p []any) error {
		pf := newFields(v, p, "TelecomDB")
		pm := PaymentMethod{
			MethodType:         pf.enum("method_type", paymentMethodTypes, true, ""),
			AccountNumberLast4: pf.str("account_number_last_4", true, ""),
			ExpirationDate:     pf.str("expiration_date", true, ""),
		}
		c.PaymentMethods = append(c.PaymentMethods, pm)
		return pf.finish()
	})
	c.LineIDs = f.strList("line_ids")
	c.BillIDs = f.strList("bill_ids")
	if cv, ok := f.get("created_at", false); ok {
		c.CreatedAt = f.dateTimeValue("created_at", cv)
	} else {
		// τ²'s default is the unvalidated date 2025-01-01 (DEFAULT_START_DATE).
		c.CreatedAt = DateTime{Date: Date{Year: 2025, Month: 1, Day: 1}, DateOnly: true}
	}
	c.LastExtensionDate = f.optDate("last_extension_date")
	c.GoodwillCreditUsedThisYear = f.float("goodwill_credit_used_this_year", false, 0)
	return c, f.finish()
}

// validateDB validates a generic value (db.toml or a merged dump) as TelecomDB.
func validateDB(v any) (*DB, error) {
	f := newFields(v, nil, "TelecomDB")
	db := &DB{Plans: []*Plan{}, Customers: []*Customer{}, Lines: []*Line{}, Bills: []*Bill{}, Devices: []*Device{}}
	f.list("plans", false, func(v any, p []any) error {
		x, err := validatePlan(v, p)
		db.Plans = append(db.Plans, x)
		return err
	})
	f.list("customers", false, func(v any, p []any) error {
		x, err := validateCustomer(v, p)
		db.Customers = append(db.Customers, x)
		return err
	})
	f.list("lines", false, func(v any, p []any) error {
		x, err := validateLine(v, p)
		db.Lines = append(db.Lines, x)
		return err
	})
	f.list("bills", false, func(v any, p []any) error {
		x, err := validateBill(v, p)
		db.Bills = append(db.Bills, x)
		return err
	})
	f.list("devices", false, func(v any, p []any) error {
		x, err := validateDevice(v, p)
		db.Devices = append(db.Devices, x)
		return err
	})
	if err := f.finish(); err != nil {
		return nil, err
	}
	return db, nil
}

// ---- user DB ----

// validateAPNSettings validates an APNSettings object (also the argument of
// the set_apn_settings tool, which τ² builds with APNSettings(**dict)).
func validateAPNSettings(v any, path []any, model string) (APNSettings, error) {
	def := DefaultAPNSettings()
	f := newFields(v, path, model)
	a := APNSettings{
		APNName:       f.enum("apn_name", apnNames, false, APNInternet),
		ResetAtReboot: f.boolean("reset_at_reboot", false, false),
		MMSAPN:        f.optStr("mms_apn", def.MMSAPN),
		MMSCURL:       f.optStr("mmsc_url", def.MMSCURL),
		MMSProxy:      f.optStr("mms_proxy", nil),
		MMSPort:       f.optInt("mms_port"),
	}
	return a, f.finish()
}

func validateVPNDetails(v any, path []any) (*VPNDetails, error) {
	f := newFields(v, path, "TelecomUserDB")
	d := &VPNDetails{
		ServerAddress:     f.optStr("server_address", nil),
		Protocol:          f.optStr("protocol", nil),
		ServerPerformance: f.enum("server_performance", performanceLevels, false, PerfUnknown),
	}
	return d, f.finish()
}

func validatePhoneDevice(v any, path []any) (PhoneDevice, error) {
	def := DefaultPhoneDevice()
	f := newFields(v, path, "TelecomUserDB")
	d := PhoneDevice{
		SimCardStatus:              f.enum("sim_card_status", simStatuses, false, def.SimCardStatus),
		SimCardMissing:             f.boolean("sim_card_missing", false, false),
		AirplaneMode:               f.boolean("airplane_mode", false, false),
		NetworkSignalStrength:      f.enum("network_signal_strength", signalStrengths, false, def.NetworkSignalStrength),
		NetworkTechnologyConnected: f.enum("network_technology_connected", networkTechs, false, def.NetworkTechnologyConnected),
		NetworkConnectionStatus:    f.enum("network_connection_status", networkStatuses, false, def.NetworkConnectionStatus),
		BatteryLevel:               f.integer("battery_level", false, def.BatteryLevel),
		DataEnabled:                f.boolean("data_enabled", false, true),
		RoamingEnabled:             f.boolean("roaming_enabled", false, false),
		NetworkModePreference:      f.enum("network_mode_preference", networkModes, false, def.NetworkModePreference),
		ActiveAPNSettings:          def.ActiveAPNSettings,
	}
	if av, ok := f.get("active_apn_settings", false); ok && f.err == nil {
		a, err := validateAPNSettings(av, f.loc("active_apn_settings"), "TelecomUserDB")
		if err != nil {
			f.err = err
		}
		d.ActiveAPNSettings = a
	}
	d.WifiEnabled = f.boolean("wifi_enabled", false, false)
	d.WifiConnected = f.boolean("wifi_connected", false, false)
	d.WifiSSID = f.optStr("wifi_ssid", nil)
	d.WifiSignalStrength = f.enum("wifi_signal_strength", signalStrengths, false, SignalNone)
	d.WifiCallingEnabled = f.boolean("wifi_calling_enabled", false, false)
	d.WifiCallingMMSOverWifi = f.boolean("wifi_calling_mms_over_wifi", false, false)
	d.DataSaverMode = f.boolean("data_saver_mode", false, false)
	d.VPNEnabledSetting = f.boolean("vpn_enabled_setting", false, false)
	d.VPNConnected = f.boolean("vpn_connected", false, false)
	if vv, ok := f.get("vpn_details", false); ok && vv != nil && f.err == nil {
		det, err := validateVPNDetails(vv, f.loc("vpn_details"))
		if err != nil {
			f.err = err
		}
		d.VPNDetails = det
	}
	d.AppStatuses = def.AppStatuses
	if av, ok := f.get("app_statuses", false); ok && f.err == nil {
		apps, err := validateAppStatuses(av, f.loc("app_statuses"))
		if err != nil {
			f.err = err
		}
		d.AppStatuses = apps
	}
	return d, f.finish()
}

func validateAppStatuses(v any, path []any) (*pyjson.Map[*AppStatus], error) {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, pyjson.NewValidationError("TelecomUserDB", clonePath(path), "Input should be a valid dictionary", "dict_type", v)
	}
	apps := pyjson.NewMap[*AppStatus](o.Len())
	for k, av := range o.All() {
		p := append(clonePath(path), k)
		f := newFields(av, p, "TelecomUserDB")
		a := &AppStatus{AppName: f.str("app_name", true, "")}
		if pv, ok := f.get("permissions", false); ok && f.err == nil {
			pf := newFields(pv, f.loc("permissions"), "TelecomUserDB")
			a.Permissions = AppPermissions{
				SMS:     pf.boolean("sms", false, false),
				Storage: pf.boolean("storage", false, false),
				Phone:   pf.boolean("phone", false, false),
				Network: pf.boolean("network", false, false),
			}
			if err := pf.finish(); err != nil {
				f.err = err
			}
		}
		if err := f.finish(); err != nil {
			return nil, err
		}
		apps.Set(k, a)
	}
	return apps, nil
}

func validateSurroundings(v any, path []any) (Surroundings, error) {
	def := DefaultSurroundings()
	f := newFields(v, path, "TelecomUserDB")
	s := Surroundings{
		Name:           f.optStr("name", nil),
		PhoneNumber:    f.optStr("phone_number", nil),
		IsAbroad:       f.boolean("is_abroad", false, false),
		RoamingAllowed: f.boolean("roaming_allowed", false, false),
		SignalStrength: def.SignalStrength,
	}
	if sv, ok := f.get("signal_strength", false); ok && f.err == nil {
		o, isObj := sv.(*pyjson.Object)
		if !isObj {
			f.fail("signal_strength", "Input should be a valid dictionary", "dict_type", sv)
		} else {
			m := pyjson.NewMap[string](o.Len())
			for k, x := range o.All() {
				if !contains(networkTechs, k) {
					f.fail("signal_strength", "Input should be "+enumList(networkTechs), "enum", k)
					break
				}
				str, isStr := x.(string)
				if !isStr || !contains(signalStrengths, str) {
					f.fail("signal_strength", "Input should be "+enumList(signalStrengths), "enum", x)
					break
				}
				m.Set(k, str)
			}
			s.SignalStrength = m
		}
	}
	s.MobileDataUsageExceeded = f.boolean("mobile_data_usage_exceeded", false, false)
	s.LineActive = f.boolean("line_active", false, true)
	if pv, ok := f.get("payment_request", false); ok && pv != nil && f.err == nil {
		pf := newFields(pv, f.loc("payment_request"), "TelecomUserDB")
		s.PaymentRequest = &PaymentRequest{
			BillID:    pf.str("bill_id", true, ""),
			AmountDue: pf.float("amount_due", true, 0),
			Paid:      pf.boolean("paid", false, false),
		}
		if err := pf.finish(); err != nil {
			f.err = err
		}
	}
	return s, f.finish()
}

// validateUserDB validates a generic value (user_db.toml or a merged dump) as TelecomUserDB.
func validateUserDB(v any) (*UserDB, error) {
	f := newFields(v, nil, "TelecomUserDB")
	u := &UserDB{Device: DefaultPhoneDevice(), Surroundings: DefaultSurroundings()}
	if dv, ok := f.get("device", false); ok && f.err == nil {
		d, err := validatePhoneDevice(dv, []any{"device"})
		if err != nil {
			f.err = err
		}
		u.Device = d
	}
	if sv, ok := f.get("surroundings", false); ok && f.err == nil {
		s, err := validateSurroundings(sv, []any{"surroundings"})
		if err != nil {
			f.err = err
		}
		u.Surroundings = s
	}
	if err := f.finish(); err != nil {
		return nil, err
	}
	return u, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
