package banking_knowledge

import (
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// BenchmarkNewEnvironment is env.New after the first load (a DB fork).
func BenchmarkNewEnvironment(b *testing.B) {
	tau2test.BenchNewEnvironment(b, Domain)
}

// BenchmarkStepDiscoverableWrite is one environment step: a mutating
// discoverable tool call through the wrapper (argument JSON, binding, DB
// write, result text).
func BenchmarkStepDiscoverableWrite(b *testing.B) {
	e, err := New(env.Options{DataDir: tau2test.DataDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	e.Call(env.Assistant, "unlock_discoverable_agent_tool", `{"agent_tool_name": "transfer_funds_between_bank_accounts_7291"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Call(env.Assistant, "call_discoverable_agent_tool", `{"agent_tool_name": "transfer_funds_between_bank_accounts_7291", "arguments": "{\"source_account_id\": \"03\", \"destination_account_id\": \"04\", \"amount\": 0.01}"}`)
	}
}

// BenchmarkStepQuery is a read step that scans and formats a table.
func BenchmarkStepQuery(b *testing.B) {
	e, err := New(env.Options{DataDir: tau2test.DataDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		e.Call(env.Assistant, "get_credit_card_transactions_by_user", `{"user_id": "lj82d4f1a9"}`)
	}
}

// BenchmarkKBSearch is the bm25 configuration's KB_search over the 698
// documents, formatting included.
func BenchmarkKBSearch(b *testing.B) {
	e, err := New(env.Options{DataDir: tau2test.DataDir(b), Retrieval: "bm25"})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		e.Call(env.Assistant, "KB_search", `{"query": "how do I dispute a credit card transaction"}`)
	}
}

// BenchmarkGrep is the grep tool over the 698 documents.
func BenchmarkGrep(b *testing.B) {
	e, err := New(env.Options{DataDir: tau2test.DataDir(b), Retrieval: "grep_only"})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		e.Call(env.Assistant, "grep", `{"pattern": "provisional credit"}`)
	}
}
