package telecom

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// User-side toolkit (τ²'s TelecomUserTools, user_tools.py): what the
// simulated customer can do on and see from their phone, plus the
// environment functions tasks use to break the phone and to check it.

const userClass = "TelecomUserTools"

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

func (e *view) checkStatusBar(kwargs) (any, error) {
	return "Status Bar: " + e.statusBar(), nil
}

func (e *view) checkNetworkStatus(kwargs) (any, error) {
	d := e.dev()
	lines := []string{
		"Airplane Mode: " + onOff(d.AirplaneMode),
		"SIM Card Status: " + e.simStatus(),
		"Cellular Connection: " + d.NetworkConnectionStatus,
		"Cellular Signal: " + d.NetworkSignalStrength,
		"Cellular Network Type: " + d.NetworkTechnologyConnected,
		"Mobile Data Enabled: " + yesNo(d.DataEnabled),
		"Data Roaming Enabled: " + yesNo(d.RoamingEnabled),
		"Wi-Fi Radio: " + onOff(d.WifiEnabled),
		"Wi-Fi Connected: " + yesNo(d.WifiConnected),
	}
	if d.WifiConnected {
		lines = append(lines, "Connected Wi-Fi Network: "+pyStr(strPtrValue(d.WifiSSID)))
	}
	return strings.Join(lines, "\n"), nil
}

func (e *view) checkNetworkModePreference(kwargs) (any, error) {
	return "Network Mode Preference: " + e.dev().NetworkModePreference, nil
}

func (e *view) setNetworkModePreference(k kwargs) (any, error) {
	v := k.get("mode", nil)
	mode, ok := v.(string)
	if !ok {
		// τ² would store the non-string as the preference and then fail on
		// `.value`; the Go port fails without corrupting the device.
		return nil, attrErr(v, "value")
	}
	if !contains(networkModes, mode) {
		return e.withStatusBar(fmt.Sprintf("Failed to set network mode: '%s' is not a valid option. Please use one of: %s", mode, strings.Join(networkModes, ", "))), nil
	}
	e.dev().NetworkModePreference = mode
	e.simulateNetworkSearch()
	return e.withStatusBar("Preferred Network Mode set to: " + mode), nil
}

func (e *view) runSpeedTest(kwargs) (any, error) {
	speed, desc, ok := e.speedTest()
	if !ok {
		return "Speed test failed: " + desc + ".", nil
	}
	var advice string
	switch desc {
	case "Very Poor":
		advice = "Connection is very slow. Basic web browsing might be difficult."
	case "Poor":
		advice = "Connection is slow. Web browsing may be sluggish, streaming difficult."
	case "Fair":
		advice = "Connection is okay for web browsing and some standard definition streaming."
	case "Good":
		advice = "Connection is good for most activities, including HD streaming."
	case "Excellent":
		advice = "Connection is very fast."
	}
	return fmt.Sprintf("Speed Test Result: %s Mbps (%s). %s", format2f(speed), desc, advice), nil
}

func (e *view) toggleAirplaneModeTool(kwargs) (any, error) {
	on := e.toggleAirplaneMode()
	return e.withStatusBar("Airplane Mode is now " + onOff(on) + "."), nil
}

func (e *view) checkSimStatus(kwargs) (any, error) {
	switch s := e.simStatus(); s {
	case SimActive:
		return "Your SIM card is active and working.", nil
	case SimMissing:
		return "No SIM card detected in the phone.", nil
	case SimLockedPIN:
		return "The SIM card is locked with a PIN code.", nil
	case SimLockedPUK:
		return "The SIM card is locked with a PUK code.", nil
	default:
		return "Unknown SIM status: " + s, nil
	}
}

func (e *view) reseatSimCard(kwargs) (any, error) {
	e.dev().SimCardMissing = false
	e.simulateNetworkSearch()
	return e.withStatusBar("SIM card re-seated successfully."), nil
}

func (e *view) toggleDataTool(kwargs) (any, error) {
	return e.withStatusBar("Mobile Data is now " + onOff(e.toggleData()) + "."), nil
}

