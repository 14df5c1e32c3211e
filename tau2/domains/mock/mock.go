// Package mock is τ²'s small "mock" domain (src/tau2/domains/mock): a task
// list with users on the agent side and a notification inbox on the user
// side. It exercises every framework feature (user tools, env functions,
// assertions, initialization data and actions, message history) with tiny
// data, so it is the domain of choice for tests of the episode and
// evaluator code. It registers itself as "mock".
package mock

import (
	_ "embed"
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// Task is a to-do item (mock data_model.Task).
type Task struct {
	TaskID      string  `json:"task_id"`
	Title       string  `json:"title"`
	Description *string `json:"description"`
	Status      string  `json:"status"` // "pending" | "completed"
}

// User owns tasks.
type User struct {
	UserID string   `json:"user_id"`
	Name   string   `json:"name"`
	Tasks  []string `json:"tasks"`
}

// DB is τ²'s MockDB.
type DB struct {
	Tasks pyjson.Map[*Task] `json:"tasks"`
	Users pyjson.Map[*User] `json:"users"`
}

// Fork deep-copies the (tiny) DB.
func (db *DB) Fork() env.DB { return pyjson.DeepCopy(db) }

// Notification is an inbox entry (mock user_data_model.Notification).
type Notification struct {
	NotificationID string  `json:"notification_id"`
	Message        string  `json:"message"`
	Status         string  `json:"status" pydantic:"optional"` // "unread" | "read"
	TaskID         *string `json:"task_id"`
}

// SetDefaults sets status's default ("unread").
func (n *Notification) SetDefaults() { n.Status = "unread" }

// UserDB is τ²'s MockUserDB.
type UserDB struct {
	Notifications pyjson.Map[*Notification] `json:"notifications" pydantic:"optional"`
}

// Fork deep-copies the DB.
func (db *UserDB) Fork() env.DB { return pyjson.DeepCopy(db) }

var (
	//go:embed agent_tools.json
	agentSchemasJSON string
	//go:embed user_tools.json
	userSchemasJSON string

	agentSchemas = env.MustParseSchemas(agentSchemasJSON)
	userSchemas  = env.MustParseSchemas(userSchemasJSON)
)

// AgentToolkit is MockTools.
var AgentToolkit = env.MustToolkit("MockTools", []*env.Tool{
	env.NewTool("create_task", env.Write, agentSchemas.Get("create_task"), createTask),
	env.NewTool("get_users", env.Read, agentSchemas.Get("get_users"), func(db *DB, a *env.Args) (any, error) {
		return db.Users.Values(), nil
	}),
	env.NewTool("update_task_status", env.Write, agentSchemas.Get("update_task_status"), updateTaskStatus),
	env.NewTool("transfer_to_human_agents", env.Generic, agentSchemas.Get("transfer_to_human_agents"), func(db *DB, a *env.Args) (any, error) {
		a.Str("summary")
		if err := a.Err(); err != nil {
			return nil, err
		}
		return "Transfer successful", nil
	}),
},
	env.NewEnvFunc("assert_number_of_tasks", []env.Param{{Name: "user_id", Required: true}, {Name: "expected_number", Required: true}},
		func(db *DB, a *env.Args) (any, error) {
			uid, n := a.Str("user_id"), a.Raw("expected_number")
			if err := a.Err(); err != nil {
				return nil, err
			}
			u, ok := db.Users.Get(uid)
			if !ok {
				return nil, fmt.Errorf("User %s not found", uid)
			}
			return pyEqualInt(int64(len(u.Tasks)), n), nil
		}),
	env.NewEnvFunc("assert_task_status", []env.Param{{Name: "task_id", Required: true}, {Name: "expected_status", Required: true}},
		func(db *DB, a *env.Args) (any, error) {
			id := a.Str("task_id")
			if err := a.Err(); err != nil {
				return nil, err
			}
			t, ok := db.Tasks.Get(id)
			if !ok {
				return nil, fmt.Errorf("Task %s not found", id)
			}
			return a.Raw("expected_status") == any(t.Status), nil
		}),
)

// pyEqualInt is Python's `n == v` for an int n and an arbitrary JSON value.
func pyEqualInt(n int64, v any) bool {
	switch x := v.(type) {
	case int64:
		return n == x
	case float64:
		return float64(n) == x
	case bool:
		return (n == 1 && x) || (n == 0 && !x)
	}
	return false
}

func createTask(db *DB, a *env.Args) (any, error) {
	uid, title := a.Str("user_id"), a.Str("title")
	desc := a.OptStr("description", nil)
	if err := a.Err(); err != nil {
		return nil, err
	}
	u, ok := db.Users.Get(uid)
	if !ok {
		return nil, fmt.Errorf("User %s not found", uid)
	}
	id := fmt.Sprintf("task_%d", db.Tasks.Len()+1)
	t := &Task{TaskID: id, Title: title, Description: desc, Status: "pending"}
	db.Tasks.Set(id, t)
	u.Tasks = append(u.Tasks, id)
	return t, nil
}

func updateTaskStatus(db *DB, a *env.Args) (any, error) {
	id, status := a.Str("task_id"), a.Str("status")
	if err := a.Err(); err != nil {
		return nil, err
	}
	t, ok := db.Tasks.Get(id)
	if !ok {
		return nil, fmt.Errorf("Task %s not found", id)
	}
	// pydantic does not validate on attribute assignment: τ² stores any
	// status string here.
	t.Status = status
	return t, nil
}

// UserToolkit is MockUserTools.
var UserToolkit = env.MustToolkit("MockUserTools", []*env.Tool{
	env.NewTool("check_notifications", env.Read, userSchemas.Get("check_notifications"), func(db *UserDB, a *env.Args) (any, error) {
		return db.Notifications.Values(), nil
	}),
	env.NewTool("dismiss_notification", env.Write, userSchemas.Get("dismiss_notification"), func(db *UserDB, a *env.Args) (any, error) {
		id := a.Str("notification_id")
		if err := a.Err(); err != nil {
			return nil, err
		}
		n, ok := db.Notifications.Get(id)
		if !ok {
			return nil, fmt.Errorf("Notification %s not found", id)
		}
		n.Status = "read"
		return fmt.Sprintf("Notification %s dismissed", id), nil
	}),
},
	env.NewEnvFunc("add_notification", []env.Param{{Name: "notification_id", Required: true}, {Name: "message", Required: true}, {Name: "task_id"}},
		func(db *UserDB, a *env.Args) (any, error) {
			id, msg := a.Str("notification_id"), a.Str("message")
			tid := a.OptStr("task_id", nil)
			if err := a.Err(); err != nil {
				return nil, err
			}
			n := &Notification{NotificationID: id, Message: msg, Status: "unread", TaskID: tid}
			db.Notifications.Set(id, n)
			return n, nil
		}),
	env.NewEnvFunc("assert_notification_status", []env.Param{{Name: "notification_id", Required: true}, {Name: "expected_status", Required: true}},
		func(db *UserDB, a *env.Args) (any, error) {
			id := a.Str("notification_id")
			if err := a.Err(); err != nil {
				return nil, err
			}
			n, ok := db.Notifications.Get(id)
			if !ok {
				return nil, fmt.Errorf("Notification %s not found", id)
			}
			return a.Raw("expected_status") == any(n.Status), nil
		}),
)

// base is the data loaded once per process and data directory.
type base struct {
	db, userDB         env.DB
	policy, policySolo string
}

// Load reads the mock DBs and policies of a data directory once.
func load(dataDir string) (*base, error) {
	return env.LoadOnce("mock:"+dataDir, func() (*base, error) {
		b := &base{}
		var db DB
		var udb UserDB
		for _, f := range []struct {
			name string
			out  any
			dst  *string
		}{{"db.json", &db, nil}, {"user_db.json", &udb, nil}, {"policy.md", nil, &b.policy}, {"policy_solo.md", nil, &b.policySolo}} {
			text, err := data.ReadFile(dataDir, "mock", f.name)
			if err != nil {
				return nil, err
			}
			if f.dst != nil {
				*f.dst = text
				continue
			}
			if err := pyjson.Unmarshal([]byte(text), f.out); err != nil {
				return nil, fmt.Errorf("mock: %s: %w", f.name, err)
			}
		}
		b.db, b.userDB = &db, &udb
		return b, nil
	})
}

// New builds a fresh mock environment (τ²'s mock get_environment).
func New(opts env.Options) (*env.Environment, error) {
	dir, err := data.Dir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	b, err := load(dir)
	if err != nil {
		return nil, err
	}
	e := &env.Environment{
		Domain: "mock",
		Policy: b.policy,
		Agent:  env.Side{Toolkit: AgentToolkit, DB: b.db.Fork()},
		User:   env.Side{Toolkit: UserToolkit, DB: b.userDB.Fork()},
	}
	if opts.Solo {
		e.Policy = b.policySolo
		if err := e.EnableSolo(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func init() { env.Register("mock", New) }
