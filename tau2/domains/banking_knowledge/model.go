// Package banking_knowledge is τ²-bench v1's banking_knowledge domain
// (upstream src/tau2/domains/banking_knowledge at a2c0247): a bank's
// transactional DB of free-form records, the agent's and the user's tools,
// the "discoverable" tools the agent unlocks (and hands to the user) after
// finding them in the knowledge base, and the retrieval configurations
// (tau2/knowledge) that decide which search tools the agent gets.
//
// Tool results are upstream's strings byte for byte; goldens come from
// upstream's own tools.py run by testdata/oracle.
package banking_knowledge

import (
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// Table is upstream's DatabaseTable: records by id (free-form dicts, kept
// as decoded JSON so ints and floats dump as Python does) and notes.
type Table struct {
	Data  pyjson.Map[*pyjson.Object] `json:"data" pydantic:"optional"`
	Notes string                     `json:"notes" pydantic:"optional"`
}

// DB is upstream's TransactionalDB; field order is the pydantic field order
// (the hash sorts keys anyway).
type DB struct {
	Users                        Table `json:"users" pydantic:"optional"`
	Accounts                     Table `json:"accounts" pydantic:"optional"`
	DebitCards                   Table `json:"debit_cards" pydantic:"optional"`
	Referrals                    Table `json:"referrals" pydantic:"optional"`
	CreditCardApplications       Table `json:"credit_card_applications" pydantic:"optional"`
	UserDiscoverableTools        Table `json:"user_discoverable_tools" pydantic:"optional"`
	UserDiscoverableToolCalls    Table `json:"user_discoverable_tool_calls" pydantic:"optional"`
	VerificationHistory          Table `json:"verification_history" pydantic:"optional"`
	CreditCardTransactionHistory Table `json:"credit_card_transaction_history" pydantic:"optional"`
	CashBackDisputes             Table `json:"cash_back_disputes" pydantic:"optional"`
	BankAccountTransactionHist   Table `json:"bank_account_transaction_history" pydantic:"optional"`
	CreditCardAccounts           Table `json:"credit_card_accounts" pydantic:"optional"`
	AgentDiscoverableTools       Table `json:"agent_discoverable_tools" pydantic:"optional"`
	TaskConfig                   Table `json:"task_config" pydantic:"optional"`
	HumanTransferRequests        Table `json:"human_transfer_requests" pydantic:"optional"`
	TransactionDisputes          Table `json:"transaction_disputes" pydantic:"optional"`
	CreditCardOrders             Table `json:"credit_card_orders" pydantic:"optional"`
	DebitCardOrders              Table `json:"debit_card_orders" pydantic:"optional"`
	CreditCardClosureReasons     Table `json:"credit_card_closure_reasons" pydantic:"optional"`
	CreditCardAccountFlags       Table `json:"credit_card_account_flags" pydantic:"optional"`
	CreditLimitIncreaseRequests  Table `json:"credit_limit_increase_requests" pydantic:"optional"`
	PaymentHistory               Table `json:"payment_history" pydantic:"optional"`
	DebitCardDisputes            Table `json:"debit_card_disputes" pydantic:"optional"`

	// state is the toolkit's in-memory state (unlocked and given tools),
	// which upstream keeps on the toolkit object, outside the hashed DB. It
	// lives here because the environment's DB is the one per-episode object
	// the Go tools receive; it is not encoded (no json tag).
	state *toolState `json:"-"`
}

// toolState is KnowledgeTools' per-episode state outside the DB.
type toolState struct {
	unlocked     map[string]bool
	readLogAllow map[string]bool
}

// Fork deep-copies the DB (270 KB of records; see BenchmarkNewEnvironment).
func (db *DB) Fork() env.DB {
	c := pyjson.DeepCopy(db)
	c.state = db.state.clone()
	return c
}

func (s *toolState) clone() *toolState {
	c := &toolState{unlocked: map[string]bool{}, readLogAllow: map[string]bool{}}
	if s != nil {
		for k, v := range s.unlocked {
			c.unlocked[k] = v
		}
		for k, v := range s.readLogAllow {
			c.readLogAllow[k] = v
		}
	}
	return c
}

// tables is _load_databases's list, in its order: the names
// query_database_tool accepts and lists in its "not found" error.
var tableNames = []string{"users", "accounts", "referrals", "credit_card_applications",
	"user_discoverable_tools", "user_discoverable_tool_calls", "agent_discoverable_tools",
	"task_config", "verification_history", "credit_card_transaction_history",
	"cash_back_disputes", "bank_account_transaction_history", "credit_card_accounts",
	"human_transfer_requests", "transaction_disputes", "credit_card_orders",
	"credit_card_closure_reasons", "credit_card_account_flags", "debit_cards",
	"debit_card_orders", "debit_card_disputes", "credit_limit_increase_requests",
	"payment_history"}

// table returns the named table (getattr(db, name)); nil when unknown.
func (db *DB) table(name string) *Table {
	switch name {
	case "users":
		return &db.Users
	case "accounts":
		return &db.Accounts
	case "debit_cards":
		return &db.DebitCards
	case "referrals":
		return &db.Referrals
	case "credit_card_applications":
		return &db.CreditCardApplications
	case "user_discoverable_tools":
		return &db.UserDiscoverableTools
	case "user_discoverable_tool_calls":
		return &db.UserDiscoverableToolCalls
	case "verification_history":
		return &db.VerificationHistory
	case "credit_card_transaction_history":
		return &db.CreditCardTransactionHistory
	case "cash_back_disputes":
		return &db.CashBackDisputes
	case "bank_account_transaction_history":
		return &db.BankAccountTransactionHist
	case "credit_card_accounts":
		return &db.CreditCardAccounts
	case "agent_discoverable_tools":
		return &db.AgentDiscoverableTools
	case "task_config":
		return &db.TaskConfig
	case "human_transfer_requests":
		return &db.HumanTransferRequests
	case "transaction_disputes":
		return &db.TransactionDisputes
	case "credit_card_orders":
		return &db.CreditCardOrders
	case "debit_card_orders":
		return &db.DebitCardOrders
	case "credit_card_closure_reasons":
		return &db.CreditCardClosureReasons
	case "credit_card_account_flags":
		return &db.CreditCardAccountFlags
	case "credit_limit_increase_requests":
		return &db.CreditLimitIncreaseRequests
	case "payment_history":
		return &db.PaymentHistory
	case "debit_card_disputes":
		return &db.DebitCardDisputes
	}
	return nil
}

// addToDB is add_to_db: false when the table is unknown or the id exists.
func (db *DB) addToDB(table, id string, rec *pyjson.Object) bool {
	t := db.table(table)
	if t == nil || t.Data.Has(id) {
		return false
	}
	t.Data.Set(id, rec)
	return true
}

// updateRecord is update_record_in_db.
func (db *DB) updateRecord(table, id string, updates ...any) (*pyjson.Object, bool) {
	t := db.table(table)
	if t == nil {
		return nil, false
	}
	r, ok := t.Data.Get(id)
	if !ok {
		return nil, false
	}
	for i := 0; i+1 < len(updates); i += 2 {
		r.Set(updates[i].(string), updates[i+1])
	}
	return r, true
}