func (e *view) toggleRoamingTool(kwargs) (any, error) {
	return e.withStatusBar("Data Roaming is now " + onOff(e.toggleRoaming()) + "."), nil
}

func (e *view) checkDataRestrictionStatus(kwargs) (any, error) {
	if e.dev().DataSaverMode {
		return "Data Saver mode is ON (limits data usage).", nil
	}
	return "Data Saver mode is OFF.", nil
}

func (e *view) toggleDataSaverModeTool(kwargs) (any, error) {
	return e.withStatusBar("Data Saver Mode is now " + onOff(e.toggleDataSaver()) + "."), nil
}

func (e *view) checkAPNSettings(kwargs) (any, error) {
	a := e.dev().ActiveAPNSettings
	name := a.APNName
	if name == "" {
		name = "Not Set"
	}
	url := "Not Set"
	if a.MMSCURL != nil && *a.MMSCURL != "" {
		url = *a.MMSCURL
	}
	return fmt.Sprintf("Current APN Name: %s\nMMSC URL (for picture messages): %s\n(These are technical settings, usually best left unchanged.)", name, url), nil
}

func (e *view) setAPNSettings(k kwargs) (any, error) {
	v := k.get("apn_settings", nil)
	if _, ok := v.(*pyjson.Object); !ok {
		// τ² would store the non-dict as the settings before failing on
		// `.apn_name`; the Go port fails without corrupting the device.
		return nil, attrErr(v, "apn_name")
	}
	a, err := validateAPNSettings(v, nil, "APNSettings")
	if err != nil {
		return nil, err
	}
	e.dev().ActiveAPNSettings = a
	e.simulateNetworkSearch()
	return e.withStatusBar("APN settings set to: " + a.APNName), nil
}

func (e *view) resetAPNSettings(kwargs) (any, error) {
	e.dev().ActiveAPNSettings.ResetAtReboot = true
	e.simulateNetworkSearch()
	return e.withStatusBar("APN settings will reset at reboot."), nil
}

func (e *view) checkWifiStatus(kwargs) (any, error) {
	d := e.dev()
	if !d.WifiEnabled {
		return "Wi-Fi is turned OFF.", nil
	}
	if d.WifiConnected {
		return fmt.Sprintf("Wi-Fi is ON and connected to '%s'. Signal strength: %s.", pyStr(strPtrValue(d.WifiSSID)), d.WifiSignalStrength), nil
	}
	return "Wi-Fi is ON but not connected to any network.", nil
}

func (e *view) toggleWifiTool(kwargs) (any, error) {
	state, ok := e.toggleWifi()
	if !ok {
		return e.withStatusBar("Cannot change Wi-Fi settings while Airplane Mode is ON."), nil
	}
	return e.withStatusBar("Wi-Fi is now " + onOff(state) + "."), nil
}

func (e *view) checkWifiCallingStatus(kwargs) (any, error) {
	return "Wi-Fi Calling is currently turned " + onOff(e.dev().WifiCallingEnabled) + ".", nil
}

func (e *view) toggleWifiCallingTool(kwargs) (any, error) {
	return e.withStatusBar("Wi-Fi Calling is now " + onOff(e.toggleWifiCalling()) + "."), nil
}

func (e *view) checkVPNStatus(kwargs) (any, error) {
	d := e.dev()
	if d.VPNConnected {
		if d.VPNDetails != nil {
			return "VPN is ON and connected. Details: " + vpnDetailsRepr(d.VPNDetails), nil
		}
		return "VPN is ON and connected (no specific details available).", nil
	}
	if d.VPNEnabledSetting {
		return "VPN is turned ON in settings, but currently not connected.", nil
	}
	return "VPN is turned OFF.", nil
}

func (e *view) connectVPNTool(kwargs) (any, error) {
	if !e.connectVPN() {
		return "VPN already connected.", nil
	}
	return e.withStatusBar("VPN connected successfully."), nil
}

func (e *view) disconnectVPNTool(kwargs) (any, error) {
	if e.disconnectVPN() {
		return e.withStatusBar("VPN disconnected successfully."), nil
	}
	return e.withStatusBar("No active VPN connection to disconnect."), nil
}

