package telecom

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// The phone simulation (τ²'s TelecomUserTools internals). Methods are on
// *view because a few of them read agent-side state through the user's
// surroundings, which Sync keeps up to date.

func (e *view) dev() *PhoneDevice  { return &e.user.Device }
func (e *view) sur() *Surroundings { return &e.user.Surroundings }

// simSatus is _check_sim_status: a missing SIM overrides the card status.
func (e *view) simStatus() string {
	if e.dev().SimCardMissing {
		return SimMissing
	}
	return e.dev().SimCardStatus
}

func (e *view) signalFor(tech string) string {
	if s, ok := e.sur().SignalStrength.Get(tech); ok {
		return s
	}
	return SignalNone
}

// simulateNetworkSearch re-derives connection status, technology and signal
// from the SIM, the mode preference, airplane mode, the APN and the line.
// τ² runs it only when a user action triggers a search, never from Sync.
func (e *view) simulateNetworkSearch() {
	d := e.dev()
	noService := func() {
		d.NetworkConnectionStatus = StatusNoService
		d.NetworkTechnologyConnected = TechNone
		d.NetworkSignalStrength = SignalNone
	}
	if e.simStatus() == SimActive {
		d.NetworkConnectionStatus = StatusConnected
		switch d.NetworkModePreference {
		case Mode4G5GPreferred:
			five := e.signalFor(Tech5G)
			if five == SignalNone {
				d.NetworkTechnologyConnected = Tech4G
				d.NetworkSignalStrength = e.signalFor(Tech4G)
			} else {
				d.NetworkTechnologyConnected = Tech5G
				d.NetworkSignalStrength = five
			}
		case Mode3GOnly:
			d.NetworkTechnologyConnected = Tech3G
			d.NetworkSignalStrength = e.signalFor(Tech3G)
		case Mode2GOnly:
			d.NetworkTechnologyConnected = Tech2G
			d.NetworkSignalStrength = e.signalFor(Tech2G)
		default: // 4g_only and τ²'s fallback
			d.NetworkTechnologyConnected = Tech4G
			d.NetworkSignalStrength = e.signalFor(Tech4G)
		}
	} else {
		noService()
	}
	if d.AirplaneMode || d.ActiveAPNSettings.APNName == APNBroken || !e.sur().LineActive {
		noService()
	}
}

// statusBar is _check_status_bar.
func (e *view) statusBar() string {
	d := e.dev()
	var ind []string
	if d.AirplaneMode {
		ind = append(ind, "✈️ Airplane Mode")
	} else {
		switch d.NetworkSignalStrength {
		case SignalPoor:
			ind = append(ind, "📶¹ Poor")
		case SignalFair:
			ind = append(ind, "📶² Fair")
		case SignalGood:
			ind = append(ind, "📶³ Good")
		case SignalExcellent:
			ind = append(ind, "📶⁴ Excellent")
		default:
			ind = append(ind, "📵 No Signal")
		}
		if d.NetworkTechnologyConnected != TechNone {
			ind = append(ind, d.NetworkTechnologyConnected)
		}
		if d.DataEnabled && d.NetworkTechnologyConnected != TechNone {
			ind = append(ind, "📱 Data Enabled")
			if d.DataSaverMode {
				ind = append(ind, "🔽 Data Saver")
			}
		} else {
			ind = append(ind, "📵 Data Disabled")
		}
	}
	if d.WifiEnabled && d.WifiConnected {
		if d.WifiSSID != nil && *d.WifiSSID != "" {
			ind = append(ind, "📡 Connected to "+*d.WifiSSID)
		} else {
			ind = append(ind, "📡 Enabled")
		}
	}
	if d.VPNConnected {
		ind = append(ind, "🔒 VPN Connected")
	}
	ind = append(ind, fmt.Sprintf("🔋 %d%%", d.BatteryLevel))
	return strings.Join(ind, " | ")
}

func (e *view) withStatusBar(msg string) string {
	return msg + "\nStatus Bar: " + e.statusBar()
}

// mobileDataWorking is _get_mobile_data_working.
func (e *view) mobileDataWorking() bool {
	d, s := e.dev(), e.sur()
	if d.AirplaneMode || d.NetworkSignalStrength == SignalNone {
		return false
	}
	if d.NetworkConnectionStatus == StatusNoService {
		return false
	}
	if s.IsAbroad && (!d.RoamingEnabled || !s.RoamingAllowed) {
		return false
	}
	if !d.DataEnabled {
		return false
	}
	return !s.MobileDataUsageExceeded
}

// speedTest is _run_speed_test; ok is false for "No Connection".
func (e *view) speedTest() (speed float64, desc string, ok bool) {
	if !e.mobileDataWorking() {
		return 0, "No Connection", false
	}
	d := e.dev()
	factor := 1.0
	if d.VPNConnected && d.VPNDetails != nil && d.VPNDetails.ServerPerformance == PerfPoor {
		factor = 0.1
	}
	if d.DataSaverMode {
		factor *= 0.2
	}
	var lo, hi float64
	switch d.NetworkTechnologyConnected {
	case Tech2G:
		lo, hi = 0.1, 0.4
	case Tech3G:
		lo, hi = 1.0, 5.0
	case Tech4G:
		lo, hi = 10.0, 100.0
	case Tech5G:
		lo, hi = 50.0, 500.0
	}
	var sig float64
	switch d.NetworkSignalStrength {
	case SignalPoor:
		sig = 0.2
	case SignalFair:
		sig = 0.5
	case SignalGood:
		sig = 0.8
	case SignalExcellent:
		sig = 1.0
	}
	// Same operation order as Python; the conversions forbid fused ops.
	speed = float64(float64(float64((lo+hi)/2.0)*sig) * factor)
	speed = round2(speed)
	switch {
	case speed < 1:
		desc = "Very Poor"
	case speed < 5:
		desc = "Poor"
	case speed < 25:
		desc = "Fair"
	case speed < 100:
		desc = "Good"
	default:
		desc = "Excellent"
	}
	return speed, desc, true
}

