package telecom

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

func fixtureEnv(t testing.TB) *env.Environment {
	t.Helper()
	e, err := NewEnvironment(fixtureData(t), "policy", DomainManual, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.RunEnvFunction(env.User, "set_user_info", pyjson.NewObject("name", "Zoë", "phone_number", "555-000-0001")); err != nil {
		t.Fatal(err)
	}
	return e
}

func userDB(e *env.Environment) *UserDB { return e.User.DB.(*UserDB) }

// TestInitialStateFailsAssertions is the control for the gold-replay test:
// before the gold actions run, every base task whose gold changes state
// must fail at least one of its assertions.
func TestInitialStateFailsAssertions(t *testing.T) {
	for _, task := range loadSplit(t, "base") {
		mutating := false
		for _, a := range task.EvaluationCriteria.Actions {
			if a.Name != "transfer_to_human_agents" {
				mutating = true
			}
		}
		if !mutating {
			continue
		}
		e, err := env.New(DomainManual, env.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := InitTask(e, task); err != nil {
			t.Fatal(err)
		}
		res, err := CheckAssertions(e, task)
		if err != nil {
			t.Fatal(err)
		}
		allMet := true
		for _, r := range res {
			allMet = allMet && r.Met
		}
		if allMet {
			t.Errorf("%s: assertions already met before the gold actions", task.ID)
		}
	}
}

// TestDeviationsDoNotCorruptDevice covers the two calls where τ² stores a
// non-validated argument in the device before failing; the Go port fails
// first and leaves the device unchanged.
func TestDeviationsDoNotCorruptDevice(t *testing.T) {
	for _, tc := range []struct{ name, args string }{
		{"set_network_mode_preference", `{"mode": 4}`},
		{"set_network_mode_preference", `{"mode": null}`},
		{"set_apn_settings", `{"apn_settings": "internet"}`},
		{"set_apn_settings", `{"apn_settings": ["broken"]}`},
	} {
		e := fixtureEnv(t)
		before, _ := pyjson.DumpsSorted(e.User.DB)
		content, isErr := e.Call(env.User, tc.name, tc.args)
		if !isErr || !strings.HasPrefix(content, "Error: ") {
			t.Errorf("%s(%s): %q, want a tool error", tc.name, tc.args, content)
		}
		if after, _ := pyjson.DumpsSorted(e.User.DB); after != before {
			t.Errorf("%s(%s) changed the device", tc.name, tc.args)
		}
	}
}

// TestVPNDefaultSharedWithinEnvironment pins the documented scope of τ²'s
// class-level default_vpn_details quirk.
func TestVPNDefaultSharedWithinEnvironment(t *testing.T) {
	e := fixtureEnv(t)
	if _, err := e.RunEnvFunction(env.User, "break_vpn", nil); err != nil {
		t.Fatal(err)
	}
	e.Call(env.User, "disconnect_vpn", "")
	e.Call(env.User, "connect_vpn", "")
	if got := userDB(e).Device.VPNDetails.ServerPerformance; got != PerfPoor {
		t.Errorf("reconnect after break_vpn: %s, want poor (τ²'s shared default)", got)
	}
	// A fork keeps the aliasing; a fresh environment is unaffected.
	f := e.Fork()
	f.Call(env.User, "disconnect_vpn", "")
	f.Call(env.User, "connect_vpn", "")
	if got := userDB(f).Device.VPNDetails.ServerPerformance; got != PerfPoor {
		t.Errorf("forked env: %s, want poor", got)
	}
	g := fixtureEnv(t)
	g.Call(env.User, "connect_vpn", "")
	if got := userDB(g).Device.VPNDetails.ServerPerformance; got != PerfExcellent {
		t.Errorf("fresh env: %s, want excellent", got)
	}
}

// TestRefuelCreatesDraftBill covers the branch τ² fills with a random bill
// id: here the id is deterministic and shaped like τ²'s.
func TestRefuelCreatesDraftBill(t *testing.T) {
	for range 2 {
		e, err := NewEnvironment(fixtureData(t), "p", DomainManual, false)
		if err != nil {
			t.Fatal(err)
		}
		// C2 has no Draft bill.
		content, isErr := e.Call(env.Assistant, "refuel_data", `{"customer_id": "C2", "line_id": "L3", "gb_amount": 1.5}`)
		if isErr {
			t.Fatal(content)
		}
		want := `{"message": "Successfully added 1.5 GB of data for line L3 for $0.15", "new_data_refueling_gb": "1.5", "charge": "0.15000000000000002"}`
		if content != want {
			t.Errorf("got %s\nwant %s", content, want)
		}
		db := e.Agent.DB.(*DB)
		nb := db.Bills[len(db.Bills)-1]
		if nb.BillID != "B7e1ec004" || nb.Status != BillDraft || nb.PeriodStart.String() != "2025-03-01" ||
			nb.PeriodEnd.String() != "2025-03-31" || nb.DueDate.String() != "2025-03-15" || len(nb.LineItems) != 1 {
			t.Errorf("new draft bill %+v", nb)
		}
		if c := db.Customers[1]; c.BillIDs[len(c.BillIDs)-1] != nb.BillID {
			t.Errorf("bill not linked to customer: %v", c.BillIDs)
		}
	}
}

// TestInitializationData merges agent_data and user_data like τ²'s
// update_pydantic_model_with_dict (recursive dict merge, lists replaced,
// re-validated; unknown fields rejected).
func TestInitializationData(t *testing.T) {
	e := fixtureEnv(t)
	user, _ := pyjson.LoadsObject(`{"device": {"airplane_mode": true, "app_statuses": {"camera": {"permissions": {"storage": true}}}}}`)
	if err := e.ApplyInitializationData(nil, user); err != nil {
		t.Fatal(err)
	}
	d := userDB(e).Device
	cam, _ := d.AppStatuses.Get("camera")
	if !d.AirplaneMode || !cam.Permissions.Storage || cam.AppName != "camera" || d.WifiSSID == nil {
		t.Errorf("merged device: airplane=%v camera=%+v", d.AirplaneMode, cam)
	}
	if got := strings.Join(d.AppStatuses.Keys(), ","); got != "messaging,camera,browser" {
		t.Errorf("app order %s", got)
	}
	e2 := fixtureEnv(t)
	agent, _ := pyjson.LoadsObject(`{"plans": [{"plan_id": "PX", "name": "X", "data_limit_gb": 1, "price_per_month": 1, "data_refueling_price_per_gb": 1}]}`)
	if err := e2.ApplyInitializationData(agent, nil); err != nil {
		t.Fatal(err)
	}
	if db := e2.Agent.DB.(*DB); len(db.Plans) != 1 || db.Plans[0].PlanID != "PX" || len(db.Lines) != 3 {
		t.Errorf("merged plans %+v", db.Plans)
	}
	bad, _ := pyjson.LoadsObject(`{"device": {"no_such_field": 1}}`)
	if err := fixtureEnv(t).ApplyInitializationData(nil, bad); err == nil {
		t.Error("unknown user DB field accepted")
	}
}

func TestLoadErrors(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "fixture", "db.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", "[[plans]\n", "parse toml"},
		{"extra field", string(good) + "\nextra = 1\n", "Extra inputs are not permitted"},
		{"bad enum", strings.Replace(string(good), `status = "Paid"`, `status = "Gone"`, 1), "Input should be 'Draft'"},
		{"bad date", strings.Replace(string(good), `due_date = "2025-01-19"`, `due_date = "2025-02-30"`, 1), "valid date"},
		{"missing field", strings.Replace(string(good), `plan_id = "P1"`+"\n", "", 1), "Field required"},
		{"wrong type", strings.Replace(string(good), `price_per_month = 20.5`, `price_per_month = "x"`, 1), "valid number"},
	} {
		_, err := ParseDB([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseUserDB([]byte("[device]\nsim_card_status = \"gone\"\n")); err == nil {
		t.Error("bad sim status accepted")
	}
	if _, err := LoadDir(t.TempDir()); err == nil {
		t.Error("missing files accepted")
	}
	// The real files load and match τ²'s defaults where user_db.toml is silent.
	u, err := ParseUserDB([]byte("[device]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Device.BatteryLevel != 80 || u.Device.ActiveAPNSettings.MMSCURL == nil || u.Surroundings.SignalStrength.Len() != 4 {
		t.Errorf("defaults %+v", u.Device)
	}
}

func TestDateTimeParsing(t *testing.T) {
	for in, want := range map[string]string{
		"2025-01-20T14:30:00":       "2025-01-20 14:30:00",
		"2025-01-20 14:30":          "2025-01-20 14:30:00",
		"2025-01-20":                "2025-01-20 00:00:00",
		"2025-01-20T14:30:00.5":     "2025-01-20 14:30:00.500000",
		"2025-01-20T14:30:00Z":      "2025-01-20 14:30:00+00:00",
		"2025-01-20T14:30:00-05:30": "2025-01-20 14:30:00-05:30",
	} {
		got, err := parseDateTime(in)
		if err != nil || got.String() != want {
			t.Errorf("%s: %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "2025-13-01", "2025-01-20T25:00:00", "2025-01-20X10:00", "2025-01-20T10:00:00.1234567"} {
		if _, err := parseDateTime(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzToolCall feeds arbitrary argument JSON to every tool: the result is
// always a tool message, never a panic inside a tool.
func FuzzToolCall(f *testing.F) {
	names := append(AgentToolkit.Names(), UserToolkit.Names()...)
	for i, n := range names {
		f.Add(uint8(i), n, `{}`)
	}
	f.Add(uint8(0), "", `{"phone_number": "555-000-0001"}`)
	f.Add(uint8(12), "", `{"customer_id": "C1", "line_id": "L1", "gb_amount": 1e999}`)
	f.Add(uint8(12), "", `{"customer_id": "C1", "line_id": "L1", "gb_amount": NaN}`)
	f.Add(uint8(6), "", `{"customer_id": "C1", "limit": 99999999999999999999}`)
	f.Add(uint8(26), "", `{"apn_settings": {"mms_port": 1.5}}`)
	f.Add(uint8(38), "", `{"app_name": {"x": [1]}, "permission": "sms"}`)
	f.Add(uint8(3), "", `[1, 2`)
	data := fixtureData(f)
	f.Fuzz(func(t *testing.T, idx uint8, name, args string) {
		if name == "" {
			name = names[int(idx)%len(names)]
		}
		e, err := NewEnvironment(data, "p", DomainManual, false)
		if err != nil {
			t.Fatal(err)
		}
		e.RunEnvFunction(env.User, "set_user_info", pyjson.NewObject("name", "x", "phone_number", "555-000-0001"))
		for _, req := range []string{env.Assistant, env.User} {
			obj, derr := env.DecodeArguments(args)
			if derr != nil {
				if content, isErr := e.Call(req, name, args); !isErr {
					t.Fatalf("malformed args %q gave a result: %s", args, content)
				}
				continue
			}
			if _, err := e.MakeToolCall(req, name, obj); err != nil {
				var p *env.PanicError
				if errors.As(err, &p) {
					t.Fatalf("%s(%s) panicked: %v\n%s", name, args, p.Value, p.Stack)
				}
			}
			content, _ := e.CallObject(req, name, obj)
			if strings.Contains(content, "internal error in") {
				t.Fatalf("%s(%s): %s", name, args, content)
			}
		}
	})
}

// FuzzParseDB feeds arbitrary TOML to both DB parsers: errors, never panics.
func FuzzParseDB(f *testing.F) {
	for _, name := range []string{"db.toml", "user_db.toml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fixture", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("[device.app_statuses.x]\napp_name = 1\n"))
	f.Add([]byte("[[lines]]\nline_id = 1979-05-27T07:32:00Z\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if db, err := ParseDB(b); err == nil {
			if _, err := pyjson.DumpsSorted(db); err != nil {
				t.Fatalf("valid DB does not dump: %v", err)
			}
			db.Clone()
		}
		if u, err := ParseUserDB(b); err == nil {
			if _, err := pyjson.DumpsSorted(u); err != nil {
				t.Fatalf("valid user DB does not dump: %v", err)
			}
			u.Clone()
		}
	})
}

func FuzzParseDateTime(f *testing.F) {
	for _, s := range []string{"2025-01-20T14:30:00", "2025-01-20", "2025-01-20T14:30:00.123+01:00", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDateTime(s)
		if err == nil {
			if _, err := parseDateTime(strings.Replace(d.String(), " ", "T", 1)); err != nil {
				t.Fatalf("%q -> %q does not reparse: %v", s, d, err)
			}
		}
	})
}