func (e *view) checkInstalledApps(kwargs) (any, error) {
	return "The following apps are installed on the phone: " + strings.Join(e.dev().AppStatuses.Keys(), ", "), nil
}

func (e *view) checkAppStatus(k kwargs) (any, error) {
	name := k.get("app_name", nil)
	app, err := e.appLookup(name)
	if err != nil {
		return nil, err
	}
	if app == nil {
		return fmt.Sprintf("App '%s' not found on this phone.", pyStr(name)), nil
	}
	lines := []string{"Status for App: " + pyStr(name)}
	perms := grantedPermissions(app.Permissions)
	if len(perms) == 0 {
		lines = append(lines, " - Permissions: None granted.")
	} else {
		lines = append(lines, " - Permissions Granted:")
		for _, p := range perms {
			lines = append(lines, "   - "+p)
		}
	}
	return strings.Join(lines, "\n"), nil
}

func (e *view) checkAppPermissions(k kwargs) (any, error) {
	name := k.get("app_name", nil)
	app, err := e.appLookup(name)
	if err != nil {
		return nil, err
	}
	if app == nil {
		return fmt.Sprintf("App '%s' not found on this phone.", pyStr(name)), nil
	}
	perms := grantedPermissions(app.Permissions)
	if len(perms) == 0 {
		return fmt.Sprintf("App '%s' currently has no permissions granted.", pyStr(name)), nil
	}
	return fmt.Sprintf("App '%s' has permission for: %s.", pyStr(name), strings.Join(perms, ", ")), nil
}

// grantAppPermission is _grant_app_permission: (success, message).
func (e *view) grantAppPermission(appName, permission any) (bool, string, error) {
	app, err := e.appLookup(appName)
	if err != nil {
		return false, "", err
	}
	ps, ok := permission.(string)
	if !ok {
		return false, "", attrErr(permission, "lower")
	}
	ps = pyjson.Lower(ps)
	if app == nil {
		return false, fmt.Sprintf("App '%s' not found. Cannot grant permission.", pyStr(appName)), nil
	}
	if !contains(appPermissionNames, ps) {
		return false, fmt.Sprintf("Permission '%s' not tracked for app '%s', available permissions: ['sms', 'storage', 'phone', 'network']", ps, pyStr(appName)), nil
	}
	app.Permissions.set(ps, true)
	return true, fmt.Sprintf("Permission '%s' granted to app '%s'.", ps, pyStr(appName)), nil
}

func (e *view) grantAppPermissionTool(k kwargs) (any, error) {
	ok, msg, err := e.grantAppPermission(k.get("app_name", nil), k.get("permission", nil))
	if err != nil {
		return nil, err
	}
	prefix := "Error. "
	if ok {
		prefix = "Success. "
	}
	return e.withStatusBar(prefix + msg), nil
}

func (e *view) canSendMMSTool(kwargs) (any, error) {
	if e.canSendMMS() {
		return "Your messaging app can send MMS messages.", nil
	}
	return "Your messaging app cannot send MMS messages.", nil
}

func (e *view) rebootDeviceTool(kwargs) (any, error) {
	return e.withStatusBar(e.rebootDevice()), nil
}

func (e *view) checkPaymentRequest(kwargs) (any, error) {
	pr := e.sur().PaymentRequest
	if pr == nil {
		return "No payment request has been made.", nil
	}
	return fmt.Sprintf("You have a payment request for bill %s of %s USD.", pr.BillID, pyjson.FloatRepr(pr.AmountDue)), nil
}

func (e *view) makePayment(kwargs) (any, error) {
	pr := e.sur().PaymentRequest
	if pr == nil {
		return "You do not have a payment request.", nil
	}
	pr.Paid = true
	return fmt.Sprintf("Payment of %s USD has been made for bill %s.", pyjson.FloatRepr(pr.AmountDue), pr.BillID), nil
}

// ---- environment functions (initialization) ----