// canSendMMS is _can_send_mms.
func (e *view) canSendMMS() bool {
	d := e.dev()
	if !e.mobileDataWorking() {
		return false
	}
	if d.NetworkTechnologyConnected == Tech2G {
		return false
	}
	if d.WifiCallingEnabled && d.WifiCallingMMSOverWifi {
		return false
	}
	if d.ActiveAPNSettings.MMSCURL == nil {
		return false
	}
	app, ok := d.AppStatuses.Get("messaging")
	if !ok {
		return false
	}
	return app.Permissions.Storage && app.Permissions.SMS
}

// toggleAirplaneMode is _toggle_airplane_mode; it returns the new state.
func (e *view) toggleAirplaneMode() bool {
	d := e.dev()
	wasOn := d.AirplaneMode
	d.AirplaneMode = !wasOn
	if wasOn {
		d.NetworkConnectionStatus = StatusSearching
		if d.WifiEnabled {
			d.WifiConnected = false
			d.WifiSSID = nil
			d.WifiSignalStrength = SignalNone
		}
	} else {
		d.WifiConnected = false
		d.WifiSSID = nil
		d.WifiSignalStrength = SignalNone
		if d.VPNConnected {
			e.disconnectVPN()
		}
	}
	e.simulateNetworkSearch()
	return d.AirplaneMode
}

func (e *view) toggleData() bool {
	d := e.dev()
	d.DataEnabled = !d.DataEnabled
	e.simulateNetworkSearch()
	return d.DataEnabled
}

func (e *view) toggleRoaming() bool {
	d := e.dev()
	d.RoamingEnabled = !d.RoamingEnabled
	e.simulateNetworkSearch()
	return d.RoamingEnabled
}

func (e *view) toggleDataSaver() bool {
	d := e.dev()
	d.DataSaverMode = !d.DataSaverMode
	return d.DataSaverMode
}

// toggleWifi is _toggle_wifi; ok is false while airplane mode is on.
func (e *view) toggleWifi() (state, ok bool) {
	d := e.dev()
	if d.AirplaneMode {
		return false, false
	}
	d.WifiEnabled = !d.WifiEnabled
	if !d.WifiEnabled {
		d.WifiConnected = false
		d.WifiSSID = nil
		d.WifiSignalStrength = SignalNone
	}
	return d.WifiEnabled, true
}

func (e *view) toggleWifiCalling() bool {
	d := e.dev()
	d.WifiCallingEnabled = !d.WifiCallingEnabled
	return d.WifiCallingEnabled
}

// connectVPN is _connect_vpn: false when already connected. The device gets
// the environment's shared default details object (see UserDB.vpnDefault).
func (e *view) connectVPN() bool {
	d := e.dev()
	if d.VPNConnected {
		return false
	}
	d.VPNConnected = true
	d.VPNDetails = e.user.vpnDefault
	return true
}

func (e *view) disconnectVPN() bool {
	d := e.dev()
	if !d.VPNConnected {
		return false
	}
	d.VPNConnected = false
	d.VPNDetails = nil
	return true
}

// rebootDevice is _reboot_device.
func (e *view) rebootDevice() string {
	d := e.dev()
	var lines []string
	if d.ActiveAPNSettings.ResetAtReboot {
		lines = append(lines, "Resetting APN settings...")
		d.ActiveAPNSettings = DefaultAPNSettings()
	}
	lines = append(lines, "Restarting network services...")
	d.NetworkConnectionStatus = StatusSearching
	e.simulateNetworkSearch()
	return strings.Join(lines, "\n")
}

// appLookup is `device.app_statuses.get(app_name)`: unhashable keys raise,
// other non-strings simply miss.
func (e *view) appLookup(appName any) (*AppStatus, error) {
	if err := unhashable(appName); err != nil {
		return nil, err
	}
	s, isStr := appName.(string)
	if !isStr {
		return nil, nil
	}
	a, _ := e.dev().AppStatuses.Get(s)
	return a, nil
}

// grantedPermissions lists the granted permission names in field order.
func grantedPermissions(p AppPermissions) []string {
	var out []string
	for _, name := range appPermissionNames {
		if p.get(name) {
			out = append(out, name)
		}
	}
	return out
}

// vpnDetailsRepr is Python's repr of VpnDetails.model_dump() (python mode:
// the performance stays an Enum member).
func vpnDetailsRepr(v *VPNDetails) string {
	optRepr := func(p *string) string {
		if p == nil {
			return "None"
		}
		return pyjson.Repr(*p)
	}
	return fmt.Sprintf("{'server_address': %s, 'protocol': %s, 'server_performance': <PerformanceLevel.%s: %s>}",
		optRepr(v.ServerAddress), optRepr(v.Protocol), strings.ToUpper(v.ServerPerformance), pyjson.Repr(v.ServerPerformance))
}
