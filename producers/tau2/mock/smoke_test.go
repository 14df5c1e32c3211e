package mock

import (
	"testing"

	"tau2rl/producers/tau2/env"
)

func TestSmoke(t *testing.T) {
	e, err := env.New("mock", env.Options{})
	if err != nil {
		t.Skip(err)
	}
	for _, c := range [][3]string{
		{"assistant", "get_users", ""},
		{"assistant", "create_task", `{"user_id": "user_1", "title": "Caf\u00e9 ☕"}`},
		{"assistant", "create_task", `{"user_id": "user_1"}`},
		{"assistant", "create_task", `{"user_id": "user_1", "title": 5}`},
		{"assistant", "create_task", `{"user_id": "user_1", "x": 5}`},
		{"assistant", "nope", `{}`},
		{"assistant", "get_users", `{bad`},
		{"user", "check_notifications", ``},
		{"user", "dismiss_notification", `{"notification_id": "notif_1"}`},
	} {
		out, isErr := e.Call(c[0], c[1], c[2])
		t.Logf("%s %s -> %v %s", c[1], c[2], isErr, out)
	}
	a, u, err := e.Hashes()
	t.Log(a, u, err)
}