func optString(v any, what string) (*string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return &x, nil
	}
	return nil, fmt.Errorf("%s must be a string or null, got %s", what, pyjson.TypeName(v))
}

func (e *view) setUserInfo(k kwargs) (any, error) {
	name, err := optString(k.get("name", nil), "set_user_info: name")
	if err != nil {
		return nil, err
	}
	phone, err := optString(k.get("phone_number", nil), "set_user_info: phone_number")
	if err != nil {
		return nil, err
	}
	e.sur().Name, e.sur().PhoneNumber = name, phone
	return nil, nil
}

func (e *view) setUserLocation(k kwargs) (any, error) {
	v := k.get("abroad", nil)
	b, ok := v.(bool)
	if !ok {
		return nil, fmt.Errorf("set_user_location: abroad must be a bool, got %s", pyjson.TypeName(v))
	}
	e.sur().IsAbroad = b
	return nil, nil
}

func (e *view) turnAirplaneModeOn(kwargs) (any, error) {
	if !e.toggleAirplaneMode() {
		e.toggleAirplaneMode()
	}
	return "Airplane Mode is now ON.", nil
}

func (e *view) turnAirplaneModeOff(kwargs) (any, error) {
	if e.toggleAirplaneMode() {
		e.toggleAirplaneMode()
	}
	return "Airplane Mode is now OFF.", nil
}

func (e *view) turnDataOn(kwargs) (any, error) {
	e.dev().DataEnabled = true
	return "Data connection restored.", nil
}

func (e *view) turnDataOff(kwargs) (any, error) {
	if e.toggleData() {
		e.toggleData()
	}
	return "Data connection broken.", nil
}

func (e *view) turnRoamingOn(kwargs) (any, error) {
	if !e.toggleRoaming() {
		e.toggleRoaming()
	}
	return "Data Roaming is now ON.", nil
}

func (e *view) turnRoamingOff(kwargs) (any, error) {
	if e.toggleRoaming() {
		e.toggleRoaming()
	}
	return "Data Roaming is now OFF.", nil
}

func (e *view) turnDataSaverModeOn(kwargs) (any, error) {
	if !e.toggleDataSaver() {
		e.toggleDataSaver()
	}
	return "Data Saver Mode is now ON.", nil
}

func (e *view) turnDataSaverModeOff(kwargs) (any, error) {
	if e.toggleDataSaver() {
		e.toggleDataSaver()
	}
	return "Data Saver Mode is now OFF.", nil
}

func (e *view) unseatSimCard(kwargs) (any, error) {
	e.dev().SimCardMissing = true
	e.simulateNetworkSearch()
	return "SIM card un-seated successfully.", nil
}

func (e *view) lockSimCard(k kwargs) (any, error) {
	mode := k.get("mode", nil)
	switch mode {
	case "pin":
		e.dev().SimCardStatus = SimLockedPIN
	case "puk":
		e.dev().SimCardStatus = SimLockedPUK
	}
	e.simulateNetworkSearch()
	return fmt.Sprintf("SIM card locked successfully in %s mode.", pyStr(mode)), nil
}

func (e *view) breakAPNSettings(kwargs) (any, error) {
	e.dev().ActiveAPNSettings.APNName = APNBroken
	e.simulateNetworkSearch()
	return "APN settings broken. Please call reset_apn_settings() to fix.", nil
}

func (e *view) breakAPNMMSSetting(kwargs) (any, error) {
	e.dev().ActiveAPNSettings.MMSCURL = nil
	return "APN MMS setting broken. Please call reset_apn_settings() to fix.", nil
}

// breakVPN connects the VPN and degrades the connected server. In τ² the
// details object is the class-level default, so this also degrades every
// later connect_vpn; UserDB.vpnDefault reproduces that within the environment.
func (e *view) breakVPN(kwargs) (any, error) {
	e.connectVPN()
	if e.dev().VPNDetails == nil {
		return nil, fmt.Errorf("'NoneType' object has no attribute 'server_performance'")
	}
	e.dev().VPNDetails.ServerPerformance = PerfPoor
	return "VPN connection broken.", nil
}

