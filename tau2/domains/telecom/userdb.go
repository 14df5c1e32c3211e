package telecom

import (
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// The user-side database (τ²'s TelecomUserDB, user_data_model.py): the state
// of the customer's phone and of the world around it. Enum-valued fields hold
// the enum's string value; validation on load rejects anything else.

// Enum values of the device model, in τ²'s declaration order.
const (
	SimActive    = "active"
	SimMissing   = "missing"
	SimLockedPIN = "locked_pin"
	SimLockedPUK = "locked_puk"

	TechNone = "none"
	Tech2G   = "2G"
	Tech3G   = "3G"
	Tech4G   = "4G"
	Tech5G   = "5G"

	Mode4G5GPreferred = "4g_5g_preferred"
	Mode4GOnly        = "4g_only"
	Mode3GOnly        = "3g_only"
	Mode2GOnly        = "2g_only"

	SignalNone      = "none"
	SignalPoor      = "poor"
	SignalFair      = "fair"
	SignalGood      = "good"
	SignalExcellent = "excellent"

	PerfUnknown   = "unknown"
	PerfPoor      = "poor"
	PerfFair      = "fair"
	PerfGood      = "good"
	PerfExcellent = "excellent"

	StatusConnected     = "connected"
	StatusSearching     = "searching"
	StatusNoService     = "no_service"
	StatusEmergencyOnly = "emergency_only"

	APNInternet = "internet"
	APNBroken   = "broken"
)

var (
	simStatuses        = []string{SimActive, SimMissing, SimLockedPIN, SimLockedPUK}
	networkTechs       = []string{TechNone, Tech2G, Tech3G, Tech4G, Tech5G}
	networkModes       = []string{Mode4G5GPreferred, Mode4GOnly, Mode3GOnly, Mode2GOnly}
	signalStrengths    = []string{SignalNone, SignalPoor, SignalFair, SignalGood, SignalExcellent}
	performanceLevels  = []string{PerfUnknown, PerfPoor, PerfFair, PerfGood, PerfExcellent}
	networkStatuses    = []string{StatusConnected, StatusSearching, StatusNoService, StatusEmergencyOnly}
	apnNames           = []string{APNInternet, APNBroken}
	appPermissionNames = []string{"sms", "storage", "phone", "network"}
)

// APNSettings is the active Access Point Name configuration.
type APNSettings struct {
	APNName       string
	ResetAtReboot bool
	MMSAPN        *string
	MMSCURL       *string
	MMSProxy      *string
	MMSPort       *int64
}

// DefaultAPNSettings returns τ²'s APNSettings() defaults (what a reboot after
// reset_apn_settings restores).
func DefaultAPNSettings() APNSettings {
	mmsAPN := "mms"
	url := "http://mms.carrier.com/mms/wapenc"
	return APNSettings{APNName: APNInternet, MMSAPN: &mmsAPN, MMSCURL: &url}
}

// VPNDetails describes an active VPN connection.
type VPNDetails struct {
	ServerAddress     *string
	Protocol          *string
	ServerPerformance string
}

// AppPermissions are the permissions τ² tracks per app, in its field order.
type AppPermissions struct {
	SMS, Storage, Phone, Network bool
}

// get returns the permission named name (one of appPermissionNames).
func (p *AppPermissions) get(name string) bool {
	switch name {
	case "sms":
		return p.SMS
	case "storage":
		return p.Storage
	case "phone":
		return p.Phone
	default:
		return p.Network
	}
}

// set sets the permission named name, reporting false for an unknown name.
func (p *AppPermissions) set(name string, v bool) bool {
	switch name {
	case "sms":
		p.SMS = v
	case "storage":
		p.Storage = v
	case "phone":
		p.Phone = v
	case "network":
		p.Network = v
	default:
		return false
	}
	return true
}

// AppStatus is one installed app.
type AppStatus struct {
	AppName     string
	Permissions AppPermissions
}

// PhoneDevice is the simulated phone (τ²'s MockPhoneAttributes).
type PhoneDevice struct {
	SimCardStatus              string
	SimCardMissing             bool
	AirplaneMode               bool
	NetworkSignalStrength      string
	NetworkTechnologyConnected string
	NetworkConnectionStatus    string
	BatteryLevel               int64
	DataEnabled                bool
	RoamingEnabled             bool
	NetworkModePreference      string
	ActiveAPNSettings          APNSettings
	WifiEnabled                bool
	WifiConnected              bool
	WifiSSID                   *string
	WifiSignalStrength         string
	WifiCallingEnabled         bool
	WifiCallingMMSOverWifi     bool
	DataSaverMode              bool
	VPNEnabledSetting          bool
	VPNConnected               bool
	VPNDetails                 *VPNDetails
	// AppStatuses is ordered: check_installed_apps lists apps in dict order.
	AppStatuses *pyjson.Map[*AppStatus]
}

// DefaultPhoneDevice returns MockPhoneAttributes() with τ²'s defaults.
func DefaultPhoneDevice() PhoneDevice {
	apps := pyjson.NewMap[*AppStatus](2)
	apps.Set("messaging", &AppStatus{AppName: "messaging", Permissions: AppPermissions{SMS: true, Storage: true, Phone: true}})
	apps.Set("browser", &AppStatus{AppName: "browser", Permissions: AppPermissions{Network: true, Storage: true}})
	return PhoneDevice{
		SimCardStatus:              SimActive,
		NetworkSignalStrength:      SignalGood,
		NetworkTechnologyConnected: Tech5G,
		NetworkConnectionStatus:    StatusConnected,
		BatteryLevel:               80,
		DataEnabled:                true,
		NetworkModePreference:      Mode4G5GPreferred,
		ActiveAPNSettings:          DefaultAPNSettings(),
		WifiSignalStrength:         SignalNone,
		AppStatuses:                apps,
	}
}

// PaymentRequest is a bill the agent asked the user to pay.
type PaymentRequest struct {
	BillID    string
	AmountDue float64
	Paid      bool
}

// Surroundings is the world around the user (τ²'s UserSurroundings).
type Surroundings struct {
	Name                    *string
	PhoneNumber             *string
	IsAbroad                bool
	RoamingAllowed          bool
	SignalStrength          *pyjson.Map[string] // network technology -> signal strength
	MobileDataUsageExceeded bool
	LineActive              bool
	PaymentRequest          *PaymentRequest
}

// DefaultSurroundings returns UserSurroundings() with τ²'s defaults.
func DefaultSurroundings() Surroundings {
	sig := pyjson.NewMap[string](4)
	sig.Set(Tech2G, SignalPoor)
	sig.Set(Tech3G, SignalFair)
	sig.Set(Tech4G, SignalGood)
	sig.Set(Tech5G, SignalExcellent)
	return Surroundings{SignalStrength: sig, LineActive: true}
}

// UserDB is the user-side telecom database.
type UserDB struct {
	Device       PhoneDevice  `json:"device"`
	Surroundings Surroundings `json:"surroundings"`

	// vpnDefault emulates TelecomUserTools.default_vpn_details, a
	// class-level object that connect_vpn assigns to the device by
	// reference and break_vpn degrades in place. In τ² it is shared by the
	// whole Python process (after any break_vpn, every later connect in any
	// episode yields a poor VPN); here it is shared within one environment
	// only, so episodes stay independent and deterministic.
	vpnDefault *VPNDetails
}

func newDefaultVPN() *VPNDetails {
	addr, proto := "192.168.1.1", "OpenVPN"
	return &VPNDetails{ServerAddress: &addr, Protocol: &proto, ServerPerformance: PerfExcellent}
}

// Fork implements env.DB.
func (u *UserDB) Fork() env.DB { return u.Clone() }

// Clone returns a deep copy. A copy of a loaded base gets a fresh default
// VPN object; a copy of a live environment keeps the device's aliasing of it.
func (u *UserDB) Clone() *UserDB {
	c := &UserDB{Device: u.Device, Surroundings: u.Surroundings}
	if u.vpnDefault == nil {
		c.vpnDefault = newDefaultVPN()
	} else {
		v := *u.vpnDefault
		c.vpnDefault = &v
	}
	d := &c.Device
	d.ActiveAPNSettings.MMSAPN = clonePtr(u.Device.ActiveAPNSettings.MMSAPN)
	d.ActiveAPNSettings.MMSCURL = clonePtr(u.Device.ActiveAPNSettings.MMSCURL)
	d.ActiveAPNSettings.MMSProxy = clonePtr(u.Device.ActiveAPNSettings.MMSProxy)
	d.ActiveAPNSettings.MMSPort = clonePtr(u.Device.ActiveAPNSettings.MMSPort)
	d.WifiSSID = clonePtr(u.Device.WifiSSID)
	if u.Device.VPNDetails != nil && u.Device.VPNDetails == u.vpnDefault {
		d.VPNDetails = c.vpnDefault
	} else if u.Device.VPNDetails != nil {
		v := *u.Device.VPNDetails
		v.ServerAddress = clonePtr(v.ServerAddress)
		v.Protocol = clonePtr(v.Protocol)
		d.VPNDetails = &v
	}
	d.AppStatuses = pyjson.NewMap[*AppStatus](u.Device.AppStatuses.Len())
	for k, a := range u.Device.AppStatuses.All() {
		cp := *a
		d.AppStatuses.Set(k, &cp)
	}
	s := &c.Surroundings
	s.Name = clonePtr(u.Surroundings.Name)
	s.PhoneNumber = clonePtr(u.Surroundings.PhoneNumber)
	s.SignalStrength = u.Surroundings.SignalStrength.ShallowClone()
	s.PaymentRequest = clonePtr(u.Surroundings.PaymentRequest)
	return c
}

func int64PtrValue(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func (a *APNSettings) dump() *pyjson.Object {
	return pyjson.NewObject(
		"apn_name", a.APNName,
		"reset_at_reboot", a.ResetAtReboot,
		"mms_apn", strPtrValue(a.MMSAPN),
		"mmsc_url", strPtrValue(a.MMSCURL),
		"mms_proxy", strPtrValue(a.MMSProxy),
		"mms_port", int64PtrValue(a.MMSPort),
	)
}

func (v *VPNDetails) dump() *pyjson.Object {
	return pyjson.NewObject(
		"server_address", strPtrValue(v.ServerAddress),
		"protocol", strPtrValue(v.Protocol),
		"server_performance", v.ServerPerformance,
	)
}

func (p *AppPermissions) dump() *pyjson.Object {
	return pyjson.NewObject("sms", p.SMS, "storage", p.Storage, "phone", p.Phone, "network", p.Network)
}

func (d *PhoneDevice) dump() *pyjson.Object {
	var vpn any
	if d.VPNDetails != nil {
		vpn = d.VPNDetails.dump()
	}
	apps := pyjson.NewObject()
	for k, a := range d.AppStatuses.All() {
		apps.Set(k, pyjson.NewObject("app_name", a.AppName, "permissions", a.Permissions.dump()))
	}
	return pyjson.NewObject(
		"sim_card_status", d.SimCardStatus,
		"sim_card_missing", d.SimCardMissing,
		"airplane_mode", d.AirplaneMode,
		"network_signal_strength", d.NetworkSignalStrength,
		"network_technology_connected", d.NetworkTechnologyConnected,
		"network_connection_status", d.NetworkConnectionStatus,
		"battery_level", d.BatteryLevel,
		"data_enabled", d.DataEnabled,
		"roaming_enabled", d.RoamingEnabled,
		"network_mode_preference", d.NetworkModePreference,
		"active_apn_settings", d.ActiveAPNSettings.dump(),
		"wifi_enabled", d.WifiEnabled,
		"wifi_connected", d.WifiConnected,
		"wifi_ssid", strPtrValue(d.WifiSSID),
		"wifi_signal_strength", d.WifiSignalStrength,
		"wifi_calling_enabled", d.WifiCallingEnabled,
		"wifi_calling_mms_over_wifi", d.WifiCallingMMSOverWifi,
		"data_saver_mode", d.DataSaverMode,
		"vpn_enabled_setting", d.VPNEnabledSetting,
		"vpn_connected", d.VPNConnected,
		"vpn_details", vpn,
		"app_statuses", apps,
	)
}

func (s *Surroundings) dump() *pyjson.Object {
	sig := pyjson.NewObject()
	for k, v := range s.SignalStrength.All() {
		sig.Set(k, v)
	}
	var pr any
	if s.PaymentRequest != nil {
		pr = pyjson.NewObject(
			"bill_id", s.PaymentRequest.BillID,
			"amount_due", s.PaymentRequest.AmountDue,
			"paid", s.PaymentRequest.Paid,
		)
	}
	return pyjson.NewObject(
		"name", strPtrValue(s.Name),
		"phone_number", strPtrValue(s.PhoneNumber),
		"is_abroad", s.IsAbroad,
		"roaming_allowed", s.RoamingAllowed,
		"signal_strength", sig,
		"mobile_data_usage_exceeded", s.MobileDataUsageExceeded,
		"line_active", s.LineActive,
		"payment_request", pr,
	)
}

// Dump returns the user DB as τ²'s TelecomUserDB.model_dump().
func (u *UserDB) Dump() *pyjson.Object {
	return pyjson.NewObject("device", u.Device.dump(), "surroundings", u.Surroundings.dump())
}

// MarshalPy implements pyjson.Marshaler.
func (d PhoneDevice) MarshalPy() (any, error) { return d.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (d *PhoneDevice) UnmarshalPy(v any) error {
	x, err := validatePhoneDevice(v, nil)
	if err != nil {
		return err
	}
	*d = x
	return nil
}

// MarshalPy implements pyjson.Marshaler.
func (s Surroundings) MarshalPy() (any, error) { return s.dump(), nil }

// UnmarshalPy implements pyjson.Unmarshaler.
func (s *Surroundings) UnmarshalPy(v any) error {
	x, err := validateSurroundings(v, nil)
	if err != nil {
		return err
	}
	*s = x
	return nil
}