func (e *view) setWifiCalling(k kwargs) (any, error) {
	en := k.get("enabled", nil)
	if !pyEqualBool(e.dev().WifiCallingEnabled, en) {
		e.toggleWifiCalling()
	}
	msg := "Wi-Fi Calling is now " + onOff(pyTruthy(en)) + "."
	if mms := k.get("mms_over_wifi", nil); mms != nil {
		b, ok := mms.(bool)
		if !ok {
			return nil, fmt.Errorf("set_wifi_calling: mms_over_wifi must be a bool or null, got %s", pyjson.TypeName(mms))
		}
		e.dev().WifiCallingMMSOverWifi = b
		msg += "\nMMS over Wi-Fi is now " + onOff(b) + "."
	}
	return msg, nil
}

func (e *view) removeAppPermission(k kwargs) (any, error) {
	appName, permission := k.get("app_name", nil), k.get("permission", nil)
	app, err := e.appLookup(appName)
	if err != nil {
		return nil, err
	}
	ps, ok := permission.(string)
	if !ok {
		return nil, attrErr(permission, "lower")
	}
	ps = pyjson.Lower(ps)
	if app == nil {
		return []any{false, fmt.Sprintf("App '%s' not found. Cannot remove permission.", pyStr(appName))}, nil
	}
	if !app.Permissions.set(ps, false) {
		return []any{false, fmt.Sprintf("Permission '%s' not tracked for app '%s'.", ps, pyStr(appName))}, nil
	}
	return []any{true, fmt.Sprintf("Permission '%s' removed from app '%s'.", ps, pyStr(appName))}, nil
}

func (e *view) simulateNetworkSearchFn(kwargs) (any, error) {
	e.simulateNetworkSearch()
	return nil, nil
}

// ---- assertions ----

func (e *view) assertAirplaneModeStatus(k kwargs) (any, error) {
	return pyEqualBool(e.dev().AirplaneMode, k.get("expected_status", nil)), nil
}

func (e *view) assertServiceStatus(k kwargs) (any, error) {
	v := k.get("expected_status", nil)
	s, ok := v.(string)
	if !ok || !contains(networkStatuses, s) {
		return nil, fmt.Errorf("%s is not a valid NetworkStatus", pyjson.Repr(v))
	}
	return e.dev().NetworkConnectionStatus == s, nil
}

func (e *view) assertMobileDataStatus(k kwargs) (any, error) {
	return pyEqualBool(e.mobileDataWorking(), k.get("expected_status", nil)), nil
}

func (e *view) assertMobileRoamingStatus(k kwargs) (any, error) {
	return pyEqualBool(e.dev().RoamingEnabled, k.get("expected_status", nil)), nil
}

func (e *view) assertMobileDataSaverModeStatus(k kwargs) (any, error) {
	return pyEqualBool(e.dev().DataSaverMode, k.get("expected_status", nil)), nil
}

func (e *view) assertInternetSpeed(k kwargs) (any, error) {
	speed, desc, _ := e.speedTest()
	exp, err := number(k.get("expected_speed", nil), ">=", "float")
	if err != nil {
		return nil, fmt.Errorf("'>=' not supported between instances of 'float' and '%s'", pyjson.TypeName(k.get("expected_speed", nil)))
	}
	ok := speed >= exp.f
	d := k.get("expected_desc", nil)
	if d == nil {
		return ok, nil
	}
	ds, isStr := d.(string)
	if !isStr {
		return nil, attrErr(d, "lower")
	}
	return ok && pyjson.Lower(desc) == pyjson.Lower(ds), nil
}

func (e *view) assertInternetNotExcellent(kwargs) (any, error) {
	_, desc, _ := e.speedTest()
	return pyjson.Lower(desc) != "excellent", nil
}

func (e *view) assertCanSendMMS(k kwargs) (any, error) {
	return pyEqualBool(e.canSendMMS(), k.get("expected_status", nil)), nil
}

func (e *view) assertMobileDataUsageExceeded(k kwargs) (any, error) {
	return pyEqualBool(e.sur().MobileDataUsageExceeded, k.get("expected_status", nil)), nil
}
